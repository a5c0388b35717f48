#include "lower/passes.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include <boost/container_hash/hash.hpp>

#include <fmt/format.h>

#include "trainsim/model/memory.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/model/saved_tensors.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::lower {

using cost::CollectiveKind;
using model::Pass;
using spec::ParallelDim;

namespace {
// The attention block's input projections: one QKV GEMM, or multi-head latent attention's down and
// up projections with the latents' norms (model::layer_ops names them).
constexpr std::array<std::string_view, 7> kQkv{"qkv", "q_down", "q_norm", "q_up", "kv_down", "kv_norm", "kv_up"};
// LoRA adapters (model::kLoraAdapterOps, beside the layers they adapt) run with the layer's
// residual, outside the TP-overlapped GEMMs, whose chunks they would not join.
using model::kLoraAdapterOps;
// Share of a layer's stored activations that zero-bubble schedules keep from B until W: the inputs
// of the GEMMs (X of dW = Xᵀ·dY) and the output gradients.
constexpr double kWeightGradShare = 0.5;
// Tokens per chunk of a DeepEP/HybridEP exchange (Passes::ep_legs).
constexpr double kDeepEpChunkTokens = 128;

// A part of a collective: `fraction` of its time under `algorithm` (a ring-attention step is one of
// the cp − 1 steps of a ring all-gather).
struct Share {
  double fraction = 1.0;
  std::string_view algorithm = "auto";
  Subgroup subgroup{};       // a part of each group (the legs of a hierarchical expert-parallel exchange)
  bool whole_bytes = false;  // `fraction` is of the time only (Context::collective)
};
// A leg of a hierarchical expert-parallel exchange, as a collective: its bytes and its share.
struct EpLeg {
  Bytes bytes;
  Share share;
};
}  // namespace

class Passes::Writer {
 public:
  // `pass` is 'F', 'B' or 'W': the tasks' labels start "F# " ('#' stands for the micro-batch).
  Writer(Passes& passes, int stage, char pass, int microbatch)
      : p_(passes), stage_(stage), prefix_{pass, '#', ' '}, microbatch_(microbatch) {}
  // A writer that issues nothing and adds up, into `elapsed`, how long the pass keeps the compute
  // stream busy without contention: its kernels and the collectives the stream waits for; and, into
  // `launches` when given, what the host launches for it.
  Writer(Passes& passes, int stage, Duration& elapsed, Launches* launches = nullptr)
      : p_(passes), stage_(stage), microbatch_(0), elapsed_(&elapsed), launches_(launches) {}

  void add(int unit, std::initializer_list<std::string_view> ops, const std::vector<Pass>& passes, double scale = 1.0) {
    add(unit, std::span(ops.begin(), ops.size()), passes, scale);
  }
  // (kernels `ops` names that the unit lacks are skipped)
  void add(int unit, std::span<const std::string_view> ops, const std::vector<Pass>& passes, double scale = 1.0) {
    for (const auto pass : passes)
      for (const auto op : ops)
        if (const auto index = p_.op_index(unit, op); index != kNoOp)
          queued_.push_back({unit, {op, index, pass, 1, scale}});
  }

  // A sequence-parallel collective pipelined with the GEMMs `ops` (tp_overlap): the GEMMs run in tp
  // chunks, each chunk's transfer beside the next chunk's GEMM, so one chunk of the collective is
  // exposed (the first of an all-gather that feeds them, the last of a reduce-scatter that drains
  // them); the rest runs on the TP stream while the GEMMs run with `sm_share` of the SMs taken.
  void pipelined(std::string_view what, CollectiveKind kind, Bytes bytes, int unit,
                 std::initializer_list<std::string_view> ops, const std::vector<Pass>& passes, bool feeds,
                 double sm_share) {
    pipelined(what, kind, bytes, unit, std::span(ops.begin(), ops.size()), passes, feeds, sm_share);
  }
  void pipelined(std::string_view what, CollectiveKind kind, Bytes bytes, int unit,
                 std::span<const std::string_view> ops, const std::vector<Pass>& passes, bool feeds, double sm_share) {
    flush(kernels_);
    const double tp = p_.ctx_.shape().tp;
    const Share exposed{1.0 / tp};
    const Share hidden{(tp - 1.0) / tp};
    if (feeds) comm(what, kind, bytes, kTp, StreamKind::TpComm, Category::TpComm, exposed);
    const auto overlapped = comm_async(what, kind, bytes, kTp, StreamKind::TpComm, Category::TpComm, hidden, true);
    add(unit, ops, passes, 1.0 / (1.0 - sm_share));
    flush(kernels_);
    wait_for(overlapped);
    if (!feeds) comm(what, kind, bytes, kTp, StreamKind::TpComm, Category::TpComm, exposed);
  }

  // One of `parts` equal blocks of a kernel.
  void add_part(int unit, std::string_view op, const std::vector<Pass>& passes, int parts) {
    const auto index = p_.op_index(unit, op);
    for (const auto pass : passes) queued_.push_back({unit, {op, index, pass, parts}});
  }

  // The category of the kernels a collective cuts off (comm, comm_async, pipelined): a recomputed
  // forward's kernels stay recompute between its tensor-, context- and expert-parallel collectives.
  void kernel_category(Category category) {
    kernels_ = category;
    if (tape_ != nullptr) tape_->steps.push_back({.kind = TapeStep::Kind::KernelCategory, .category = category});
  }

  // Runs `body`, a unit's pass (`which`: 0 forward, 1 backward, 2 replay, with `arg`), or plays it
  // back: a call taped earlier on this stage with the writer in the same state issues the same
  // tasks in the same order, numbered with this micro-batch.
  template <class Body>
  void taped(int unit, int which, int arg, Body&& body) {
    // measuring, taping already, mid-task, or asked not to
    if (elapsed_ != nullptr || tape_ != nullptr || !queued_.empty() || !p_.ctx_.options().replay_passes) {
      body();
      return;
    }
    SIM_ASSERT(stage_ >= 0 && stage_ < (1 << 16) && unit >= kHeadUnit && unit - kHeadUnit < (1 << 24) && which >= 0 &&
                   which < 4 && arg >= 0 && arg < 256 && static_cast<unsigned>(kernels_) < 16,
               "pass of stage {} unit {} outside what a tape's key holds", stage_, unit);
    const std::uint64_t key =
        (static_cast<std::uint64_t>(static_cast<unsigned char>(prefix_.front())) << 56) |
        (static_cast<std::uint64_t>(stage_) << 40) | (static_cast<std::uint64_t>(unit - kHeadUnit) << 16) |
        (static_cast<std::uint64_t>(which) << 14) | (static_cast<std::uint64_t>(arg) << 6) |
        (static_cast<std::uint64_t>(static_cast<unsigned>(kernels_) & 0xfu) << 2) |
        (static_cast<std::uint64_t>(last_.empty()) << 1) | static_cast<std::uint64_t>(first_.empty());
    if (const auto it = p_.tapes_.find(key); it != p_.tapes_.end()) {
      if (it->second.valid) {
        play(it->second);
        return;
      }
      body();
      return;
    }
    Tape tape;
    {
      struct Untape {  // (also when the body throws)
        Writer& w;
        ~Untape() { w.tape_ = nullptr; }
      } untape{*this};
      tape_ = &tape;
      taped_out_.clear();
      body();
    }
    tape.queued = queued_;
    p_.tapes_.emplace(key, std::move(tape));
  }

