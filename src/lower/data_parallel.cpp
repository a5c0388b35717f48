#include "lower/data_parallel.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/model/kernel_model.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::lower {

using cost::CollectiveKind;
using spec::ParallelDim;

int unit_kind(const spec::ModelSpec& model, int unit) {
  return unit < 0 ? unit : (model::is_moe_layer(model, unit) ? 1 : 0);
}

std::vector<int> chunk_units(const spec::Job& job, int stage, int chunk) {
  const int pp = job.strategy.pp;
  const int vpp = job.strategy.vpp;
  // the virtual stage (spec::virtual_stage) holds the layers of that position in the model
  const int position = spec::virtual_stage(job.strategy.schedule, stage, chunk, pp);
  std::vector<int> units;
  if (position == 0) units.push_back(kEmbeddingUnit);
  const int first = spec::chunk_first_layer(job, stage, chunk);
  const int count = spec::chunk_layers(job, stage, chunk);
  for (int i = 0; i < count; ++i) units.push_back(first + i);
  if (position != pp * vpp - 1) return units;
  // the multi-token prediction modules' layers, numbered after the model's, before the head (whose
  // ops include the modules' projections and second loss)
  const auto& m = job.workload.model;
  for (int j = 0; j < m.mtp_layers; ++j) units.push_back(m.layers + j);
  units.push_back(kHeadUnit);
  return units;
}

DataParallel::DataParallel(Context& ctx)
    : ctx_(ctx),
      zero_(ctx.job().strategy.zero),
      keep_for_backward_(!spec::reshard_after_forward_of(ctx.job().strategy)),
      keep_for_step_(keep_for_backward_ && ctx.job().strategy.pp > 1),
      overlap_grad_reduce_(ctx.job().strategy.overlap_grad_reduce),
      overlap_param_gather_(ctx.job().strategy.overlap_param_gather),
      limit_all_gathers_(ctx.job().strategy.limit_all_gathers),
      fsdp_version_(ctx.job().strategy.fsdp_version),
      // (DeepSpeed's ways with ZeRO-3 only: its stages 1 and 2 reduce in buckets)
      gather_mode_(zero_ == 3 ? ctx.job().strategy.zero3_gather : spec::Zero3Gather::Unit),
      sync_(zero_ == 3 && ctx.job().strategy.zero3_sync),
      list_io_(zero_ == 3 && ctx.job().strategy.zero3_list_io),
      persistence_threshold_(zero_ == 3 ? static_cast<double>(ctx.job().strategy.zero3_persistence_threshold) : 0.0),
      max_reuse_distance_(static_cast<double>(ctx.job().strategy.zero3_max_reuse_distance)),
      grad_bytes_(ctx.job().strategy.grad_reduce_dtype ? spec::dtype_bytes(*ctx.job().strategy.grad_reduce_dtype)
                                                       : model::weight_bytes(ctx.job().workload.training.dtype)),
      // a shard group smaller than the data-parallel group: HSDP
      shard_{spec::zero_shards(ctx.job()) < ctx.job().dp * ctx.job().strategy.cp
                 ? static_cast<int>(spec::zero_shards(ctx.job()))
                 : 0,
             false},
      microbatches_(ctx.job().micro_batches),
      trainable_(model::trainable_stage_params(ctx.job())),
      bucket_params_(std::max(ctx.options().min_bucket_params, 1e6 * static_cast<double>(ctx.job().dp))),
      stages_(static_cast<std::size_t>(ctx.stages())) {
  // Dense gradients reduce over every data-parallel rank (and context-parallel: CP ranks hold the
  // same weights); expert gradients over the ranks holding the same experts.
  dense_dims_ = {ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp};
  expert_dims_ = {ParallelDim::Cp, ParallelDim::Dp};
  for (int s = 0; s < ctx.stages(); ++s) build_buckets(s);
}

DataParallel::UnitParams DataParallel::unit_params(int /*stage*/, int unit) const {
  const auto& job = ctx_.job();
  if (unit == kEmbeddingUnit) return {model::embedding_params_on_gpu(job), 0};
  if (unit == kHeadUnit) return {model::head_params_on_gpu(job), 0};
  const auto p = model::layer_params_on_gpu(job.workload.model, model::is_moe_layer(job.workload.model, unit),
                                            job.strategy.tp, job.strategy.ep, spec::expert_tp_of(job.strategy));
  return {p.dense, p.expert};
}

