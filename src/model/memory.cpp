#include "trainsim/model/memory.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "trainsim/model/flops.hpp"
#include "trainsim/model/layer_ops.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/model/saved_tensors.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::model {

using spec::Recompute;
using spec::Schedule;

StateBytesPerParam state_bytes_per_param(spec::Dtype dtype, spec::Optimizer optimizer) {
  // fp32 training keeps no separate master copy; mixed precision keeps fp32 master weights.
  const bool fp32 = dtype == spec::Dtype::Fp32;
  const double copy = fp32 ? 4 : 2;
  const double master = fp32 ? 0 : 4;
  const double moments = optimizer == spec::Optimizer::Adam ? 8 : 4;  // Adam m and v; SGD momentum
  return {.weights = copy, .grads = copy, .optimizer = master + moments};
}

ModelStateBytes model_state_bytes(double params, int zero_stage, std::int64_t shards, StateBytesPerParam per_param) {
  SIM_ASSERT(shards >= 1 && zero_stage >= 0 && zero_stage <= 3, "bad ZeRO sharding {} over {}", zero_stage, shards);
  const double n = static_cast<double>(shards);
  return {.weights = per_param.weights * params / (zero_stage >= 3 ? n : 1),
          .grads = per_param.grads * params / (zero_stage >= 2 ? n : 1),
          .optimizer = per_param.optimizer * params / (zero_stage >= 1 ? n : 1)};
}

namespace {

// Megatron-LM's interleaved schedule runs (p − stage − 1)·2 + (v − 1)·p warm-up forwards
// (lower/schedule.cpp interleaved), then a forward and a backward in turn.
std::int64_t interleaved_warmup(int stage, int pp, int vpp) {
  return 2LL * (pp - stage - 1) + static_cast<std::int64_t>(vpp - 1) * pp;
}

double interleaved_chunks_in_flight(int stage, int pp, int vpp, std::int64_t micro_batches) {
  // the warm-up and one more forward before the first backward
  return std::min(static_cast<double>(interleaved_warmup(stage, pp, vpp) + 1),
                  static_cast<double>(micro_batches) * vpp);
}

}  // namespace

double inflight_microbatches(Schedule schedule, int stage, int pp, int vpp, std::int64_t micro_batches) {
  const double m = static_cast<double>(micro_batches);
  switch (schedule) {
    case Schedule::GPipe:
      return m;
    case Schedule::OneFOneB:
    case Schedule::ZbH1:
      return std::min(m, static_cast<double>(pp - stage));
    case Schedule::Interleaved:
      return std::ceil(interleaved_chunks_in_flight(stage, pp, vpp, micro_batches) / vpp);
    case Schedule::DualPipeV:
      // chunk 0's forwards before the stage's first backward: 2(p − s − 1) + s + 1
      return std::min(m, static_cast<double>(2 * pp - stage - 1));
  }
  return m;
}

double inflight_layer_microbatches(Schedule schedule, int stage, int pp, int vpp, std::int64_t micro_batches,
                                   int stage_layers) {
  if (schedule == Schedule::Interleaved)
    return interleaved_chunks_in_flight(stage, pp, vpp, micro_batches) * stage_layers / vpp;
  // DualPipeV: every stage runs 2p chunk forwards before its first backward, and one more beside it
  // (DualPipe's table: PP + 1 chunks' activations per device for PP = 2p virtual stages)
  if (schedule == Schedule::DualPipeV)
    return std::min(2.0 * pp + 1, 2.0 * static_cast<double>(micro_batches)) * stage_layers / 2;
  return inflight_microbatches(schedule, stage, pp, vpp, micro_batches) * stage_layers;
}