  TaskList flush(Category category) {
    if (queued_.empty()) return last_;
    auto& kernels = kernels_scratch_;
    kernels.clear();
    for (const auto& [unit, k] : queued_) kernels.push_back(k);
    const int unit = queued_.front().first;
    if (elapsed_ != nullptr) {
      *elapsed_ += p_.duration(unit, kernels);
      if (launches_ != nullptr) launches_->kernels += p_.launches(unit, kernels);
      queued_.clear();
      return last_;
    }
    const auto label = compute_label(unit);
    const auto duration = p_.duration(unit, kernels);
    const auto work = p_.work(unit, kernels);
    if (tape_ != nullptr)
      tape_->steps.push_back(
          {.kind = TapeStep::Kind::Compute, .category = category, .label = label, .duration = duration, .work = work});
    compute(label, duration, category, work);
    queued_.clear();
    return last_;
  }

  // Communication between compute: the kernels so far, then the collective, then the compute
  // stream waits for it.
  void comm(std::string_view what, CollectiveKind kind, Bytes bytes, std::span<const ParallelDim> dims,
            StreamKind stream, Category category, const Share& share = {}) {
    flush(kernels_);
    if (elapsed_ != nullptr) {
      if (p_.measure_blocking_comm_) *elapsed_ += uncontended(kind, bytes, dims, share);
      if (launches_ != nullptr) ++launches_->collectives;
      return;
    }
    wait_for(comm_async(what, kind, bytes, dims, stream, category, share, true));
  }

  // A collective the compute stream does not wait for (yet): `wait_for` joins it. With
  // `after_compute` it starts once the kernels so far have run (it sends what they produced).
  TaskList comm_async(std::string_view what, CollectiveKind kind, Bytes bytes, std::span<const ParallelDim> dims,
                      StreamKind stream, Category category, const Share& share, bool after_compute) {
    flush(kernels_);
    if (elapsed_ != nullptr) {  // overlapped: no part of a lower bound
      if (launches_ != nullptr) ++launches_->collectives;
      return {};
    }
    if (after_compute && !last_.empty()) {
      p_.ctx_.wait(stage_, stream, last_);
      if (tape_ != nullptr) tape_->steps.push_back({.kind = TapeStep::Kind::WaitForLast, .stream = stream});
    }
    label_ = prefix_;
    label_ += what;
    const auto label = p_.ctx_.graph().intern(label_);
    auto out = p_.ctx_.collective(stage_, sim::TaskName::interned_label(label, microbatch_), kind, bytes, dims, stream,
                                  category, share.fraction, share.algorithm, share.subgroup, share.whole_bytes);
    if (tape_ != nullptr) {
      tape_->steps.push_back({.kind = TapeStep::Kind::Collective,
                              .category = category,
                              .stream = stream,
                              .label = label,
                              .collective = kind,
                              .bytes = bytes,
                              .dims = {dims.begin(), dims.end()},
                              .fraction = share.fraction,
                              .algorithm = std::string(share.algorithm),
                              .subgroup = share.subgroup,
                              .whole_bytes = share.whole_bytes});
      taped_out_.emplace_back(tape_->steps.size() - 1, out);
    }
    return out;
  }

  // One leg of a split exchange (p_.ep_legs_): its name (in leg_label_), its bytes, its share; the
  // trailing leg's bytes all move, most of them beside the other leg.
  EpLeg ep_leg(std::string_view what, bool across) {
    const auto& legs = p_.ep_legs_;
    leg_label_ = what;
    leg_label_ += across ? " rdma" : " nvlink";
    if (across)
      return {legs.across_bytes, Share{.fraction = legs.across_share, .subgroup = legs.across, .whole_bytes = true}};
    return {legs.within_bytes, Share{.fraction = legs.within_share, .subgroup = legs.within, .whole_bytes = true}};
  }

  // The expert-parallel exchange `what` (p_.ep_legs_): a dispatch, or a combine's gradient
  // (`toward_experts`), crosses the network before the domain; a combine, or a dispatch's gradient,
  // the domain first. The compute stream does not wait for it (yet).
  TaskList ep_async(std::string_view what, bool toward_experts, bool after_compute) {
    const auto& legs = p_.ep_legs_;
    const auto dims = p_.ep_dims();
    if (!legs.split)
      return comm_async(what, CollectiveKind::AllToAll, p_.all_to_all_bytes(), dims, StreamKind::EpComm,
                        Category::EpComm, {}, after_compute);
    const auto leg = [&](bool across, bool after) {
      const auto [bytes, share] = ep_leg(what, across);
      return comm_async(leg_label_, CollectiveKind::AllToAll, bytes, dims, StreamKind::EpComm, Category::EpComm, share,
                        after);
    };
    leg(toward_experts, after_compute);
    return leg(!toward_experts, false);  // on the same stream, after the first leg
  }
  // The same with the compute stream waiting for it.
  void ep(std::string_view what, bool toward_experts) {
    const auto& legs = p_.ep_legs_;
    const auto dims = p_.ep_dims();
    if (!legs.split) {
      comm(what, CollectiveKind::AllToAll, p_.all_to_all_bytes(), dims, StreamKind::EpComm, Category::EpComm);
      return;
    }
    for (const bool across : {toward_experts, !toward_experts}) {
      const auto [bytes, share] = ep_leg(what, across);
      comm(leg_label_, CollectiveKind::AllToAll, bytes, dims, StreamKind::EpComm, Category::EpComm, share);
    }
  }

  void wait_for(const TaskList& tasks) {
    if (elapsed_ != nullptr || tasks.empty()) return;
    p_.ctx_.wait(stage_, StreamKind::Compute, tasks);
    if (tape_ == nullptr) return;
    // the collective taped that gave these tasks (one from before the pass: the tape is never played)
    const auto it =
        std::find_if(taped_out_.begin(), taped_out_.end(), [&](const auto& o) { return o.second == tasks; });
    if (it == taped_out_.end())
      tape_->valid = false;
    else
      tape_->steps.push_back({.kind = TapeStep::Kind::WaitFor, .step = static_cast<std::uint32_t>(it->first)});
  }

  const TaskList& last() const { return last_; }
  // The first compute task flushed since mark_first() (empty before one is).
  void mark_first() { first_.clear(); }
  const TaskList& first() const { return first_; }

 private:
  Category kernels_ = Category::Compute;
  // "L3" for the model's layers, "MTP0" for a multi-token prediction module's (numbered after them)
  void append_unit_name(std::string& out, int unit) const {
    if (unit == kEmbeddingUnit) {
      out += "embedding";
    } else if (unit == kHeadUnit) {
      out += "head";
    } else {
      const int layers = p_.ctx_.job().workload.model.layers;
      out += unit < layers ? "L" : "MTP";
      std::array<char, 16> digits{};
      const auto end =
          std::to_chars(digits.data(), digits.data() + digits.size(), unit < layers ? unit : unit - layers).ptr;
      out.append(digits.data(), end);
    }
  }