const std::vector<model::ParamTensor>& DataParallel::unit_tensors(int unit) const {
  const auto& job = ctx_.job();
  const int kind = unit_kind(job.workload.model, unit);
  if (const auto it = tensors_.find(kind); it != tensors_.end()) return it->second;
  auto tensors = unit == kEmbeddingUnit ? model::embedding_param_tensors(job)
                 : unit == kHeadUnit    ? model::head_param_tensors(job)
                                        : model::layer_param_tensors(job.workload.model, kind == 1, job.strategy.tp,
                                                                     job.strategy.ep, spec::expert_tp_of(job.strategy));
  return tensors_.emplace(kind, std::move(tensors)).first->second;
}

DataParallel::UnitParams DataParallel::part_of(const model::ParamTensor& t) {
  return t.expert ? UnitParams{0, t.elements} : UnitParams{t.elements, 0};
}

int DataParallel::collectives_in(const UnitParams& part) {
  return (part.dense > 0 ? 1 : 0) + (part.expert > 0 ? 1 : 0);
}

DataParallel::UnitParams DataParallel::gathered_params(int stage, int unit) const {
  if (persistence_threshold_ <= 0) return unit_params(stage, unit);
  UnitParams p;
  for (const auto& t : unit_tensors(unit)) {
    if (t.elements < persistence_threshold_) continue;
    (t.expert ? p.expert : p.dense) += t.elements;
  }
  return p;
}

bool DataParallel::launches_own_collectives() const {
  return zero_ == 3 && (gather_mode_ != spec::Zero3Gather::Unit || sync_ || list_io_);
}

std::vector<DataParallel::UnitParams> DataParallel::gather_parts(int stage, int unit) const {
  if (gather_mode_ == spec::Zero3Gather::Unit) return {gathered_params(stage, unit)};
  std::vector<UnitParams> out;
  int module = -1;
  for (const auto& t : unit_tensors(unit)) {
    if (t.elements < persistence_threshold_) continue;
    const auto part = part_of(t);
    // a module's tensors coalesced into one collective
    if (gather_mode_ == spec::Zero3Gather::Module && t.module == module) {
      out.back().dense += part.dense;
      out.back().expert += part.expert;
      continue;
    }
    module = t.module;
    out.push_back(part);
  }
  return out;
}

std::vector<DataParallel::UnitParams> DataParallel::reduce_parts(int stage, int unit) const {
  // (LoRA's adapters are reduced as one tensor per unit; DeepSpeed since 0.4 reduces gradients by
  // the bucket, here by the unit)
  if (gather_mode_ != spec::Zero3Gather::Parameter || ctx_.job().workload.training.lora)
    return {grad_params(stage, unit)};
  std::vector<UnitParams> out;
  for (const auto& t : unit_tensors(unit)) out.push_back(part_of(t));
  return out;
}

Duration DataParallel::own_launch_time(const UnitParams& part) const {
  const auto launch = ctx_.options().host.collective_launch * collectives_in(part);
  if (!list_io_) return launch;
  // the ranks each group shards over (shard_, expert_shard)
  const std::int64_t dense = spec::zero_shards(ctx_.job());
  const std::int64_t expert = expert_shard().size > 0 ? expert_shard().size : expert_ranks();
  // per rank's slice, one eager copy on the host: ProcessGroupNCCL copies each slice out of its
  // flat output after the all-gather, or into its flat input before the reduce-scatter
  // (flatten_for_scatter_gather; DeepSpeed's Python slicing, views without a kernel, not counted)
  const std::int64_t slices = (part.dense > 0 ? dense : 0) + (part.expert > 0 ? expert : 0);
  return launch + ctx_.options().host.eager_launch * slices;
}