double inflight_layer_microbatches(Schedule schedule, int stage, int pp, std::int64_t micro_batches,
                                   const std::vector<int>& chunk_layers) {
  const int vpp = static_cast<int>(chunk_layers.size());
  if (schedule != Schedule::Interleaved) {
    // one chunk, or DualPipeV's two in even shares
    double layers = 0;
    for (const int n : chunk_layers) layers += n;
    return inflight_layer_microbatches(schedule, stage, pp, vpp, micro_batches, static_cast<int>(layers));
  }
  // Megatron's order (lower/schedule.cpp interleaved): the warm-up's forwards, then a forward and a
  // backward in turn; forward step k runs chunk (k / p) mod v, backward step k chunk v − 1 − that.
  // With unequal chunks the peak can come after the first backward (a large chunk's forwards beside
  // a small chunk's backwards), so the walk keeps the largest running sum.
  const std::int64_t total = micro_batches * vpp;
  const auto chunk = [&](std::int64_t k, bool forward) {
    const auto c = static_cast<std::size_t>((k / pp) % vpp);
    return static_cast<double>(chunk_layers[forward ? c : static_cast<std::size_t>(vpp - 1) - c]);
  };
  const std::int64_t warmup = std::min(interleaved_warmup(stage, pp, vpp), total);
  double held = 0;
  for (std::int64_t k = 0; k < warmup; ++k) held += chunk(k, true);
  double peak = held;
  for (std::int64_t f = warmup, b = 0; f < total; ++f, ++b) {
    held += chunk(f, true);
    peak = std::max(peak, held);
    held -= chunk(b, false);
  }
  return peak;
}

double embedding_activation_bytes(const spec::ModelSpec& m, const LayerShape& s) {
  const double T = static_cast<double>(s.micro_batch * (s.seq_len / s.cp));
  return (m.dropout ? 1.0 : 0.0) * T * static_cast<double>(m.hidden) / (s.sp ? s.tp : 1);
}

namespace {
double one_head_activation_bytes(const spec::ModelSpec& m, const LayerShape& s) {
  const double T = static_cast<double>(s.micro_batch * (s.seq_len / s.cp));
  const double vocab_shard = static_cast<double>((m.vocab + s.tp - 1) / s.tp);
  // the final norm's input, and its output as the logits GEMM's input (gathered under DTensor SP)
  const double sp = s.sp ? s.tp : 1;
  const double h = static_cast<double>(m.hidden);
  const double inputs = s.activation_bytes * T * h * (1 / sp + (s.sp_saves_gathered ? 1 : 1 / sp));
  if (!s.loss_fused_linear) return inputs + s.loss_bytes_per_logit * T * vocab_shard;
  // Liger's fused linear cross entropy: one chunk's logits at a time, and the input's and the
  // output weight's gradients, computed in the forward and saved for the backward (in the
  // activations' dtype: FSDP's unsharded bf16 weight)
  const auto chunk = spec::loss_chunk_tokens(spec::LossImpl::FusedLinear, static_cast<std::int64_t>(T),
                                             static_cast<std::int64_t>(vocab_shard), m.hidden);
  return inputs + s.loss_bytes_per_logit * static_cast<double>(chunk) * vocab_shard +
         s.activation_bytes * (T * h + vocab_shard * h);
}
}  // namespace

double head_activation_bytes(const spec::ModelSpec& m, const LayerShape& s) {
  const double one = one_head_activation_bytes(m, s);
  if (m.mtp_layers == 0) return one;
  // each multi-token prediction module saves what the head saves for its own norm, logits and loss,
  // and the inputs of its two norms and of its projection ([hidden; embedding], gathered under SP)
  const double T = static_cast<double>(s.micro_batch * (s.seq_len / s.cp));
  const double sp = s.sp ? s.tp : 1;
  const double inputs = s.activation_bytes * T * static_cast<double>(m.hidden) * (2 / sp + 2);
  return one + m.mtp_layers * (one + inputs);
}

double loss_cached_bytes(const spec::ModelSpec& m, const LayerShape& s) {
  const double T = static_cast<double>(s.micro_batch * (s.seq_len / s.cp));
  return s.loss_cached_bytes_per_logit * T * static_cast<double>((m.vocab + s.tp - 1) / s.tp);
}