  // The queued kernels' label, "F# L3 qkv..fc2", interned in the graph once per pass letter, unit
  // and first and last op.
  std::uint32_t compute_label(int unit) {
    const auto& first = queued_.front().second;
    const auto& last = queued_.back().second;
    const bool keyed = first.index <= 0xffff && last.index <= 0xffff && unit > -(1 << 20) && unit < (1 << 20);
    const auto key = (static_cast<std::uint64_t>(static_cast<unsigned char>(prefix_.front())) << 56) |
                     (static_cast<std::uint64_t>(unit + (1 << 20)) << 32) |
                     (static_cast<std::uint64_t>(first.index) << 16) | last.index;
    if (keyed)
      if (const auto it = p_.compute_labels_.find(key); it != p_.compute_labels_.end()) return it->second;
    label_ = prefix_;
    append_unit_name(label_, unit);
    label_ += ' ';
    label_ += first.op;
    label_ += "..";
    label_ += last.op;
    const auto id = p_.ctx_.graph().intern(label_);
    if (keyed) p_.compute_labels_.emplace(key, id);
    return id;
  }

  Duration uncontended(CollectiveKind kind, Bytes bytes, std::span<const ParallelDim> dims, const Share& share) {
    auto& ctx = p_.ctx_;
    const auto& ranks = ctx.stage_ranks(stage_);
    const int rank = ctx.rank(ranks[std::min(p_.measure_position_, ranks.size() - 1)]).rank;
    std::uint32_t mask = 0;
    for (const auto d : dims) mask |= 1u << static_cast<unsigned>(d);
    if (share.subgroup.size > 0)  // a leg of each group (uniform legs: the stage's longest)
      return Duration::from_seconds(ctx.uncontended(stage_, kind, bytes, dims, share.subgroup).seconds() *
                                    share.fraction);
    auto [it, added] =
        p_.uncontended_.try_emplace({rank, mask, kind, bytes.count, share.fraction, std::string(share.algorithm)});
    if (added) {
      const auto c =
          ctx.costs().cost(cost::make_collective(kind, bytes),
                           ctx.costs().intern(cost::Group{ctx.placement().group(dims, rank)}), share.algorithm);
      it->second = Duration::from_seconds(c.time.seconds() * share.fraction);
    }
    return it->second;
  }

  void compute(std::uint32_t label, Duration duration, Category category, const TaskWork& work) {
    last_ = p_.ctx_.compute(stage_, sim::TaskName::interned_label(label, microbatch_), duration, category, work);
    if (first_.empty()) first_ = last_;
  }

  void play(const Tape& tape) {
    auto& out = played_out_;
    out.resize(tape.steps.size());
    for (std::size_t i = 0; i < tape.steps.size(); ++i) {
      const auto& step = tape.steps[i];
      switch (step.kind) {
        case TapeStep::Kind::Compute:
          compute(step.label, step.duration, step.category, step.work);
          break;
        case TapeStep::Kind::WaitForLast:
          p_.ctx_.wait(stage_, step.stream, last_);
          break;
        case TapeStep::Kind::Collective:
          out[i] =
              p_.ctx_.collective_again(stage_, sim::TaskName::interned_label(step.label, microbatch_), step.collective,
                                       step.bytes, std::span(step.dims.data(), step.dims.size()), step.stream,
                                       step.category, step.fraction, step.algorithm, step.subgroup, step.whole_bytes);
          break;
        case TapeStep::Kind::WaitFor:
          p_.ctx_.wait(stage_, StreamKind::Compute, out[step.step]);
          break;
        case TapeStep::Kind::KernelCategory:
          kernels_ = step.category;
          break;
      }
    }
    queued_ = tape.queued;
  }

  Passes& p_;
  int stage_;
  std::string prefix_;
  int microbatch_;
  Tape* tape_ = nullptr;                                     // the tape being recorded
  std::vector<std::pair<std::size_t, TaskList>> taped_out_;  // its collectives' tasks, by step
  std::vector<TaskList> played_out_;                         // the collectives' tasks of a tape played
  std::vector<std::pair<int, Kernel>> queued_;
  std::string label_;                    // scratch space for task labels
  std::string leg_label_;                // a hierarchical exchange leg's name, before the prefix
  std::vector<Kernel> kernels_scratch_;  // and for the kernels of a task
  TaskList last_;
  TaskList first_;
  Duration* elapsed_ = nullptr;
  Launches* launches_ = nullptr;
};

bool Passes::mlp_tp_comm(bool moe) const {
  // folded experts take their tokens sequence-sharded; only shared experts need the gathered ones
  const auto& m = ctx_.job().workload.model;
  return !moe || !ctx_.shape().folded() || (m.moe && m.moe->shared_experts > 0);
}

std::span<const ParallelDim> Passes::ep_dims() const {
  static constexpr ParallelDim kFolded[] = {ParallelDim::Tp, ParallelDim::Ep};
  if (ctx_.shape().folded()) return kFolded;
  return kEp;
}

bool Passes::tp_overlap() const {
  const auto& s = ctx_.shape();
  return s.sp && s.tp > 1 && ctx_.job().strategy.tp_overlap;
}

double Passes::reduce_scatter_sm_share() const {
  const auto& k = ctx_.kernels();
  if (!k.device->collectives_take_cores) return 0;  // a TPU's DMA engines, not its matrix units
  return std::clamp(k.tuning.tp_overlap_sms / static_cast<double>(std::max(k.device->sms, 1)), 0.0, 0.9);
}

Passes::Passes(Context& ctx, DataParallel& dp)
    : ctx_(ctx),
      dp_(dp),
      offload_(ctx),
      split_(splits_weight_grad(ctx.job().strategy.schedule)),
      transient_transpose_(model::transient_fp8_transpose_bytes(ctx.job()).count) {
  ep_legs_ = ep_legs();
}

