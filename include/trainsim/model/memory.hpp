#pragma once
// Memory per GPU: model states (Rajbhandari et al. 2020, "ZeRO"), activations (the saved tensors of
// model/saved_tensors under the job's checkpointing policy) held as the pipeline schedule
// dictates, and buffers. Analytic: the engine's memory
// timeline refines the peak; these closed forms are what its accounting must reproduce.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/tunables.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::model {

// Bytes of model state per parameter (the seed's 16 bytes = 2 + 2 + 12 for mixed-precision Adam).
struct StateBytesPerParam {
  double weights = 0;  // the training copy (bf16/fp16, or fp32)
  double grads = 0;
  double optimizer = 0;  // K of the ZeRO paper: fp32 master weights and moments
  double total() const { return weights + grads + optimizer; }
};
StateBytesPerParam state_bytes_per_param(spec::Dtype dtype, spec::Optimizer optimizer);

struct ModelStateBytes {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
// ZeRO stage 1 shards the optimizer state over `shards` ranks, stage 2 also the gradients, stage 3
// also the weights (ZeRO paper, Figure 1).
ModelStateBytes model_state_bytes(double params, int zero_stage, std::int64_t shards, StateBytesPerParam per_param);

// First stage: the embedding's dropout mask. Last stage: the final-norm and output-layer inputs and
// the cross-entropy's working set at its peak (shape.loss_bytes_per_logit per logit of the rank's
// vocabulary shard: spec::LossImpl). Per micro-batch.
double embedding_activation_bytes(const spec::ModelSpec& model, const LayerShape& shape);
double head_activation_bytes(const spec::ModelSpec& model, const LayerShape& shape);
// What the caching allocator keeps reserved beyond the live tensors on the last stage from the first
// loss's backward on (shape.loss_cached_bytes_per_logit per logit of one micro-batch's shard: the
// block of the freed bf16 logits, reused by the next micro-batch's).
double loss_cached_bytes(const spec::ModelSpec& model, const LayerShape& shape);

// Layer-micro-batches of activations stage `stage` holds at its peak: layers × micro-batches in
// flight (GPipe: all m; 1F1B and ZB-H1: p − stage; interleaved: Megatron's warm-up + 1 chunks).
double inflight_layer_microbatches(spec::Schedule schedule, int stage, int pp, int vpp, std::int64_t micro_batches,
                                   int stage_layers);
// The same with the stage's chunks of their own sizes (a pipeline layout, or a remainder split):
// the interleaved warm-up's forwards summed chunk by chunk in the schedule's order.
double inflight_layer_microbatches(spec::Schedule schedule, int stage, int pp, std::int64_t micro_batches,
                                   const std::vector<int>& chunk_layers);
// Micro-batches in flight on a stage (for the embedding and loss buffers of the outer stages).
double inflight_microbatches(spec::Schedule schedule, int stage, int pp, int vpp, std::int64_t micro_batches);

struct MemoryBreakdown {
  Bytes params;
  Bytes grads;
  Bytes optimizer;
  Bytes activations;
  Bytes buffers;  // communication buffers, gathered ZeRO-3 layers, FP8 weight copies, the runtime's
  Bytes fragmentation;  // reserved by the caching allocator beyond the live tensors
  Bytes total() const { return live() + fragmentation; }
  Bytes live() const { return params + grads + optimizer + activations + buffers; }
};

struct StageMemory {
  int stage = 0;
  double params = 0;  // parameters held before ZeRO sharding
  MemoryBreakdown bytes;
  // of bytes.buffers, what is held all step rather than allocated by the step's tasks (Transformer
  // Engine's FP8 weight copies): the engine's memory pools start with it
  Bytes held_buffers;
};

struct MemoryEstimate {
  std::vector<StageMemory> stages;
  std::size_t peak_stage = 0;
  const StageMemory& peak() const { return stages.at(peak_stage); }
  // The largest stage's live tensors, without the allocator's reserve: what must fit.
  Bytes live_peak() const {
    Bytes out;
    for (const auto& s : stages) out = std::max(out, s.bytes.live());
    return out;
  }
};

// What every GPU holds besides the model, all step (docs/model.md "Memory"): the CUDA context and
// cuBLAS workspaces (memory.runtime_reserved), and NCCL's buffers: per communicator the rank
// belongs to, per connection to a peer (2 for the rings and trees of tp, cp and the data-parallel
// groups, the previous and next stage for pp, every other rank of the expert group for its
// all-to-all), memory.nccl_channel_buffers for each of `nccl_channels` channels; a peer across the
// network gets NCCL_NCHANNELS_PER_NET_PEER (2) channels only.
Bytes runtime_memory(const spec::Job& job, const spec::MemoryTuning& assumptions, int nccl_channels);

// The caching allocator's reserve beyond the live tensors: memory.fragmentation of what the step
// allocates and frees (activations and buffers other than the runtime's).
Bytes fragmentation_bytes(Bytes transient, const spec::MemoryTuning& assumptions);

// Where Transformer Engine keeps the weights' FP8 copies for the step (spec::fp8_weight_copies_kept),
// whether it keeps their transposes with them (FP8 GEMMs that take only the TN layout,
// fp8_transpose_cache on) or builds each before the backward's data-gradient GEMM and frees it
// after (the cache off).
bool fp8_transposes_kept(const spec::Job& job);
bool fp8_transposes_transient(const spec::Job& job);

// The FP8 weight transpose a layer's backward builds just before a data-gradient GEMM and frees
// after it when the transposes are not kept (fp8_transpose_cache=off on a TN-only device): the
// largest linear weight of a layer, 1 byte per element; zero otherwise.
Bytes transient_fp8_transpose_bytes(const spec::Job& job);

// `assumptions` (spec::MemoryTuning) adds the runtime's memory to every stage's buffers and the
// allocator's fragmentation to every stage.
MemoryEstimate estimate_memory(const spec::Job& job, const spec::MemoryTuning& assumptions = {},
                               int nccl_channels = spec::CollectiveTuning{}.channels);

// remat_to_fit: where the estimate's live tensors exceed the device, sets the job's remat_layers to
// the fewest whole layers per model chunk whose recomputation brings them within it; none when even
// every layer recomputed would not fit (the plan does not fit: the compiler cannot fit it either),
// when every layer is recomputed already, or under combined 1F1B, whose passes do not recompute.
// Returns the estimate of the job as it leaves it.
MemoryEstimate apply_remat_to_fit(spec::Job& job, const spec::MemoryTuning& assumptions = {},
                                  int nccl_channels = spec::CollectiveTuning{}.channels);

}  // namespace trainsim::model
