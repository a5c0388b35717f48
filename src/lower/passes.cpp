#include "lower/passes.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/model/memory.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::lower {

using cost::CollectiveKind;
using model::Pass;
using spec::ParallelDim;

namespace {
constexpr ParallelDim kTp[] = {ParallelDim::Tp};
constexpr ParallelDim kCp[] = {ParallelDim::Cp};
constexpr ParallelDim kEp[] = {ParallelDim::Ep};
// Share of a layer's stored activations that zero-bubble schedules keep from B until W: the inputs
// of the GEMMs (X of dW = Xᵀ·dY) and the output gradients.
constexpr double kWeightGradShare = 0.5;
}  // namespace

class Passes::Writer {
 public:
  // `prefix` is "F# ", "B# " or "W# "; '#' stands for the micro-batch.
  Writer(Passes& passes, int stage, std::string prefix, int microbatch)
      : p_(passes), stage_(stage), prefix_(std::move(prefix)), microbatch_(microbatch) {}
  // A writer that issues nothing and adds up, into `elapsed`, how long the pass keeps the compute
  // stream busy without contention: its kernels and the collectives the stream waits for.
  Writer(Passes& passes, int stage, Duration& elapsed)
      : p_(passes), stage_(stage), microbatch_(0), elapsed_(&elapsed) {}

  void add(int unit, std::initializer_list<std::string_view> ops, const std::vector<Pass>& passes) {
    const auto& present = p_.ops_of(unit);
    for (const auto pass : passes)
      for (const auto op : ops)
        if (std::any_of(present.begin(), present.end(), [&](const model::Op& o) { return o.name == op; }))
          queued_.push_back({unit, {op, pass}});
  }

  TaskList flush(Category category) {
    if (queued_.empty()) return last_;
    std::vector<Kernel> kernels;
    for (const auto& [unit, k] : queued_) kernels.push_back(k);
    const int unit = queued_.front().first;
    if (elapsed_ != nullptr) {
      *elapsed_ += p_.duration(unit, kernels);
      queued_.clear();
      return last_;
    }
    const auto label =
        fmt::format("{}{} {}..{}", prefix_, unit_name(unit), queued_.front().second.op, queued_.back().second.op);
    last_ = p_.ctx_.compute(stage_, {label, microbatch_}, p_.duration(unit, kernels), category);
    queued_.clear();
    return last_;
  }

  // Communication between compute: the kernels so far, then the collective, then the compute
  // stream waits for it.
  void comm(std::string_view what, CollectiveKind kind, Bytes bytes, std::span<const ParallelDim> dims,
            StreamKind stream, Category category) {
    flush(Category::Compute);
    if (elapsed_ != nullptr) {
      auto& ctx = p_.ctx_;
      const int rank = ctx.rank(ctx.stage_ranks(stage_).front()).rank;
      *elapsed_ +=
          ctx.costs().cost(cost::make_collective(kind, bytes), cost::Group{ctx.placement().group(dims, rank)}).time;
      return;
    }
    if (!last_.empty()) p_.ctx_.wait(stage_, stream, last_);
    const auto c = p_.ctx_.collective(stage_, {fmt::format("{}{}", prefix_, what), microbatch_}, kind, bytes, dims,
                                      stream, category);
    p_.ctx_.wait(stage_, StreamKind::Compute, c);
  }

  const TaskList& last() const { return last_; }

 private:
  static std::string unit_name(int unit) {
    if (unit == kEmbeddingUnit) return "embedding";
    if (unit == kHeadUnit) return "head";
    return fmt::format("L{}", unit);
  }

  Passes& p_;
  int stage_;
  std::string prefix_;
  int microbatch_;
  std::vector<std::pair<int, Kernel>> queued_;
  TaskList last_;
  Duration* elapsed_ = nullptr;
};

Passes::Passes(Context& ctx, DataParallel& dp)
    : ctx_(ctx), dp_(dp), split_(splits_weight_grad(ctx.job().strategy.schedule)) {}

const std::vector<model::Op>& Passes::ops_of(int unit) {
  const auto& m = ctx_.job().workload.model;
  const int key = unit < 0 ? unit : (model::is_moe_layer(m, unit) ? 1 : 0);
  auto it = ops_.find(key);
  if (it != ops_.end()) return it->second;
  std::vector<model::Op> ops;
  if (key == kEmbeddingUnit)
    ops = model::embedding_ops(m, ctx_.shape());
  else if (key == kHeadUnit)
    ops = model::head_ops(m, ctx_.shape());
  else
    ops = model::layer_ops(m, ctx_.shape(), key == 1);
  return ops_.emplace(key, std::move(ops)).first->second;
}