Passes::EpLegs Passes::ep_legs() const {
  const auto& job = ctx_.job();
  const auto& m = job.workload.model;
  if (!job.strategy.deepep_dispatch || !m.moe || ctx_.shape().ep < 2) return {};
  // the first simulated rank's group (a straddling group simulated beside it takes these legs too);
  // sorted, so each domain's members are one run of it: the blocks Subgroup takes when all are equal
  const auto group = ctx_.placement().group(ep_dims(), ctx_.rank(ctx_.stage_ranks(0).front()).rank);
  const auto runs = topo::domain_runs(group, static_cast<std::uint32_t>(job.cluster.node.devices));
  if (runs.size() < 2 || std::adjacent_find(runs.begin(), runs.end(), std::not_equal_to<>()) != runs.end())
    return {};                             // one domain, or uneven
  const std::size_t local = runs.front();  // the group's ranks in each domain
  const int domains = static_cast<int>(runs.size());
  const auto& s = ctx_.shape();
  // the busiest rank's load over the mean (model::busiest_rank_load) on both legs
  const double token_bytes =
      static_cast<double>(s.routed_tokens()) * static_cast<double>(m.hidden) * s.activation_bytes * s.routed_load;
  EpLegs legs{.split = true,
              .across = Subgroup{.size = static_cast<int>(local), .across = true},
              .within = Subgroup{.size = static_cast<int>(local), .across = false},
              .across_bytes = Bytes::from_double(token_bytes * model::expected_domains_per_token(*m.moe, domains)),
              .within_bytes = all_to_all_bytes()};
  // DeepEP and HybridEP forward each chunk of tokens over NVLink as it arrives over the network
  // (chunks of 128 tokens: Megatron-Bridge's DeepSeek-V3 H100 recipe, HybridEP's
  // NUM_OF_TOKENS_PER_CHUNK_COMBINE_API): the shorter leg trails the longer by one chunk
  const double chunks = std::max(1.0, std::ceil(static_cast<double>(s.routed_tokens()) / kDeepEpChunkTokens));
  const auto time = [&](Bytes bytes, Subgroup part) {
    return ctx_.uncontended(0, CollectiveKind::AllToAll, bytes, ep_dims(), part).seconds();
  };
  if (time(legs.across_bytes, legs.across) >= time(legs.within_bytes, legs.within))
    legs.within_share = 1.0 / chunks;
  else
    legs.across_share = 1.0 / chunks;
  return legs;
}

const std::vector<model::Op>& Passes::ops_of(int unit) {
  const auto& m = ctx_.job().workload.model;
  const int key = unit_kind(m, unit);
  auto& slot = ops_.at(static_cast<std::size_t>(key - kHeadUnit));  // kinds -2 .. 1
  if (slot) return *slot;
  std::vector<model::Op> ops;
  if (key == kEmbeddingUnit)
    ops = model::embedding_ops(m, ctx_.shape());
  else if (key == kHeadUnit)
    ops = model::head_ops(m, ctx_.shape());
  else
    ops = model::layer_ops(m, ctx_.shape(), key == 1);
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      SIM_ASSERT(ops[i].name != ops[j].name, "two ops named {} in one unit", ops[i].name);
  return slot.emplace(std::move(ops));
}

std::uint32_t Passes::op_index(int unit, std::string_view name) {
  const auto& ops = ops_of(unit);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto n = ops[i].name;  // most names differ in length or first letter: no call to compare
    if (n.size() == name.size() && (n.empty() || n.front() == name.front()) && n == name)
      return static_cast<std::uint32_t>(i);
  }
  return kNoOp;
}

namespace {
std::size_t kernel_hash(std::size_t seed, std::uint32_t op, model::Pass pass, int parts, double scale) {
  boost::hash_combine(seed, op);
  boost::hash_combine(seed, static_cast<int>(pass));
  boost::hash_combine(seed, parts);
  boost::hash_combine(seed, scale);
  return seed;
}
}  // namespace

std::size_t Passes::DurationHash::operator()(const DurationKey& k) const {
  auto h = static_cast<std::size_t>(k.kind);
  for (const auto& [op, pass, parts, scale] : k.kernels) h = kernel_hash(h, op, pass, parts, scale);
  return h;
}

std::size_t Passes::DurationHash::operator()(const DurationView& k) const {
  auto h = static_cast<std::size_t>(k.kind);
  for (const auto& kernel : k.kernels) h = kernel_hash(h, kernel.index, kernel.pass, kernel.parts, kernel.scale);
  return h;
}

bool Passes::DurationEq::operator()(const DurationView& a, const DurationKey& b) const {
  if (a.kind != b.kind || a.kernels.size() != b.kernels.size()) return false;
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    const auto& [op, pass, parts, scale] = b.kernels[i];
    const auto& k = a.kernels[i];
    if (k.index != op || k.pass != pass || k.parts != parts || k.scale != scale) return false;
  }
  return true;
}

Duration Passes::duration(int unit, const std::vector<Kernel>& kernels) {
  const auto& m = ctx_.job().workload.model;
  const int key = unit_kind(m, unit);
  if (const auto it = durations_.find(DurationView{key, kernels}); it != durations_.end()) return it->second;
  const auto& ops = ops_of(unit);
  const auto gap = ctx_.kernels().tuning.kernel_gap;
  auto total = Duration::zero();
  for (const auto& k : kernels) {
    if (k.index == kNoOp) continue;
    const auto& op = ops[k.index];
    const auto whole = Duration::from_seconds(model::kernel_time(op, k.pass, ctx_.kernels()).seconds() * k.scale);
    // a block of a kernel: its share of the work, and a launch of its own
    total += k.parts == 1 || whole <= gap ? whole : Duration::from_seconds((whole - gap).seconds() / k.parts) + gap;
  }
  DurationKey stored{key, {}};
  for (const auto& k : kernels) stored.kernels.emplace_back(k.index, k.pass, k.parts, k.scale);
  durations_.emplace(std::move(stored), total);
  return total;
}

TaskWork Passes::work(int unit, const std::vector<Kernel>& kernels) {
  TaskWork out;
  if (!ctx_.options().record_work) return out;
  const auto& ops = ops_of(unit);
  for (const auto& k : kernels) {
    if (k.index == kNoOp) continue;
    const auto& op = ops[k.index];
    const double flops = k.pass == model::Pass::Forward        ? op.fwd_flops
                         : k.pass == model::Pass::BackwardData ? op.bwd_data_flops
                                                               : op.bwd_weight_flops;
    // memory-bound traffic: the weight-gradient pass's is a bias's or a norm's separate reduction
    const double bytes = k.pass == model::Pass::Forward        ? op.fwd_bytes
                         : k.pass == model::Pass::BackwardData ? op.bwd_bytes
                                                               : model::weight_grad_bytes(op, ctx_.kernels());
    out.flops += flops / k.parts;
    out.bytes += bytes / k.parts;
  }
  return out;
}

int Passes::launches(int unit, const std::vector<Kernel>& kernels) {
  int n = 0;
  const auto& ops = ops_of(unit);
  for (const auto& k : kernels)
    if (k.index != kNoOp) n += model::kernel_launches(ops[k.index], k.pass, ctx_.kernels());
  return n;
}