TaskList DataParallel::gather_unit(int stage, const std::vector<UnitParams>& parts, std::string_view name) {
  auto& st = stages_[static_cast<std::size_t>(stage)];
  TaskList last(ctx_.stage_ranks(stage).size(), kNoTask);
  if (!launches_own_collectives()) {
    // (its launch is part of the pass's: Passes::host_time)
    for (const auto& part : parts) last = gather(stage, part, name);
    st.last_zero3 = last;
    return last;
  }
  const auto& h = ctx_.options().host;
  for (const auto& part : parts) {
    if (part.dense + part.expert <= 0) continue;
    if (sync_) {
      // torch.cuda.synchronize(): everything issued so far ends first
      ctx_.wait(stage, StreamKind::Host, ctx_.last_compute(stage, 0));
      ctx_.wait(stage, StreamKind::Host, ctx_.last_compute(stage, 1));
      if (!st.last_zero3.empty()) ctx_.wait(stage, StreamKind::Host, st.last_zero3);
    }
    const auto own = own_launch_time(part);
    const auto launch = h.collective_launch * collectives_in(part);
    ctx_.launch(stage, "zero3 gather launch", launch);
    last = gather(stage, part, name);
    st.last_zero3 = last;
    // the gathered slices copied out of the flat buffer, one per rank, after the collective
    if (own > launch) ctx_.launch(stage, "zero3 gather copy-out", own - launch);
    // (and, synchronous, the host waits for them before it goes on)
    if (sync_) ctx_.wait(stage, StreamKind::Host, last);
  }
  return last;
}

void DataParallel::reduce_scatter_unit(int stage, int unit) {
  const auto name = fmt::format("grad reduce-scatter {}", unit);
  for (const auto& part : reduce_parts(stage, unit)) {
    if (part.dense + part.expert <= 0) continue;
    // the gradient's slices copied into the flat input, one per rank, then the collective
    if (launches_own_collectives()) ctx_.launch(stage, "grad reduce-scatter launch", own_launch_time(part));
    reduce(stage, part, true, name);
  }
  auto& st = stages_[static_cast<std::size_t>(stage)];
  st.last_zero3 = st.reductions.back();
}

DataParallel::UnitParams DataParallel::grad_params(int stage, int unit) const {
  const auto& job = ctx_.job();
  if (!job.workload.training.lora) return unit_params(stage, unit);
  // LoRA: the adapters beside each layer's linear layers; the embedding and the head are frozen
  if (unit < 0) return {0, 0};
  return {model::lora_params_on_gpu(job.workload.model, *job.workload.training.lora, job.strategy.tp), 0};
}

void DataParallel::build_buckets(int stage) {
  auto& st = stages_[static_cast<std::size_t>(stage)];
  for (int c = 0; c < ctx_.job().strategy.vpp; ++c) {
    auto units = chunk_units(ctx_.job(), stage, c);
    std::reverse(units.begin(), units.end());  // gradients appear in backward order
    Bucket current;
    for (const int u : units) {
      const auto p = grad_params(stage, u);
      current.dense += p.dense;
      current.expert += p.expert;
      ++current.pending;
      st.bucket_of[{c, u}] = st.buckets.size();
      if (current.dense + current.expert >= bucket_params_) {
        st.buckets.push_back(current);
        current = {};
      }
    }
    if (current.pending > 0) st.buckets.push_back(current);
  }
  st.reductions.clear();
}

std::vector<DataParallel::Step> DataParallel::gather_steps(const UnitParams& p) const {
  const auto w = model::weight_bytes(ctx_.job().workload.training.dtype);
  std::vector<Step> out;
  if (p.dense > 0)
    out.push_back({CollectiveKind::AllGather, Bytes::from_double(p.dense * w), &dense_dims_, shard_, false, true});
  if (p.expert > 0)
    out.push_back(
        {CollectiveKind::AllGather, Bytes::from_double(p.expert * w), &expert_dims_, expert_shard(), false, true});
  return out;
}

std::vector<DataParallel::Step> DataParallel::reduce_steps(const UnitParams& p, bool scatter) const {
  const auto kind = scatter ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  std::vector<Step> out;
  const auto one = [&](double params, const std::vector<ParallelDim>& dims, Subgroup shard) {
    const auto bytes = Bytes::from_double(params * grad_bytes_);
    if (!scatter || shard.size == 0) {
      out.push_back({kind, bytes, &dims, {}, false, true});
      return;
    }
    // HSDP: reduce-scatter within the shard group, then all-reduce each shard across the replicas
    out.push_back({kind, bytes, &dims, shard, false, false});
    out.push_back({CollectiveKind::AllReduce,
                   Bytes::from_double(params * grad_bytes_ / shard.size),
                   &dims,
                   {shard.size, true},
                   true,
                   true});
  };
  if (p.dense > 0) one(p.dense, dense_dims_, shard_);
  if (p.expert > 0) one(p.expert, expert_dims_, expert_shard());
  return out;
}