Duration Passes::duration(int unit, const std::vector<Kernel>& kernels) {
  const auto& m = ctx_.job().workload.model;
  const int key = unit < 0 ? unit : (model::is_moe_layer(m, unit) ? 1 : 0);
  std::string signature;
  for (const auto& k : kernels) signature += fmt::format("{}:{};", k.op, static_cast<int>(k.pass));
  auto [it, inserted] = durations_.try_emplace({key, signature}, Duration::zero());
  if (!inserted) return it->second;
  const auto& ops = ops_of(unit);
  for (const auto& k : kernels)
    for (const auto& op : ops)
      if (op.name == k.op) it->second += model::kernel_time(op, k.pass, ctx_.kernels());
  return it->second;
}

std::int64_t Passes::stored_activations(int unit) const {
  const auto& m = ctx_.job().workload.model;
  const auto& shape = ctx_.shape();
  if (unit == kEmbeddingUnit) return static_cast<std::int64_t>(model::embedding_activation_bytes(m, shape));
  if (unit == kHeadUnit) return static_cast<std::int64_t>(model::head_activation_bytes(m, shape));
  auto recompute = ctx_.job().strategy.recompute;
  // flash attention never stores the attention scores: as selective recomputation does
  if (recompute == spec::Recompute::None && ctx_.kernels().attention == model::AttentionKind::Flash)
    recompute = spec::Recompute::Selective;
  return static_cast<std::int64_t>(model::layer_activation_bytes(m, shape, recompute, model::is_moe_layer(m, unit)));
}

std::int64_t Passes::recompute_activations(int unit) const {
  const auto& m = ctx_.job().workload.model;
  if (unit < 0 || ctx_.job().strategy.recompute != spec::Recompute::Full) return 0;
  const auto kept =
      ctx_.kernels().attention == model::AttentionKind::Flash ? spec::Recompute::Selective : spec::Recompute::None;
  return static_cast<std::int64_t>(model::layer_activation_bytes(m, ctx_.shape(), kept, model::is_moe_layer(m, unit)));
}