// The host launches a pass kernel by kernel (eager, compiled) or as one captured CUDA graph; the
// collectives inside a captured layer are part of its graph, the data-parallel ones (ZeRO-3's
// gathers, its reduce-scatter) are the framework's own calls.
Duration Passes::host_time(int stage, int unit, char pass, bool recomputed) {
  const auto& job = ctx_.job();
  const int kind = unit_kind(job.workload.model, unit);
  const auto key = std::tuple{kind, pass, recomputed};
  if (const auto it = host_times_.find(key); it != host_times_.end()) return it->second;
  Duration ignored = Duration::zero();
  Launches n;
  {
    Writer w(*this, stage, ignored, &n);
    if (pass == 'F') {
      unit_forward(w, unit, Category::Compute);
    } else if (pass == 'B') {
      replay(w, unit, recomputed);
      unit_backward(w, unit, !split_);
    } else {
      for (const auto& op : ops_of(unit)) w.add(unit, {op.name}, {Pass::BackwardWeight});
      w.flush(Category::Compute);
    }
  }
  // ZeRO-3: the unit's gather before each pass, its reduce-scatter with its weight gradients
  const bool weights = pass == 'W' || (pass == 'B' && !split_);
  // (or launched one by one by DataParallel)
  const bool zero3_own = job.strategy.zero == 3 && !dp_.launches_own_collectives();
  const int own = zero3_own ? (pass != 'W' ? 1 : 0) + (weights ? 1 : 0) : 0;
  const auto& h = ctx_.options().host;
  Duration t = h.collective_launch * own;
  switch (spec::launch_of(job.strategy)) {
    case spec::LaunchMode::Eager:
      t += h.eager_launch * n.kernels + h.collective_launch * n.collectives;
      break;
    case spec::LaunchMode::Compiled:
      t += h.compiled_launch * n.kernels + h.collective_launch * n.collectives;
      break;
    case spec::LaunchMode::CudaGraphs:
      t += h.graph_launch;
      break;
  }
  return host_times_.emplace(key, t).first->second;
}

Duration Passes::device_time(int stage, int unit, char pass, bool recomputed) {
  const int kind = unit_kind(ctx_.job().workload.model, unit);
  auto it = unit_times_.find(kind);
  if (it == unit_times_.end()) it = unit_times_.emplace(kind, unit_times(stage, unit)).first;
  const auto& g = it->second;
  if (pass == 'F') return g.forward;
  if (pass == 'W') return g.weight;
  return g.backward_data + (split_ ? Duration::zero() : g.weight) + (recomputed ? g.forward : Duration::zero());
}

void Passes::plan_host(int stage, const StageSchedule& schedule) {
  host_hidden_.resize(static_cast<std::size_t>(ctx_.stages()), false);
  launched_.resize(static_cast<std::size_t>(ctx_.stages()), false);
  const auto& job = ctx_.job();
  // (a host that waits for the device before its gathers is never ahead of it; one that launches
  // ZeRO-3's collectives one by one spends time host_time does not count)
  if (job.strategy.zero == 3 && (job.strategy.limit_all_gathers || dp_.launches_own_collectives())) return;
  bool first = true;
  bool hidden = true;
  Duration lead = Duration::zero();
  Duration previous = Duration::zero();  // the device time of the pass launched last
  for (const auto& a : schedule) {
    auto units = chunk_units(job, stage, a.chunk);
    const auto recomputed = recomputed_units(units);
    if (a.kind != PassKind::Forward) std::reverse(units.begin(), units.end());
    const char pass = a.kind == PassKind::Forward ? 'F' : a.kind == PassKind::Backward ? 'B' : 'W';
    for (const int unit : units) {
      const bool full = pass == 'B' && recomputed.contains(unit);
      const auto h = host_time(stage, unit, pass, full);
      lead = first ? Duration::zero() : std::max(lead, Duration::zero()) + previous - h;
      if (lead < Duration::zero()) hidden = false;
      first = false;
      previous = device_time(stage, unit, pass, full);
    }
  }
  host_hidden_[static_cast<std::size_t>(stage)] = hidden;
}

void Passes::launch(int stage, int unit, char pass, bool recomputed, int microbatch) {
  const auto t = host_time(stage, unit, pass, recomputed);
  if (t <= Duration::zero()) return;
  const auto s = static_cast<std::size_t>(stage);
  // a stage whose host is never behind keeps only its first launch (plan_host)
  if (s < host_hidden_.size() && host_hidden_[s] && launched_[s]) {
    ctx_.unissued_launch(stage, t);
    return;
  }
  if (s < launched_.size()) launched_[s] = true;
  ctx_.launch(stage, {pass == 'F' ? "launch F#" : pass == 'B' ? "launch B#" : "launch W#", microbatch}, t);
}

const model::LayerCheckpoint& Passes::checkpoint(int unit, bool recomputed) {
  const auto& m = ctx_.job().workload.model;
  const bool moe = model::is_moe_layer(m, unit);
  const auto key = std::pair{moe, recomputed};
  auto it = checkpoints_.find(key);
  if (it == checkpoints_.end())
    it = checkpoints_.emplace(key, model::layer_checkpoint(ctx_.job(), m, ctx_.shape(), moe, recomputed)).first;
  return it->second;
}

std::int64_t Passes::stored_activations(int unit, bool recomputed) {
  const auto& m = ctx_.job().workload.model;
  const auto& shape = ctx_.shape();
  if (unit == kEmbeddingUnit) return static_cast<std::int64_t>(model::embedding_activation_bytes(m, shape));
  if (unit == kHeadUnit) return static_cast<std::int64_t>(model::head_activation_bytes(m, shape));
  return static_cast<std::int64_t>(checkpoint(unit, recomputed).kept);
}

std::int64_t Passes::rebuilt_activations(int unit, bool recomputed) {
  return unit < 0 ? 0 : static_cast<std::int64_t>(checkpoint(unit, recomputed).rebuilt);
}

// What the checkpointing policy replays before a layer's backward: its whole forward (full
// recomputation, the collectives included) or the kernels it did not keep the outputs of.
void Passes::replay(Writer& w, int unit, bool recomputed) {
  if (unit < 0) return;
  const auto& c = checkpoint(unit, recomputed);
  if (c.whole_layer) {
    // (kernels flushed by the forward's collectives are recomputation too)
    w.kernel_category(Category::Recompute);
    unit_forward(w, unit, Category::Recompute);
    w.kernel_category(Category::Compute);
    return;
  }
  if (c.replayed.empty()) return;
  w.flush(Category::Compute);
  for (const auto& op : c.replayed) w.add(unit, {op.op}, {Pass::Forward}, op.share);
  w.flush(Category::Recompute);
}

// The MLP's forward without TP overlap: the sequence-parallel all-gather of its input, the (MoE or
// dense) MLP, its output's tensor-parallel reduction.
void Passes::mlp_forward(Writer& w, int unit, bool moe, Category category, CollectiveKind tp_out, Bytes act) {
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1 && mlp_tp_comm(moe);
  const std::vector<Pass> fwd{Pass::Forward};
  if (s.sp && tp)
    w.comm("tp all-gather", CollectiveKind::AllGather, mlp_gather_bytes(moe, act), kTp, StreamKind::TpComm,
           Category::TpComm);
  if (moe) {
    w.add(unit, {"router", "permute"}, fwd);
    if (overlap_shared_experts()) {
      // the shared experts run while the routed tokens travel
      const auto dispatch = w.ep_async("ep dispatch", true, true);
      w.add(unit, {"shared_fc1", "shared_act", "shared_fc2"}, fwd);
      w.flush(category);
      w.wait_for(dispatch);
      w.add(unit, {"expert_fc1", "expert_act", "expert_fc2"}, fwd);
      w.ep("ep combine", false);
      w.add(unit, {"unpermute"}, fwd);
    } else {
      if (s.ep > 1) w.ep("ep dispatch", true);
      w.add(unit, {"expert_fc1", "expert_act", "expert_fc2"}, fwd);
      if (s.ep > 1) w.ep("ep combine", false);
      w.add(unit, {"unpermute", "shared_fc1", "shared_act", "shared_fc2"}, fwd);
    }
  } else {
    w.add(unit, {"fc1", "act", "fc2"}, fwd);
  }
  if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_out, act, kTp, StreamKind::TpComm, Category::TpComm);
}