Duration DataParallel::uncontended(int stage, const std::vector<Step>& steps) {
  auto t = Duration::zero();
  for (const auto& s : steps) t += ctx_.uncontended(stage, s.kind, s.bytes, *s.dims, s.subgroup);
  return t;
}

TaskList DataParallel::gather(int stage, const UnitParams& p, std::string_view name) {
  TaskList last(ctx_.stage_ranks(stage).size(), kNoTask);
  for (const auto& s : gather_steps(p))
    last = ctx_.collective(stage, name, s.kind, s.bytes, *s.dims, StreamKind::DpComm, Category::DpComm, 1.0, "auto",
                           s.subgroup);
  return last;
}

void DataParallel::reduce(int stage, const UnitParams& p, bool scatter, std::string_view name) {
  auto& st = stages_[static_cast<std::size_t>(stage)];
  const std::string across = fmt::format("{} replicas", name);
  for (const auto& s : reduce_steps(p, scatter)) {
    auto task = ctx_.collective(stage, s.across_replicas ? std::string_view(across) : name, s.kind, s.bytes, *s.dims,
                                StreamKind::DpComm, Category::DpComm, 1.0, "auto", s.subgroup);
    if (s.completes) st.reductions.push_back(std::move(task));
  }
}

double DataParallel::copy_out_bytes_per_param() const {
  // torch.distributed.fsdp._fully_shard._fsdp_collectives.foreach_all_gather_copy_out:
  // split_with_sizes_copy from the all-gather output into each unsharded parameter, run on the
  // current (compute) stream in FSDPParamGroup.wait_for_unshard. FSDP1's modules view the
  // all-gathered FlatParameter: nothing to copy.
  if (zero_ != 3 || fsdp_version_ != 2) return 0;
  return 2.0 * model::weight_bytes(ctx_.job().workload.training.dtype);
}

double DataParallel::reduce_copy_bytes_per_param() const {
  // FSDP's ZeRO-3, or FSDP1's SHARD_GRAD_OP (FSDP2 has no ZeRO-2: it is ZeRO-3 without resharding)
  if (zero_ != 3 && !(zero_ == 2 && fsdp_version_ == 1)) return 0;
  const double w = model::weight_bytes(ctx_.job().workload.training.dtype);
  const double r = grad_bytes_;
  // FSDP2 (foreach_reduce): torch._chunk_cat of the unsharded gradients into the reduce-scatter
  // input, converted to the reduce dtype; fp32 and bf16 reductions divide inside NCCL (ReduceOp
  // AVG), no division kernel.
  if (fsdp_version_ == 2) return w + r;
  // FSDP1 (_runtime_utils._post_backward_hook and _reduce_grad): flat_param.grad.to(reduce_dtype)
  // when the dtypes differ, then _div_if_needed by the gradient pre-divide factor (> 1 for any
  // group of 2 or more ranks) over the whole unsharded gradient in place.
  return (r != w ? w + r : 0.0) + 2 * r;
}

Duration DataParallel::copy_time(double bytes) const {
  const model::Op op{
      .name = "fsdp copy", .shape = model::Elementwise{.bytes = bytes}, .fwd_bytes = bytes, .bwd_bytes = bytes};
  return model::kernel_time(op, model::Pass::Forward, ctx_.kernels());
}

void DataParallel::before_reduce_scatter(int stage, const UnitParams& p, int unit) {
  const double bytes = reduce_copy_bytes_per_param() * (p.dense + p.expert);
  if (bytes <= 0) return;
  const std::string name = fmt::format("fsdp grad copy-in {}", unit);
  ctx_.kernel(stage, StreamKind::DpComm, std::string_view(name), copy_time(bytes), Category::DpComm);
}

void DataParallel::reduce_bucket(int stage, std::size_t b) {
  const auto& bucket = stages_[static_cast<std::size_t>(stage)].buckets[b];
  reduce(stage, {bucket.dense, bucket.expert}, zero_ == 1,
         fmt::format("grad {} b{}", zero_ == 1 ? "reduce-scatter" : "all-reduce", b));
}