namespace {

double stage_activation_bytes(const spec::Job& job, std::size_t stage) {
  const auto& m = job.workload.model;
  const auto& st = job.strategy;
  const LayerShape shape = gpu_layer_shape(job);
  const int pp = st.pp;
  const int layers = job.stage_layers[stage];
  const auto s = static_cast<int>(stage);
  // Average bytes per layer of this stage (dense and MoE layers, recomputed or not, may mix), and
  // the most one layer's recomputation rebuilds during its backward.
  double per_layer_sum = 0;
  double working_set = 0;
  // Megatron's uniform method keeps each group's input only and rebuilds a whole group at once
  const int group = spec::recompute_group(st);
  double group_held = 0;
  // every layer of a kind (dense or MoE, recomputed or not) keeps the same
  std::array<std::optional<LayerCheckpoint>, 4> kinds;
  // the stage's layers chunk by chunk, each numbered in its chunk as the lowering numbers it
  std::vector<int> chunks;
  for (int chunk = 0; chunk < st.vpp; ++chunk) chunks.push_back(spec::chunk_layers(job, s, chunk));
  int i = 0;  // in the stage
  for (int chunk = 0; chunk < st.vpp; ++chunk)
    for (int in_chunk = 0; in_chunk < chunks[static_cast<std::size_t>(chunk)]; ++in_chunk, ++i) {
      // (the chunk's own layers: a stage's chunks are not consecutive in the model)
      const bool moe = is_moe_layer(m, spec::chunk_first_layer(job, s, chunk) + in_chunk);
      const bool recomputed = spec::recomputes_layer(st, in_chunk);
      auto& kind = kinds[(moe ? 2 : 0) + (recomputed ? 1 : 0)];
      if (!kind) kind = layer_checkpoint(job, m, shape, moe, recomputed);
      const auto& c = *kind;
      if (group == 1) {
        per_layer_sum += c.kept;
        working_set = std::max(working_set, c.rebuilt + c.working);
        continue;
      }
      const bool first = in_chunk % group == 0;
      if (first) group_held = 0;
      per_layer_sum += first ? c.kept : 0.0;
      group_held += first ? c.rebuilt : c.kept + c.rebuilt;
      working_set = std::max(working_set, group_held + c.working);
    }
  SIM_ASSERT(i == layers, "stage {}'s chunks hold {} layers of its {}", s, i, layers);
  const double per_layer = layers > 0 ? per_layer_sum / layers : 0;
  double bytes = per_layer * inflight_layer_microbatches(st.schedule, s, pp, job.micro_batches, chunks);
  // activation offloading (pp = 1, one micro-batch in flight): the offloaded layers' tensors are on
  // the host at the peak, but for the group copied back before its backward
  if (st.offload_layers > 0) bytes -= per_layer * (st.offload_layers - 1);
  if (stage == 0)
    bytes +=
        embedding_activation_bytes(m, shape) * inflight_microbatches(st.schedule, 0, pp, st.vpp, job.micro_batches);
  if (static_cast<int>(stage) != spec::head_stage(job)) return bytes + working_set;
  // The last virtual stage runs a micro-batch's head (the logits, the loss's tensors) and frees it in
  // its backward before that micro-batch's layers build their backward working set, so the two do
  // not add up; GPipe holds every micro-batch's head until the backward begins (the first backward
  // frees its own); DualPipeV and combined 1F1B run one micro-batch's forward, head included,
  // beside another's backward.
  // the multi-token prediction modules' layers run between the head's passes (their tensors held
  // with the head's, their backward working set beside the layers')
  double head = head_activation_bytes(m, shape);
  for (int j = 0; j < m.mtp_layers; ++j) {
    const auto c = layer_checkpoint(job, m, shape, is_moe_layer(m, m.layers + j), spec::recomputes_mtp_layer(job, j));
    head += c.kept;
    working_set = std::max(working_set, c.rebuilt + c.working);
  }
  if (st.schedule == Schedule::GPipe)
    return bytes + head * static_cast<double>(job.micro_batches - 1) + std::max(working_set, head);
  if (st.schedule == Schedule::DualPipeV || st.overlap_moe_comm) return bytes + working_set + head;
  return bytes + std::max(working_set, head);
}

}  // namespace

bool fp8_transposes_kept(const spec::Job& job) {
  return spec::fp8_weight_copies_kept(job) && !job.cluster.device.fp8_gemm_all_layouts &&
         job.strategy.fp8_transpose_cache;
}

bool fp8_transposes_transient(const spec::Job& job) {
  return spec::fp8_weight_copies_kept(job) && !job.cluster.device.fp8_gemm_all_layouts &&
         !job.strategy.fp8_transpose_cache;
}

Bytes transient_fp8_transpose_bytes(const spec::Job& job) {
  if (!fp8_transposes_transient(job)) return Bytes{0};
  const auto& m = job.workload.model;
  const LayerShape shape = gpu_layer_shape(job);
  std::int64_t largest = 0;
  for (const bool moe : {false, true}) {
    if (moe && !m.moe) continue;
    for (const auto& op : layer_ops(m, shape, moe))
      if (const auto* g = std::get_if<Gemm>(&op.shape); g && g->linear)
        largest = std::max(largest, g->k * g->n * g->count);
  }
  return Bytes{largest};
}