void Passes::head_forward(Writer& w, Category category) {
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1;
  const Bytes act = Bytes::from_double(model::hidden_state_bytes(ctx_.job().workload.model, s));
  const std::vector<Pass> fwd{Pass::Forward};
  // vocab-parallel cross-entropy: max and sum of the logits across tp ranks
  const Bytes reduced{s.micro_batch * (s.seq_len / s.cp) * 8};
  w.add(kHeadUnit, {"final_norm"}, fwd);
  if (s.sp) w.comm("head tp all-gather", CollectiveKind::AllGather, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(kHeadUnit, {"logits", "loss"}, fwd);
  if (tp)
    w.comm("cross-entropy tp all-reduce", CollectiveKind::AllReduce, reduced, kTp, StreamKind::TpComm,
           Category::TpComm);
  if (const int n = ctx_.job().workload.model.mtp_layers; n > 0) {
    // the projection is column-parallel over the gathered [hidden; embedding]; the modules' own
    // collectives carried as one each, n modules' bytes
    w.add(kHeadUnit, {"mtp_enorm", "mtp_hnorm"}, fwd);
    if (s.sp)
      w.comm("mtp tp all-gather", CollectiveKind::AllGather, act * (2 * n), kTp, StreamKind::TpComm, Category::TpComm);
    w.add(kHeadUnit, {"mtp_eh_proj"}, fwd);
    // (without SP the projection's output, split over tp, is gathered for the module's layer)
    if (tp && !s.sp)
      w.comm("mtp projection tp all-gather", CollectiveKind::AllGather, act * n, kTp, StreamKind::TpComm,
             Category::TpComm);
    w.add(kHeadUnit, {"mtp_final_norm"}, fwd);
    if (s.sp)
      w.comm("mtp head tp all-gather", CollectiveKind::AllGather, act * n, kTp, StreamKind::TpComm, Category::TpComm);
    w.add(kHeadUnit, {"mtp_logits", "mtp_loss"}, fwd);
    if (tp)
      w.comm("mtp cross-entropy tp all-reduce", CollectiveKind::AllReduce, reduced * n, kTp, StreamKind::TpComm,
             Category::TpComm);
  }
  w.flush(category);
}

void Passes::head_backward(Writer& w, const std::vector<Pass>& bwd) {
  const auto& s = ctx_.shape();
  const Bytes act = Bytes::from_double(model::hidden_state_bytes(ctx_.job().workload.model, s));
  const auto tp_in = s.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  if (const int n = ctx_.job().workload.model.mtp_layers; n > 0) {
    w.add(kHeadUnit, {"mtp_loss", "mtp_logits"}, bwd);
    if (s.tp > 1) w.comm("mtp head tp grad", tp_in, act * n, kTp, StreamKind::TpComm, Category::TpComm);
    w.add(kHeadUnit, {"mtp_final_norm", "mtp_eh_proj"}, bwd);
    if (s.tp > 1) w.comm("mtp tp grad", tp_in, act * (2 * n), kTp, StreamKind::TpComm, Category::TpComm);
    w.add(kHeadUnit, {"mtp_hnorm", "mtp_enorm"}, bwd);
  }
  w.add(kHeadUnit, {"loss", "logits"}, bwd);
  if (s.tp > 1) w.comm("head tp grad", tp_in, act, kTp, StreamKind::TpComm, Category::TpComm);
  w.add(kHeadUnit, {"final_norm"}, bwd);
  w.flush(Category::Compute);
}

void Passes::unit_forward(Writer& w, int unit, Category category) {
  const auto& job = ctx_.job();
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1;
  const Bytes act = Bytes::from_double(model::hidden_state_bytes(job.workload.model, s));
  const auto tp_out = s.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  const std::vector<Pass> fwd{Pass::Forward};
  if (unit == kEmbeddingUnit) {
    w.add(unit, {"embedding"}, fwd);
    if (tp) w.comm("embedding tp", tp_out, act, kTp, StreamKind::TpComm, Category::TpComm);
    w.flush(category);
    return;
  }
  if (unit == kHeadUnit) {
    head_forward(w, category);
    return;
  }
  const auto& m = job.workload.model;
  const bool moe = model::is_moe_layer(m, unit);
  const bool overlap = tp_overlap();
  w.add(unit, {"norm1"}, fwd);
  const Bytes operand = fp8_operand_gather(act);  // the FP8 GEMMs' gathered inputs and output gradients
  if (overlap) {
    w.pipelined("tp all-gather", CollectiveKind::AllGather, operand, unit, kQkv, fwd, true, 0);
  } else {
    if (s.sp) w.comm("tp all-gather", CollectiveKind::AllGather, operand, kTp, StreamKind::TpComm, Category::TpComm);
    w.add(unit, kQkv, fwd);
  }
  w.add(unit, {"rope"}, fwd);
  if (s.cp > 1 && job.strategy.cp_comm == spec::CpComm::Ring) {
    ring_attention(w, unit, fwd, false, category);
  } else {
    if (s.cp > 1)
      w.comm("cp kv all-gather", CollectiveKind::AllGather, kv_gather_bytes(), kCp, StreamKind::CpComm,
             Category::CpComm);
    w.add(unit, {"attention"}, fwd);
  }
  if (overlap) {
    w.pipelined("tp reduce-scatter", CollectiveKind::ReduceScatter, act, unit, {"out_proj"}, fwd, false,
                reduce_scatter_sm_share());
  } else {
    w.add(unit, {"out_proj"}, fwd);
    if (tp)
      w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_out, act, kTp, StreamKind::TpComm, Category::TpComm);
  }
  w.add(unit, {"residual1", "norm2"}, fwd);
  if (overlap && !moe) {
    w.pipelined("tp all-gather", CollectiveKind::AllGather, operand, unit, {"fc1"}, fwd, true, 0);
    w.add(unit, {"act"}, fwd);
    w.pipelined("tp reduce-scatter", CollectiveKind::ReduceScatter, act, unit, {"fc2"}, fwd, false,
                reduce_scatter_sm_share());
    w.add(unit, kLoraAdapterOps, fwd);
    w.add(unit, {"residual2"}, fwd);
    w.flush(category);
    return;
  }
  mlp_forward(w, unit, moe, category, tp_out, act);
  w.add(unit, kLoraAdapterOps, fwd);
  w.add(unit, {"residual2"}, fwd);
  w.flush(category);
}