// The host's time to launch the optimizer step over a stage's parameter tensors: per tensor in a
// loop, AdamW's nine elementary ops (the step count, the two moments' multiply and add, sqrt,
// division, eps, the update) and the step count's read-back to the host (Composer's
// DecoupledAdamW, composer/optim/decoupled_weight_decay.py v0.16.4 L237-264); or per chunk of tensors,
// the same ops in multi-tensor kernels
// (PyTorch's multi_tensor_apply takes 36 tensors per launch at Adam's depth of four lists,
// aten/src/ATen/native/cuda/MultiTensorApply.cuh depth_to_max_tensors), one fused kernel per chunk.
Duration DataParallel::optimizer_launch_time(int stage) const {
  const auto& job = ctx_.job();
  const auto& m = job.workload.model;
  int tensors = 0;
  const int local_experts = m.moe ? std::max(1, m.moe->experts / std::max(1, job.strategy.ep)) : 0;
  // the embedding (and the learned positions); the final norm and an untied output layer
  const int embedding = m.position == spec::PositionKind::Learned ? 2 : 1;
  // (and each multi-token prediction module's projection and three norms)
  const int norm = m.norm == spec::NormKind::LayerNorm ? 2 : 1;
  const int head = norm + (m.tied_embeddings ? 0 : 1) + m.mtp_layers * (1 + 3 * norm);
  for (int c = 0; c < job.strategy.vpp; ++c)
    for (const int u : chunk_units(job, stage, c))
      tensors += u == kEmbeddingUnit ? embedding
                 : u == kHeadUnit    ? head
                                     : model::layer_parameter_tensors(m, model::is_moe_layer(m, u), local_experts);
  constexpr int kAdamOps = 10;
  constexpr int kTensorsPerLaunch = 36;
  const int chunks = (tensors + kTensorsPerLaunch - 1) / kTensorsPerLaunch;
  const int launches = job.strategy.optimizer_impl == spec::OptimizerImpl::ForLoop   ? tensors * kAdamOps
                       : job.strategy.optimizer_impl == spec::OptimizerImpl::Foreach ? chunks * kAdamOps
                                                                                     : chunks;
  return ctx_.options().host.eager_launch * launches;
}

std::int64_t DataParallel::expert_ranks() const {
  return ctx_.job().dp * ctx_.job().strategy.cp / spec::ep_outer(ctx_.job().strategy);
}

Subgroup DataParallel::expert_shard() const {
  // experts shard over their own (smaller) data-parallel group, in blocks no larger than zero_group
  const auto ranks = expert_ranks();
  return shard_.size > 0 && shard_.size < ranks && ranks % shard_.size == 0 ? shard_ : Subgroup{};
}

void DataParallel::start_of_step() {
  if (zero_ != 1 && zero_ != 2) return;
  for (int s = 0; s < ctx_.stages(); ++s) {
    auto& st = stages_[static_cast<std::size_t>(s)];
    // in forward order: the last buckets (of the first chunk's first layers) first
    st.gathers_at_start.assign(st.buckets.size(), {});
    for (std::size_t b = st.buckets.size(); b-- > 0;) {
      const auto& bucket = st.buckets[b];
      st.gathers_at_start[b] = gather(s, {bucket.dense, bucket.expert}, fmt::format("param all-gather b{}", b));
    }
  }
}

void DataParallel::before_pass(int stage, int chunk, int unit, int microbatch, bool forward, const TaskList& previous) {
  auto& st = stages_[static_cast<std::size_t>(stage)];
  if ((zero_ == 1 || zero_ == 2) && forward && microbatch == 0) {
    if (overlap_param_gather_) {
      ctx_.wait(stage, StreamKind::Compute, st.gathers_at_start.at(st.bucket_of.at({chunk, unit})));
    } else {
      // the updated parameters are all gathered before the step computes anything
      for (const auto& g : st.gathers_at_start) ctx_.wait(stage, StreamKind::Compute, g);
    }
    return;
  }
  if (zero_ != 3) return;
  for (const auto& g : gathers_of(stage, chunk, unit, microbatch, forward)) {
    // prefetch the next unit once the previous unit has run (at most two units gathered at once)
    if (g.prefetch) ctx_.wait(stage, StreamKind::DpComm, previous);
    const auto task =
        gather_unit(stage, gather_parts(stage, g.unit), fmt::format("zero3 gather {}{}", forward ? "F" : "B", g.unit));
    keep_gathered(stage, g.unit, g.key, task, task);
  }
  const auto key = gather_key(unit, microbatch, forward);
  ctx_.wait(stage, StreamKind::Compute, st.gathered.at(key));
  if (st.to_copy_out.erase(key) > 0) {
    const auto p = gathered_params(stage, unit);
    const std::string name = fmt::format("fsdp copy-out {}{}", forward ? "F" : "B", unit);
    ctx_.compute(stage, std::string_view(name), copy_time(copy_out_bytes_per_param() * (p.dense + p.expert)),
                 Category::Compute);
  }
}