void Passes::unit_forward(Writer& w, int unit, Category category) {
  const auto& job = ctx_.job();
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1;
  const Bytes act = Bytes::from_double(static_cast<double>(s.micro_batch * (s.seq_len / s.cp)) *
                                       static_cast<double>(job.workload.model.hidden) * 2.0);
  const auto tp_out = s.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  const std::vector<Pass> fwd{Pass::Forward};
  if (unit == kEmbeddingUnit) {
    w.add(unit, {"embedding"}, fwd);
    if (tp) w.comm("embedding tp", tp_out, act, kTp, StreamKind::TpComm, Category::TpComm);
    w.flush(category);
    return;
  }
  if (unit == kHeadUnit) {
    w.add(unit, {"final_norm"}, fwd);
    if (s.sp) w.comm("head tp all-gather", CollectiveKind::AllGather, act, kTp, StreamKind::TpComm, Category::TpComm);
    w.add(unit, {"logits", "loss"}, fwd);
    // vocab-parallel cross-entropy: max and sum of the logits across tp ranks
    if (tp)
      w.comm("cross-entropy tp all-reduce", CollectiveKind::AllReduce, Bytes{s.micro_batch * (s.seq_len / s.cp) * 8},
             kTp, StreamKind::TpComm, Category::TpComm);
    w.flush(category);
    return;
  }
  const auto& m = job.workload.model;
  const bool moe = model::is_moe_layer(m, unit);
  w.add(unit, {"norm1"}, fwd);
  if (s.sp) w.comm("tp all-gather", CollectiveKind::AllGather, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(unit, {"qkv", "rope"}, fwd);
  if (s.cp > 1)
    w.comm("cp kv all-gather", CollectiveKind::AllGather, kv_gather_bytes(), kCp, StreamKind::CpComm, Category::CpComm);
  w.add(unit, {"attention", "out_proj"}, fwd);
  if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_out, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(unit, {"residual1", "norm2"}, fwd);
  if (s.sp) w.comm("tp all-gather", CollectiveKind::AllGather, act, kTp, StreamKind::TpComm, Category::TpComm);
  if (moe) {
    w.add(unit, {"router", "permute"}, fwd);
    if (s.ep > 1)
      w.comm("ep dispatch", CollectiveKind::AllToAll, all_to_all_bytes(), kEp, StreamKind::EpComm, Category::EpComm);
    w.add(unit, {"expert_fc1", "expert_act", "expert_fc2"}, fwd);
    if (s.ep > 1)
      w.comm("ep combine", CollectiveKind::AllToAll, all_to_all_bytes(), kEp, StreamKind::EpComm, Category::EpComm);
    w.add(unit, {"unpermute", "shared_fc1", "shared_act", "shared_fc2"}, fwd);
  } else {
    w.add(unit, {"fc1", "act", "fc2"}, fwd);
  }
  if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_out, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(unit, {"residual2"}, fwd);
  w.flush(category);
}

void Passes::unit_backward(Writer& w, int unit, bool weights) {
  const auto& job = ctx_.job();
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1;
  const Bytes act = Bytes::from_double(static_cast<double>(s.micro_batch * (s.seq_len / s.cp)) *
                                       static_cast<double>(job.workload.model.hidden) * 2.0);
  // backward of a column-parallel input: all-reduce (SP: reduce-scatter); of an SP reduce-scatter: all-gather
  const auto tp_in = s.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  const std::vector<Pass> bwd =
      weights ? std::vector<Pass>{Pass::BackwardData, Pass::BackwardWeight} : std::vector<Pass>{Pass::BackwardData};
  if (unit == kEmbeddingUnit) {
    w.add(unit, {"embedding"}, bwd);
    w.flush(Category::Compute);
    return;
  }
  if (unit == kHeadUnit) {
    w.add(unit, {"loss", "logits"}, bwd);
    if (tp) w.comm("head tp grad", tp_in, act, kTp, StreamKind::TpComm, Category::TpComm);
    w.add(unit, {"final_norm"}, bwd);
    w.flush(Category::Compute);
    return;
  }
  const auto& m = job.workload.model;
  const bool moe = model::is_moe_layer(m, unit);
  w.add(unit, {"residual2"}, bwd);
  if (s.sp) w.comm("tp all-gather", CollectiveKind::AllGather, act, kTp, StreamKind::TpComm, Category::TpComm);
  if (moe) {
    w.add(unit, {"unpermute", "shared_fc2", "shared_act", "shared_fc1"}, bwd);
    if (s.ep > 1)
      w.comm("ep combine grad", CollectiveKind::AllToAll, all_to_all_bytes(), kEp, StreamKind::EpComm,
             Category::EpComm);
    w.add(unit, {"expert_fc2", "expert_act", "expert_fc1"}, bwd);
    if (s.ep > 1)
      w.comm("ep dispatch grad", CollectiveKind::AllToAll, all_to_all_bytes(), kEp, StreamKind::EpComm,
             Category::EpComm);
    w.add(unit, {"permute", "router"}, bwd);
  } else {
    w.add(unit, {"fc2", "act", "fc1"}, bwd);
  }
  if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_in, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(unit, {"norm2", "residual1"}, bwd);
  if (s.sp) w.comm("tp all-gather", CollectiveKind::AllGather, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(unit, {"out_proj"}, bwd);
  if (job.strategy.recompute == spec::Recompute::Selective &&
      ctx_.kernels().attention == model::AttentionKind::Unfused) {
    w.flush(Category::Compute);
    w.add(unit, {"attention"}, {Pass::Forward});  // selective recomputation: the attention core again
    w.flush(Category::Recompute);
  }
  w.add(unit, {"attention"}, bwd);
  if (s.cp > 1)
    w.comm("cp kv reduce-scatter", CollectiveKind::ReduceScatter, kv_gather_bytes(), kCp, StreamKind::CpComm,
           Category::CpComm);
  w.add(unit, {"rope", "qkv"}, bwd);
  if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_in, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(unit, {"norm1"}, bwd);
  w.flush(Category::Compute);
}

Passes::UnitTimes Passes::unit_times(int stage, int unit) {
  UnitTimes t;
  {
    Writer w(*this, stage, t.forward);
    unit_forward(w, unit, Category::Compute);
  }
  {
    Writer w(*this, stage, t.backward_data);
    unit_backward(w, unit, false);
  }
  {
    Writer w(*this, stage, t.weight);
    for (const auto& op : ops_of(unit)) w.add(unit, {op.name}, {Pass::BackwardWeight});
    w.flush(Category::Compute);
  }
  return t;
}

Bytes Passes::kv_gather_bytes() const {
  // all-gather of the local K and V of every cp rank (Llama 3's context parallelism)
  const auto& m = ctx_.job().workload.model;
  const auto& s = ctx_.shape();
  const double kv_local = std::max(1.0, static_cast<double>(m.kv_heads) / s.tp) * static_cast<double>(m.head_dim);
  return Bytes::from_double(2.0 * kv_local * static_cast<double>(s.micro_batch * s.seq_len) * 2.0);
}

Bytes Passes::all_to_all_bytes() const {
  // each rank sends every routed copy of its tokens: T · top_k · capacity · h · 2 bytes
  const auto& m = ctx_.job().workload.model;
  const auto& s = ctx_.shape();
  const double tokens = static_cast<double>(s.micro_batch * (s.seq_len / s.cp));
  return Bytes::from_double(tokens * m.moe->top_k * m.moe->capacity_factor * static_cast<double>(m.hidden) * 2.0);
}

TaskList Passes::forward(int stage, int chunk, int microbatch) {
  Writer w(*this, stage, "F# ", microbatch);
  const bool full = ctx_.job().strategy.recompute == spec::Recompute::Full;
  TaskList previous(ctx_.stage_ranks(stage).size(), kNoTask);
  for (const int unit : chunk_units(ctx_.job(), stage, chunk)) {
    dp_.before_pass(stage, chunk, unit, microbatch, true, previous);
    unit_forward(w, unit, Category::Compute);
    const auto last = w.last();
    dp_.after_pass(stage, unit, true, last);
    // full recomputation keeps only each layer's input (its checkpoint)
    const std::int64_t kept = full && unit >= 0
                                  ? static_cast<std::int64_t>(model::layer_activation_bytes(
                                        ctx_.job().workload.model, ctx_.shape(), spec::Recompute::Full, false))
                                  : stored_activations(unit);
    ctx_.memory(stage, last, kept, MemoryKind::Activations, true);
    previous = last;
  }
  return previous;
}

TaskList Passes::backward(int stage, int chunk, int microbatch) {
  Writer w(*this, stage, "B# ", microbatch);
  const bool full = ctx_.job().strategy.recompute == spec::Recompute::Full;
  auto units = chunk_units(ctx_.job(), stage, chunk);
  std::reverse(units.begin(), units.end());
  TaskList previous(ctx_.stage_ranks(stage).size(), kNoTask);
  for (const int unit : units) {
    dp_.before_pass(stage, chunk, unit, microbatch, false, previous);
    const bool recompute = full && unit >= 0;
    if (recompute) {
      unit_forward(w, unit, Category::Recompute);
      ctx_.memory(stage, w.last(), recompute_activations(unit), MemoryKind::Activations, true);
    }
    unit_backward(w, unit, !split_);
    const auto last = w.last();
    dp_.after_pass(stage, unit, false, last);
    const std::int64_t kept = recompute ? static_cast<std::int64_t>(model::layer_activation_bytes(
                                              ctx_.job().workload.model, ctx_.shape(), spec::Recompute::Full, false)) +
                                              recompute_activations(unit)
                                        : stored_activations(unit);
    ctx_.memory(stage, last, -(split_ ? static_cast<std::int64_t>(kept * (1 - kWeightGradShare)) : kept),
                MemoryKind::Activations, true);
    if (!split_) dp_.gradients_ready(stage, chunk, unit, microbatch, last);
    previous = last;
  }
  return previous;
}

TaskList Passes::weight_grad(int stage, int chunk, int microbatch) {
  Writer w(*this, stage, "W# ", microbatch);
  auto units = chunk_units(ctx_.job(), stage, chunk);
  std::reverse(units.begin(), units.end());
  for (const int unit : units) {
    for (const auto& op : ops_of(unit)) w.add(unit, {op.name}, {Pass::BackwardWeight});
    const auto last = w.flush(Category::Compute);
    const bool full = ctx_.job().strategy.recompute == spec::Recompute::Full && unit >= 0;
    const std::int64_t kept = full ? static_cast<std::int64_t>(model::layer_activation_bytes(
                                         ctx_.job().workload.model, ctx_.shape(), spec::Recompute::Full, false)) +
                                         recompute_activations(unit)
                                   : stored_activations(unit);
    ctx_.memory(stage, last, -(kept - static_cast<std::int64_t>(kept * (1 - kWeightGradShare))),
                MemoryKind::Activations, true);
    dp_.gradients_ready(stage, chunk, unit, microbatch, last);
  }
  return w.last();
}

}  // namespace trainsim::lower