// The MLP's backward without TP overlap: the sequence-parallel all-gather of the output gradient,
// the (MoE or dense) MLP, the input gradient's tensor-parallel reduction.
void Passes::mlp_backward(Writer& w, int unit, const std::vector<Pass>& bwd, bool moe, CollectiveKind tp_in,
                          Bytes act) {
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1 && mlp_tp_comm(moe);
  if (s.sp && tp)
    w.comm("tp all-gather", CollectiveKind::AllGather, mlp_gather_bytes(moe, act), kTp, StreamKind::TpComm,
           Category::TpComm);
  if (moe && overlap_shared_experts()) {
    w.add(unit, {"unpermute"}, bwd);
    const auto combine = w.ep_async("ep combine grad", true, true);
    w.add(unit, {"shared_fc2", "shared_act", "shared_fc1"}, bwd);
    w.flush(Category::Compute);
    w.wait_for(combine);
    w.add(unit, {"expert_fc2", "expert_act", "expert_fc1"}, bwd);
    w.ep("ep dispatch grad", false);
    w.add(unit, {"permute", "router"}, bwd);
  } else if (moe) {
    w.add(unit, {"unpermute", "shared_fc2", "shared_act", "shared_fc1"}, bwd);
    if (s.ep > 1) w.ep("ep combine grad", true);
    w.add(unit, {"expert_fc2", "expert_act", "expert_fc1"}, bwd);
    if (s.ep > 1) w.ep("ep dispatch grad", false);
    w.add(unit, {"permute", "router"}, bwd);
  } else {
    w.add(unit, {"fc2", "act", "fc1"}, bwd);
  }
  if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_in, act, kTp, StreamKind::TpComm, Category::TpComm);
}

void Passes::unit_backward(Writer& w, int unit, bool weights) {
  const auto& job = ctx_.job();
  const auto& s = ctx_.shape();
  const bool tp = s.tp > 1;
  const Bytes act = Bytes::from_double(model::hidden_state_bytes(job.workload.model, s));
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
    head_backward(w, bwd);
    return;
  }
  const auto& m = job.workload.model;
  const bool moe = model::is_moe_layer(m, unit);
  const bool overlap = tp_overlap();
  w.add(unit, {"residual2"}, bwd);
  w.add(unit, kLoraAdapterOps, bwd);
  if (overlap && !moe) {
    // the output gradient's all-gather feeds fc2's data gradient; the input gradient's
    // reduce-scatter drains fc1's (Transformer Engine overlaps it with fc1's weight gradient)
    w.pipelined("tp all-gather", CollectiveKind::AllGather, fp8_operand_gather(act), unit, {"fc2"}, bwd, true, 0);
    w.add(unit, {"act"}, bwd);
    w.pipelined("tp reduce-scatter", CollectiveKind::ReduceScatter, act, unit, {"fc1"}, bwd, false,
                reduce_scatter_sm_share());
  } else {
    mlp_backward(w, unit, bwd, moe, tp_in, act);
  }
  w.add(unit, {"norm2", "residual1"}, bwd);
  if (overlap) {
    w.pipelined("tp all-gather", CollectiveKind::AllGather, fp8_operand_gather(act), unit, {"out_proj"}, bwd, true, 0);
  } else {
    if (s.sp)
      w.comm("tp all-gather", CollectiveKind::AllGather, fp8_operand_gather(act), kTp, StreamKind::TpComm,
             Category::TpComm);
    w.add(unit, {"out_proj"}, bwd);
  }
  if (s.cp > 1 && job.strategy.cp_comm == spec::CpComm::Ring) {
    ring_attention(w, unit, bwd, true, Category::Compute);
  } else {
    w.add(unit, {"attention"}, bwd);
    if (s.cp > 1)
      w.comm("cp kv reduce-scatter", CollectiveKind::ReduceScatter, kv_gather_bytes(), kCp, StreamKind::CpComm,
             Category::CpComm);
  }
  w.add(unit, {"rope"}, bwd);
  if (overlap) {
    w.pipelined("tp reduce-scatter", CollectiveKind::ReduceScatter, act, unit, kQkv, bwd, false,
                reduce_scatter_sm_share());
  } else {
    w.add(unit, kQkv, bwd);
    if (tp) w.comm(s.sp ? "tp reduce-scatter" : "tp all-reduce", tp_in, act, kTp, StreamKind::TpComm, Category::TpComm);
  }
  w.add(unit, {"norm1"}, bwd);
  w.flush(Category::Compute);
}

Passes::UnitTimes Passes::unit_times(int stage, int unit, bool blocking_comm) {
  measure_blocking_comm_ = blocking_comm;
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
  measure_blocking_comm_ = true;
  return t;
}

bool Passes::overlap_shared_experts() const {
  const auto& job = ctx_.job();
  return job.strategy.ep_overlap && job.strategy.ep > 1 && job.workload.model.moe &&
         job.workload.model.moe->shared_experts > 0;
}

// Ring attention (Liu et al. 2023): the attention of a cp rank's queries against the cp blocks of
// keys and values, block by block, while the next block travels one step around the cp ring. Each
// step moves one block per rank: 1/(cp − 1) of a ring all-gather of all K and V. Backward, each
// step carries a K/V block and the gradient accumulated for it (twice the bytes), and a last step
// returns every block's gradient to its owner. Communication hides when a step's transfer is
// shorter than a block's attention.
void Passes::ring_attention(Writer& w, int unit, const std::vector<model::Pass>& passes, bool backward,
                            Category category) {
  const int cp = ctx_.shape().cp;
  const Share step{1.0 / (cp - 1), "ring"};
  const Bytes bytes = backward ? kv_gather_bytes() * 2 : kv_gather_bytes();
  const auto name = backward ? "cp ring kv+grad" : "cp ring kv";
  for (int block = 0; block < cp; ++block) {
    TaskList next;
    if (block + 1 < cp)
      next = w.comm_async(name, CollectiveKind::AllGather, bytes, kCp, StreamKind::CpComm, Category::CpComm, step,
                          block == 0);
    w.add_part(unit, "attention", passes, cp);
    w.flush(category);
    w.wait_for(next);
  }
  if (backward)
    w.comm("cp ring grad return", CollectiveKind::AllGather, kv_gather_bytes(), kCp, StreamKind::CpComm,
           Category::CpComm, step);
}

Bytes Passes::fp8_operand_gather(Bytes act) const {
  // (fp8_tp_gather=on without an FP8 recipe is refused: resolve_job)
  if (!spec::fp8_tp_gather_of(ctx_.job().strategy)) return act;
  return Bytes::from_double(act.as_double() / ctx_.shape().activation_bytes);
}

Bytes Passes::mlp_gather_bytes(bool moe, Bytes act) const {
  // A dense MLP's gather feeds fc1 (and its backward's fc2); an MoE block's feeds the router and
  // the dispatcher in bf16, except where the experts are folded and only the shared experts gather,
  // through Transformer Engine's linear layer (Megatron's SharedExpertMLP gathers in bf16 itself when
  // it overlaps the dispatch).
  const bool operand = !moe || (ctx_.shape().folded() && !overlap_shared_experts());
  return operand ? fp8_operand_gather(act) : act;
}