void DataParallel::keep_gathered(int stage, int unit, const GatherKey& key, const TaskList& first,
                                 const TaskList& last) {
  auto& st = stages_[static_cast<std::size_t>(stage)];
  const auto p = gathered_params(stage, unit);
  const auto w = model::weight_bytes(ctx_.job().workload.training.dtype);
  ctx_.memory(stage, first, static_cast<std::int64_t>((p.dense + p.expert) * w), MemoryKind::Buffers, false);
  st.gathered[key] = last;
  if (copy_out_bytes_per_param() > 0) st.to_copy_out.insert(key);
}

DataParallel::GatherKey DataParallel::gather_key(int unit, int microbatch, bool forward) const {
  if (keep_for_step_) return {unit, 0, true};
  if (keep_for_backward_) return {unit, microbatch, true};
  return {unit, microbatch, forward};
}

std::vector<DataParallel::Gather> DataParallel::gathers_of(int stage, int chunk, int unit, int microbatch,
                                                           bool forward) const {
  const auto& st = stages_[static_cast<std::size_t>(stage)];
  auto units = chunk_units(ctx_.job(), stage, chunk);
  if (!forward) std::reverse(units.begin(), units.end());
  const auto pos = static_cast<std::size_t>(std::find(units.begin(), units.end(), unit) - units.begin());
  std::vector<Gather> out;
  if (const auto key = gather_key(unit, microbatch, forward); !st.gathered.contains(key))
    out.push_back({unit, key, false});
  // (backward_prefetch=none: the next unit gathers at its own pass, behind this one's reduce-scatter)
  if (!forward && ctx_.job().strategy.backward_prefetch == spec::BackwardPrefetch::None) return out;
  // (synchronous gathers: each module's parameters fetched when it runs, before_launch)
  if (sync_) return out;
  if (pos + 1 < units.size())
    if (const auto key = gather_key(units[pos + 1], microbatch, forward); !st.gathered.contains(key))
      out.push_back({units[pos + 1], key, true});
  return out;
}

void DataParallel::before_launch(int stage, int chunk, int unit, int microbatch, bool forward, bool recomputed) {
  if (sync_) {
    auto& st = stages_[static_cast<std::size_t>(stage)];
    const auto key = gather_key(unit, microbatch, forward);
    if (st.gathered.contains(key)) return;
    const auto name = fmt::format("zero3 gather {}{}", forward ? "F" : "B", unit);
    const auto parts = gather_parts(stage, unit);
    const auto first = gather_unit(stage, parts, name);
    auto last = first;
    // a recomputed layer's parameters are released after its recomputation and gathered again for
    // its backward, unless fewer than zero3_max_reuse_distance elements are fetched in between:
    // those of the modules after it, gathered for their recomputation (DeepSpeed's
    // _keep_for_later on its trace)
    if (!forward && recomputed) {
      std::vector<UnitParams> again;
      double after = 0;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (after >= max_reuse_distance_) again.insert(again.begin(), *it);
        after += it->dense + it->expert;
      }
      if (!again.empty()) last = gather_unit(stage, again, name);
    }
    keep_gathered(stage, unit, key, first, last);
    return;
  }
  if (zero_ != 3 || !limit_all_gathers_) return;
  // torch.distributed.fsdp _limiter_utils._FreeEventQueue: at most two frees outstanding; an
  // all-gather first synchronises the host on the oldest
  constexpr std::size_t kInflight = 2;
  auto& st = stages_[static_cast<std::size_t>(stage)];
  for (std::size_t i = 0; i < gathers_of(stage, chunk, unit, microbatch, forward).size(); ++i) {
    if (st.frees.size() < kInflight) break;
    ctx_.wait(stage, StreamKind::Host, st.frees.front());
    st.frees.pop_front();
  }
}