Bytes runtime_memory(const spec::Job& job, const spec::MemoryTuning& assumptions, int nccl_channels) {
  // a chip whose DMA engines move collectives (TPU ICI) keeps no per-peer FIFOs of a collective
  // library: the transfers read and write the program's own buffers
  if (!job.cluster.device.collectives_take_cores) return assumptions.runtime_reserved;
  const auto& s = job.strategy;
  constexpr double kNetPeerChannels = 2;  // NCCL_NCHANNELS_PER_NET_PEER's default
  const double channels = std::max(1, nccl_channels);
  double connections = 0;  // in channels' worth of buffers
  const auto ring = [&](std::int64_t ranks) {
    if (ranks > 1) connections += 2 * channels;
  };
  ring(s.tp);
  ring(s.cp);
  const std::int64_t data_parallel = job.dp * s.cp;  // the gradient reduction's group
  const std::int64_t shards = spec::zero_shards(job);
  ring(s.zero > 0 ? shards : data_parallel);
  if (s.zero > 0) ring(data_parallel / shards);  // HSDP's replicas
  ring(s.pp);
  if (s.ep > 1) {
    const std::int64_t node_peers = std::min<std::int64_t>(s.ep, job.cluster.node.devices) - 1;
    connections += static_cast<double>(node_peers) * channels +
                   static_cast<double>(s.ep - 1 - node_peers) * std::min(channels, kNetPeerChannels);
  }
  return assumptions.runtime_reserved +
         Bytes::saturating_from_double(connections * assumptions.nccl_channel_buffers.as_double());
}

Bytes fragmentation_bytes(Bytes transient, const spec::MemoryTuning& assumptions) {
  return Bytes::saturating_from_double(transient.as_double() * assumptions.fragmentation);
}