Bytes Passes::kv_gather_bytes() const {
  // all-gather of the local K and V of every cp rank (Llama 3's context parallelism)
  const auto& m = ctx_.job().workload.model;
  const auto& s = ctx_.shape();
  const double kv_local = std::max(1.0, static_cast<double>(m.kv_heads) / s.tp) * static_cast<double>(m.head_dim);
  return Bytes::from_double(2.0 * kv_local * static_cast<double>(s.micro_batch * s.seq_len) * s.activation_bytes);
}

Bytes Passes::all_to_all_bytes() const {
  // each rank sends every routed copy of its tokens, T · top_k · h · 2 bytes, and the busiest
  // receives (and in the combine sends) routed_load times its share of them
  const auto& m = ctx_.job().workload.model;
  const auto& s = ctx_.shape();
  return Bytes::from_double(model::received_copies(*m.moe, s) * static_cast<double>(m.hidden) * s.activation_bytes);
}

std::set<int> Passes::recomputed_units(const std::vector<int>& units) const {
  std::set<int> out;
  int layer = 0;
  for (const int unit : units)
    if (unit >= 0 && spec::recomputes_layer(ctx_.job().strategy, layer++)) out.insert(unit);
  return out;
}

TaskList Passes::forward(int stage, int chunk, int microbatch) {
  Writer w(*this, stage, 'F', microbatch);
  TaskList previous(ctx_.stage_ranks(stage).size(), kNoTask);
  // Megatron's uniform method keeps only each group's input
  const int group = spec::recompute_group(ctx_.job().strategy);
  int layer = 0;  // index of the layer in its model chunk
  for (const int unit : chunk_units(ctx_.job(), stage, chunk)) {
    const bool recomputed = unit >= 0 && spec::recomputes_layer(ctx_.job().strategy, layer++);
    dp_.before_launch(stage, chunk, unit, microbatch, true);
    launch(stage, unit, 'F', false, microbatch);
    dp_.before_pass(stage, chunk, unit, microbatch, true, previous);
    w.taped(unit, 0, 0, [&] { unit_forward(w, unit, Category::Compute); });
    const auto last = w.last();
    dp_.after_pass(stage, unit, true, microbatch, last);
    const bool kept = unit < 0 || group == 1 || (layer - 1) % group == 0;
    const std::int64_t stored = kept ? stored_activations(unit, recomputed) : 0;
    ctx_.memory(stage, last, stored, MemoryKind::Activations, true);
    if (unit == kHeadUnit) ctx_.loss_ran(stage, last);
    if (offload_.active() && unit >= 0) offload_.forward_done(stage, layer - 1, last, stored, microbatch);
    previous = last;
  }
  return previous;
}

TaskList Passes::backward(int stage, int chunk, int microbatch) {
  Writer w(*this, stage, 'B', microbatch);
  auto units = chunk_units(ctx_.job(), stage, chunk);
  const auto recomputed = recomputed_units(units);
  // each layer's index in its chunk, for Megatron's uniform groups
  std::map<int, int> index;
  for (const int unit : units)
    if (unit >= 0) index.emplace(unit, static_cast<int>(index.size()));
  const int group = spec::recompute_group(ctx_.job().strategy);
  std::reverse(units.begin(), units.end());
  TaskList previous(ctx_.stage_ranks(stage).size(), kNoTask);
  for (const int unit : units) {
    const bool full = recomputed.contains(unit);
    if (offload_.active() && unit >= 0) offload_.backward_next(stage, index.at(unit), previous, microbatch);
    dp_.before_launch(stage, chunk, unit, microbatch, false, full);
    launch(stage, unit, 'B', full, microbatch);
    dp_.before_pass(stage, chunk, unit, microbatch, false, previous);
    const std::int64_t rebuilt = rebuilt_activations(unit, full);
    if (group > 1 && unit >= 0) {
      // the first backward of a group (its last layer) replays the whole group's forward from the
      // group's input, and holds every layer of it until each one's backward
      const int i = index.at(unit);
      if (i % group == group - 1 || i + 1 == static_cast<int>(index.size())) {
        std::int64_t held = 0;
        for (int j = i - i % group; j <= i; ++j) {
          const int u = unit - (i - j);
          w.taped(u, 2, 1, [&] { replay(w, u, true); });
          held += stored_activations(u, true) + rebuilt_activations(u, true);
        }
        ctx_.memory(stage, w.last(), held - stored_activations(unit - i % group, true), MemoryKind::Activations, true);
      }
    } else {
      w.taped(unit, 2, full ? 1 : 0, [&] { replay(w, unit, full); });
      if (rebuilt > 0) ctx_.memory(stage, w.last(), rebuilt, MemoryKind::Activations, true);
    }
    // the gradients the layer's backward holds at once, from its first kernel to its last
    w.mark_first();
    w.taped(unit, 1, split_ ? 0 : 1, [&] { unit_backward(w, unit, !split_); });
    const std::int64_t working = unit < 0 ? 0 : static_cast<std::int64_t>(checkpoint(unit, full).working);
    if (working > 0 && !w.first().empty()) ctx_.memory(stage, w.first(), working, MemoryKind::Activations, false);
    // and, where the FP8 weights' transposes are not kept, the one its data-gradient GEMMs build
    const std::int64_t transpose = unit < 0 || w.first().empty() ? 0 : transient_transpose_;
    if (transpose > 0) ctx_.memory(stage, w.first(), transpose, MemoryKind::Buffers, false);
    const auto last = w.last();
    dp_.after_pass(stage, unit, false, microbatch, last);
    const std::int64_t kept = stored_activations(unit, full) + rebuilt;
    ctx_.memory(
        stage, last,
        -(split_ ? static_cast<std::int64_t>(kept * (1 - kWeightGradShare)) : kept) - (w.first().empty() ? 0 : working),
        MemoryKind::Activations, true);
    if (transpose > 0) ctx_.memory(stage, last, -transpose, MemoryKind::Buffers, true);
    if (!split_) dp_.gradients_ready(stage, chunk, unit, microbatch, last);
    previous = last;
  }
  return previous;
}

TaskList Passes::weight_grad(int stage, int chunk, int microbatch) {
  Writer w(*this, stage, 'W', microbatch);
  auto units = chunk_units(ctx_.job(), stage, chunk);
  const auto recomputed = recomputed_units(units);
  std::reverse(units.begin(), units.end());
  for (const int unit : units) {
    launch(stage, unit, 'W', false, microbatch);
    for (const auto& op : ops_of(unit)) w.add(unit, {op.name}, {Pass::BackwardWeight});
    const auto last = w.flush(Category::Compute);
    const bool full = recomputed.contains(unit);
    const std::int64_t kept = stored_activations(unit, full) + rebuilt_activations(unit, full);
    ctx_.memory(stage, last, -(kept - static_cast<std::int64_t>(kept * (1 - kWeightGradShare))),
                MemoryKind::Activations, true);
    dp_.gradients_ready(stage, chunk, unit, microbatch, last);
  }
  return w.last();
}

}  // namespace trainsim::lower