void DataParallel::after_pass(int stage, int unit, bool forward, int microbatch, const TaskList& last) {
  if (zero_ != 3) return;
  // resharded after the pass that last needs the parameters
  if (keep_for_backward_ && forward) return;
  if (keep_for_step_ && microbatch + 1 < microbatches_) return;
  const auto p = gathered_params(stage, unit);
  const auto w = model::weight_bytes(ctx_.job().workload.training.dtype);
  ctx_.memory(stage, last, -static_cast<std::int64_t>((p.dense + p.expert) * w), MemoryKind::Buffers, true);
  if (limit_all_gathers_) stages_[static_cast<std::size_t>(stage)].frees.push_back(last);
}

void DataParallel::gradients_ready(int stage, int chunk, int unit, int microbatch, const TaskList& last) {
  auto& st = stages_[static_cast<std::size_t>(stage)];
  ctx_.wait(stage, StreamKind::DpComm, last);
  if (zero_ == 3 && keep_for_step_) {
    // gradients accumulate unsharded until the last micro-batch, then are reduce-scattered
    const auto p = grad_params(stage, unit);
    if (p.dense + p.expert <= 0) return;  // a frozen unit (LoRA's embedding and head): nothing to reduce
    const auto g = grad_bytes_;
    if (microbatch == 0)
      ctx_.memory(stage, last, static_cast<std::int64_t>((p.dense + p.expert) * g), MemoryKind::Buffers, true);
    if (microbatch + 1 < microbatches_) return;
    before_reduce_scatter(stage, p, unit);
    reduce_scatter_unit(stage, unit);
    ctx_.memory(stage, st.reductions.back(), -static_cast<std::int64_t>((p.dense + p.expert) * g), MemoryKind::Buffers,
                true);
    return;
  }
  if (zero_ >= 2) {
    // every micro-batch: the unit's full gradients exist until their reduce-scatter ends; FSDP holds
    // them in the reduce dtype (FSDP1 replaces the gradient by its cast, FSDP2 copies it into the
    // reduce-scatter input and frees it)
    const auto p = grad_params(stage, unit);
    if (p.dense + p.expert <= 0) return;  // a frozen unit: nothing to reduce
    const double g =
        reduce_copy_bytes_per_param() > 0 ? grad_bytes_ : model::weight_bytes(ctx_.job().workload.training.dtype);
    ctx_.memory(stage, last, static_cast<std::int64_t>((p.dense + p.expert) * g), MemoryKind::Buffers, true);
    before_reduce_scatter(stage, p, unit);
    reduce_scatter_unit(stage, unit);
    ctx_.memory(stage, st.reductions.back(), -static_cast<std::int64_t>((p.dense + p.expert) * g), MemoryKind::Buffers,
                true);
    return;
  }
  if (microbatch + 1 < microbatches_) return;
  const auto b = st.bucket_of.at({chunk, unit});
  auto& bucket = st.buckets[b];
  if (--bucket.pending > 0) return;
  if (!overlap_grad_reduce_) {
    st.deferred.push_back(b);  // reduced once the stage's backward has ended
    return;
  }
  reduce_bucket(stage, b);
}