MemoryEstimate estimate_memory(const spec::Job& job, const spec::MemoryTuning& assumptions, int nccl_channels) {
  const auto& st = job.strategy;
  auto per_param = state_bytes_per_param(job.workload.training.dtype, job.workload.training.optimizer);
  // gradients accumulate in the precision they are reduced in (Megatron's fp32 main_grad buffer;
  // FSDP2 keeps its sharded gradients in the reduce dtype)
  if (st.grad_reduce_dtype) per_param.grads = spec::dtype_bytes(*st.grad_reduce_dtype);
  // Transformer Engine keeps each weight's FP8 copy, and its transpose where FP8 GEMMs take only
  // the TN layout (Hopper) and the transposes are cached, for the whole step
  const bool fp8_weight_cache = spec::fp8_weight_copies_kept(job);
  // FP8 parameters: the weight itself 1 byte, and only its transpose (where cached) beside it
  const bool fp8_params = fp8_weight_cache && st.fp8_param_gather;
  if (fp8_params) per_param.weights = 1;
  const double fp8_copies =
      fp8_weight_cache ? (fp8_params ? 0.0 : 1.0) + (fp8_transposes_kept(job) ? 1.0 : 0.0) : 0.0;
  // otherwise one weight's transpose at a time, during a layer's backward
  const auto transient_transpose = transient_fp8_transpose_bytes(job);
  const std::int64_t dense_shards = spec::zero_shards(job);
  // experts shard over the ranks that hold the same experts
  const std::int64_t expert_shards = std::max<std::int64_t>(1, dense_shards / spec::ep_outer(st));
  const auto params = stage_params(job);
  const auto trainable = trainable_stage_params(job);  // under LoRA the adapters only
  const StateBytesPerParam weights_only{.weights = per_param.weights, .grads = 0, .optimizer = 0};
  const StateBytesPerParam states_only{.weights = 0, .grads = per_param.grads, .optimizer = per_param.optimizer};

  const Bytes runtime = runtime_memory(job, assumptions, nccl_channels);
  MemoryEstimate estimate;
  for (std::size_t stage = 0; stage < params.size(); ++stage) {
    const auto& p = params[stage];
    const auto& t = trainable[stage];
    // every weight is held; gradients and optimizer states only for those that train
    // (under LoRA the adapters' own weights beside the frozen ones)
    const double adapters = job.workload.training.lora ? t.dense : 0.0;
    auto dense = model_state_bytes(p.dense + adapters, st.zero, dense_shards, weights_only);
    auto expert = model_state_bytes(p.expert, st.zero, expert_shards, weights_only);
    const auto dense_states = model_state_bytes(t.dense, st.zero, dense_shards, states_only);
    const auto expert_states = model_state_bytes(t.expert, st.zero, expert_shards, states_only);
    dense.grads = dense_states.grads;
    dense.optimizer = dense_states.optimizer;
    expert.grads = expert_states.grads;
    expert.optimizer = expert_states.optimizer;
    double buffers = 0;  // allocated and freed during the step; the runtime's are added below
    // ZeRO-3 gathers the current and the prefetched layer and holds one layer's full gradient
    // before its reduce-scatter; ZeRO-2 reduces one layer's gradient bucket at a time.
    if (st.zero == 3) {
      buffers += 2 * per_param.weights * p.largest_layer + per_param.grads * t.largest_layer;
      // without resharding after the forward, the stage's gathered parameters are all held at the
      // end of a forward; under a pipeline schedule, for the whole step with unreduced gradients
      if (!spec::reshard_after_forward_of(st))
        buffers += per_param.weights * p.total() + (st.pp > 1 ? per_param.grads * t.total() : 0.0);
    }
    if (st.zero == 2) buffers += per_param.grads * t.largest_layer;
    const double held = fp8_copies * p.total();
    buffers += held + transient_transpose.as_double();
    StageMemory sm{.stage = static_cast<int>(stage),
                   .params = p.total(),
                   .bytes = {.params = Bytes::saturating_from_double(dense.weights + expert.weights),
                             .grads = Bytes::saturating_from_double(dense.grads + expert.grads),
                             .optimizer = Bytes::saturating_from_double(dense.optimizer + expert.optimizer),
                             .activations = Bytes::saturating_from_double(stage_activation_bytes(job, stage)),
                             .buffers = Bytes::saturating_from_double(buffers)},
                   .held_buffers = Bytes::saturating_from_double(held)};
    if (job.strategy.caching_allocator)
      sm.bytes.fragmentation = fragmentation_bytes(sm.bytes.activations + sm.bytes.buffers, assumptions);
    // the closed form puts the last stage's peak at its loss
    if (job.strategy.caching_allocator && static_cast<int>(stage) == spec::head_stage(job))
      sm.bytes.fragmentation = sm.bytes.fragmentation + Bytes::saturating_from_double(loss_cached_bytes(
                                                            job.workload.model, gpu_layer_shape(job)));
    sm.bytes.buffers = sm.bytes.buffers + runtime;
    estimate.stages.push_back(sm);
  }
  for (std::size_t i = 1; i < estimate.stages.size(); ++i)
    if (estimate.stages[i].bytes.total() > estimate.stages[estimate.peak_stage].bytes.total()) estimate.peak_stage = i;
  return estimate;
}

MemoryEstimate apply_remat_to_fit(spec::Job& job, const spec::MemoryTuning& assumptions, int nccl_channels) {
  auto& st = job.strategy;
  st.remat_layers = 0;
  auto estimate = estimate_memory(job, assumptions, nccl_channels);
  // (not beside activation offloading, which Megatron runs without recomputation)
  if (!st.remat_to_fit || st.overlap_moe_comm || st.offload_layers > 0 ||
      estimate.live_peak() <= job.cluster.device.memory)
    return estimate;
  int most = 1;  // layers in the largest model chunk
  for (int stage = 0; stage < st.pp; ++stage)
    for (int chunk = 0; chunk < st.vpp; ++chunk) most = std::max(most, spec::chunk_layers(job, stage, chunk));
  bool all = true;  // full recomputation of every layer already: nothing more to rematerialise
  for (int i = 0; i < most && all; ++i) all = spec::recomputes_layer(st, i);
  if (all) return estimate;
  std::optional<MemoryEstimate> fitted;  // of the fewest that fit so far
  const auto fits = [&](int layers) {
    st.remat_layers = layers;
    auto e = estimate_memory(job, assumptions, nccl_channels);
    if (e.live_peak() > job.cluster.device.memory) return false;
    fitted = std::move(e);
    return true;
  };
  // none fits when even every layer recomputed does not: the compiler cannot fit it either
  if (!fits(most)) {
    st.remat_layers = 0;
    return estimate;
  }
  // the fewest that fit: the live peak falls as more layers keep only their inputs
  int lo = 1, hi = most;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (fits(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  st.remat_layers = lo;  // fitted holds its estimate: the last that fitted was hi, now lo
  return std::move(*fitted);
}

}  // namespace trainsim::model