void DataParallel::end_of_step(const std::vector<TaskList>& last_compute) {
  const auto& job = ctx_.job();
  const int pp = ctx_.stages();
  // Megatron keeps the tied word embedding on the first and last stages, and a copy of the embedding
  // beside multi-token prediction modules: their gradients are summed.
  // (under LoRA the embedding is frozen: no gradient to sum)
  const auto& m = job.workload.model;
  if (pp > 1 && (m.tied_embeddings || m.mtp_layers > 0) && spec::head_stage(job) != 0 && !job.workload.training.lora) {
    const double params =
        static_cast<double>((m.vocab + job.strategy.tp - 1) / job.strategy.tp) * static_cast<double>(m.hidden);
    ctx_.wait(0, StreamKind::DpComm, last_compute.front());
    ctx_.wait(pp - 1, StreamKind::DpComm, last_compute.back());
    TaskList on_last;
    const auto first = ctx_.collective_between(
        0, pp - 1, m.tied_embeddings ? "tied embedding all-reduce" : "embedding all-reduce",
        Bytes::from_double(params * model::weight_bytes(job.workload.training.dtype)), StreamKind::DpComm, on_last);
    stages_.front().reductions.push_back(first);
    stages_.back().reductions.push_back(on_last);
  }
  const ParallelDim model_parallel[] = {ParallelDim::Tp, ParallelDim::Pp};
  for (int s = 0; s < pp; ++s) {
    auto& st = stages_[static_cast<std::size_t>(s)];
    if (!st.deferred.empty()) {
      ctx_.wait(s, StreamKind::DpComm, last_compute[static_cast<std::size_t>(s)]);
      for (const auto b : st.deferred) reduce_bucket(s, b);
    }
    for (const auto& r : st.reductions) ctx_.wait(s, StreamKind::DpComm, r);
    ctx_.wait(s, StreamKind::DpComm, last_compute[static_cast<std::size_t>(s)]);
    // the gradient norm for clipping: a few bytes over the model-parallel (and, sharded, data-parallel) group
    auto norm = ctx_.collective(s, "grad-norm all-reduce", CollectiveKind::AllReduce, Bytes{8}, model_parallel,
                                StreamKind::DpComm, Category::DpComm);
    if (zero_ >= 1)
      norm = ctx_.collective(s, "grad-norm all-reduce", CollectiveKind::AllReduce, Bytes{8}, dense_dims_,
                             StreamKind::DpComm, Category::DpComm);
    ctx_.wait(s, StreamKind::Compute, norm);
    // a per-tensor loop reads the step count back first, which waits for the device's backward
    if (job.strategy.optimizer_impl == spec::OptimizerImpl::ForLoop) ctx_.wait(s, StreamKind::Host, norm);
    if (const auto host = optimizer_launch_time(s); host > Duration::zero()) ctx_.launch(s, "launch optimizer", host);
    ctx_.compute(s, "optimizer step", optimizer_step_time(s), Category::Optimizer);
  }
}

Duration DataParallel::optimizer_step_time(int stage) const {
  const auto& job = ctx_.job();
  const auto& p = trainable_.at(static_cast<std::size_t>(stage));
  const double shards = zero_ >= 1 ? static_cast<double>(spec::zero_shards(job)) : 1.0;
  // experts shard over the ranks holding the same experts, in groups no larger than zero_group
  const double expert_shards = zero_ >= 1 ? std::max(1.0, std::min(shards, static_cast<double>(expert_ranks()))) : 1.0;
  const double local = p.dense / shards + p.expert / expert_shards;
  return model::optimizer_time(local, job.workload.training.optimizer, ctx_.kernels());
}

Duration DataParallel::tail_lower_bound(int stage) {
  auto tail = optimizer_step_time(stage);
  // the same condition as gradients_ready's deferral
  if (zero_ >= 2 || overlap_grad_reduce_) return tail;
  for (const auto& bucket : stages_[static_cast<std::size_t>(stage)].buckets)
    tail += uncontended(stage, reduce_steps({bucket.dense, bucket.expert}, zero_ == 1));
  return tail;
}

Duration DataParallel::stream_lower_bound(int stage) {
  if (zero_ != 3) return Duration::zero();
  // each distinct gather key (gather_key) is gathered once: once a step when the parameters are
  // kept for the step, once a micro-batch when kept for the backward, else for each pass; the
  // gradients are reduce-scattered once a step when kept for it, else every micro-batch
  // (gradients_ready)
  const auto m = microbatches_;
  const std::int64_t gathers = keep_for_step_ ? 1 : keep_for_backward_ ? m : 2 * m;
  const std::int64_t reductions = keep_for_step_ ? 1 : m;
  std::map<int, Duration> per_kind;  // one layer's share, by unit kind
  auto total = Duration::zero();
  for (int c = 0; c < ctx_.job().strategy.vpp; ++c)
    for (const int u : chunk_units(ctx_.job(), stage, c)) {
      if (u < 0) continue;  // the embedding and the head: left out
      const int kind = unit_kind(ctx_.job().workload.model, u);
      auto it = per_kind.find(kind);
      if (it == per_kind.end()) {
        it = per_kind
                 .emplace(kind, uncontended(stage, gather_steps(gathered_params(stage, u))) * gathers +
                                    uncontended(stage, reduce_steps(grad_params(stage, u), true)) * reductions)
                 .first;
      }
      total += it->second;
    }
  return total;
}

}  // namespace trainsim::lower
