#pragma once
// What a training framework does beyond the parallel layout (docs/model.md "Frameworks"): which
// attention kernel it runs, in which precision it reduces gradients, what it overlaps, how it
// shards, how it runs FP8. Each behaviour is a strategy key; a framework preset sets the keys the
// user left out, with each default taken from that framework's own source or docs.
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "trainsim/spec/device_spec.hpp"

namespace trainsim::spec {

enum class Framework { MegatronCore, Megatron2021, Nemo, TorchTitan, DeepSpeed, DeepSpeed2021, Composer, MaxText };
// FP8 GEMMs and their scaling granularity: one scale per tensor (Transformer Engine's delayed
// scaling, torchao's tensorwise), per row (torchao rowwise), per 128-element block (DeepSeek-V3,
// MXFP8 on Blackwell).
enum class Fp8Recipe { Off, Tensorwise, Rowwise, Blockwise };
// How FP8 scales are found: from the amax history of earlier steps (Transformer Engine's
// DelayedScaling, the cast kernel records the amax) or from the tensor itself just before the cast
// (current scaling: an extra read of the tensor for its amax).
enum class Fp8Scaling { Delayed, Current };
// How the cross-entropy loss over the vocabulary runs, which sets the head's memory at its peak:
// Megatron's vocab-parallel loss turns an fp32 copy of the logits into the softmax in place and
// reuses it as the gradient (6 bytes per logit with the bf16 logits); PyTorch's
// F.cross_entropy on `logits.float()` (TorchTitan, Hugging Face) keeps the log-softmax output and
// builds two fp32 gradients beside it in the backward (12 bytes per logit).
// Fused cross-entropy kernels keep the bf16 logits and a per-row log-sum-exp: flash-attn's
// xentropy (llm-foundry's fused_crossentropy) writes a bf16 gradient beside them in the backward
// (4 bytes per logit, `fused`); Transformer Engine's parallel_cross_entropy (Megatron's
// --cross-entropy-fusion-impl te) and Liger write the gradient into the logits' own buffer during
// the forward (2 bytes, `fused_inplace`).
// The same F.cross_entropy on vocabulary-sharded logits under DTensor's loss_parallel (TorchTitan
// with TP) runs DTensor's own log-softmax and NLL ops, which hold more fp32 temporaries at once
// (16 bytes per logit in the backward, `loss_parallel`).
enum class LossImpl { VocabParallel, Upcast, Fused, FusedInplace, LossParallel, FusedLinear };
// How the host hands kernels to the GPU (docs/model.md "Host overhead"): one by one from Python
// through PyTorch's dispatcher (eager PyTorch, and the fused modules of Megatron-LM, Transformer
// Engine and Composer, which are Python calls too), from the code torch.compile generated, or as
// replays of captured CUDA graphs (Megatron-Core's --enable-cuda-graph: one launch per layer pass).
enum class LaunchMode { Eager, Compiled, CudaGraphs };
// How the optimizer step is launched (torch.optim's implementations): one multi-tensor kernel per
// chunk of tensors (fused: Apex/Transformer Engine FusedAdam, torch.optim's fused=True), a few
// multi-tensor kernels per elementary op (foreach), or a Python loop over the parameters launching
// each op per tensor and reading the step count back to the host (for_loop: torch.optim's
// single-tensor path, Composer's DecoupledAdamW), which waits for the device once per tensor.
enum class OptimizerImpl { Fused, Foreach, ForLoop };
// When ZeRO-3 (FSDP) issues the next unit's all-gather in the backward (FSDP1's backward_prefetch):
// `pre` at the current unit's pre-backward hook (PyTorch's BACKWARD_PRE, FSDP2's implicit prefetch),
// `post` after its gradients are computed (BACKWARD_POST: Composer's default), `none` at the next
// unit's own pre-backward hook, queued behind the current unit's reduce-scatter on the same
// communicator. pre and post issue the gather before the reduce-scatter; they differ only when the
// host falls behind the device, and are priced alike.
enum class BackwardPrefetch { Pre, Post, None };
// How ZeRO-3 gathers a unit's parameters and reduces its gradients (StrategySpec::zero3_gather).
enum class Zero3Gather { Unit, Module, Parameter };
// Bytes per logit element (per rank's vocabulary shard) at the loss's peak.
double loss_bytes_per_logit(LossImpl loss);
// Bytes per logit element the caching allocator keeps reserved, not live, from the loss's backward
// on: a freed block too small for the fp32 tensors the backward allocates (docs/model.md "What a GPU
// holds beyond the model").
double loss_cached_bytes_per_logit(LossImpl loss);
// The tokens whose logits the loss holds at once: a micro-batch's, or a chunk of them (Liger's fused
// linear cross entropy: next_power_of_2(cdiv(tokens, cdiv(vocab, hidden))), at most all).
std::int64_t loss_chunk_tokens(LossImpl loss, std::int64_t tokens, std::int64_t vocab_shard, std::int64_t hidden);
// HBM bytes per logit element the loss's kernels move in the forward and in the backward (the
// logits bf16), as each implementation's kernels run; `compiled`: F.cross_entropy under
// torch.compile (TorchTitan's compile of the loss), one reduction and one element-wise kernel.
struct LossTraffic {
  double fwd = 0;
  double bwd = 0;
};
LossTraffic loss_traffic_per_logit(LossImpl loss, bool compiled);

struct FrameworkPreset {
  Framework framework;
  int zero;
  bool tp_overlap;  // applied where sp is on (Megatron-Core requires sequence parallelism for it)
  std::optional<Dtype> grad_reduce_dtype;  // absent: the training dtype's gradients
  bool overlap_grad_reduce;
  bool overlap_param_gather;
  bool compile;  // element-wise kernels fused (see StrategySpec::compile)
  // `compile` is a compiler's (torch.compile in TorchTitan, XLA in MaxText): compiled kernels are
  // launched from generated code rather than op by op through the dispatcher.
  bool compile_is_torch_compile;
  bool limit_all_gathers;  // see StrategySpec::limit_all_gathers
  BackwardPrefetch backward_prefetch;  // see StrategySpec::backward_prefetch
  bool caching_allocator;  // see StrategySpec::caching_allocator
  bool remat_to_fit;       // see StrategySpec::remat_to_fit
  int fsdp_version;        // see StrategySpec::fsdp_version
  OptimizerImpl optimizer_impl;
  bool bias_grad_fused;  // see StrategySpec::bias_grad_fused
  bool norm_grad_fused;  // see StrategySpec::norm_grad_fused
  Fp8Scaling fp8_scaling;
  // FP8 weight copies cast once per step and kept (Transformer Engine) or cast per micro-batch.
  bool fp8_weight_cache;
  LossImpl loss;
  // The loss when tp > 1 shards the logits over the vocabulary (TorchTitan enables DTensor's
  // loss parallelism whenever tensor parallelism is on).
  LossImpl loss_under_tp;
  LossImpl loss_at(int tp) const { return tp > 1 ? loss_under_tp : loss; }
  bool repeat_kv;  // see StrategySpec::repeat_kv
  // The linear layers keep their inputs' FP8 casts for the backward (Transformer Engine) rather
  // than the bf16 inputs (torchao's Float8Linear re-casts them in the backward).
  bool fp8_saves_casts;
  bool fp8_param_gather;   // see StrategySpec::fp8_param_gather
  bool sp_saves_gathered;  // see StrategySpec::sp_saves_gathered
  // The pipeline schedules beyond 1F1B, ZB-H1 and interleaving it offers (what a sweep tries):
  // DualPipeV (torch.distributed.pipelining's ScheduleDualPipeV, TorchTitan's "DualPipeV"); Megatron-
  // Core, NeMo, DeepSpeed and Composer have no DualPipe schedule.
  bool offers_dualpipev;
  // DeepEP-style dispatch (`dispatcher=deepep`, what a sweep tries where an expert-parallel group
  // spans scale-up domains): Megatron-Core's flex token dispatcher with its DeepEP or HybridEP
  // backend (--moe-token-dispatcher-type flex), so Megatron-Core and NeMo; not the others' presets.
  bool offers_deepep;
  // The ZeRO stages the framework offers (what a sweep tries).
  std::span<const int> zero_stages;
  std::string_view source;  // where the defaults come from
  // ZeRO-3's collectives as DeepSpeed's stage 3 issues them (see StrategySpec::zero3_gather and the
  // keys after it); PyTorch's FSDP gathers a unit at once, asynchronously, through flat buffers.
  Zero3Gather zero3_gather = Zero3Gather::Unit;
  bool zero3_sync = false;
  bool zero3_list_io = false;
  std::int64_t zero3_persistence_threshold = 0;
  std::int64_t zero3_max_reuse_distance = 1'000'000'000;
  // overlap_grad_reduce applies under ZeRO-3 only (DeepSpeed's overlap_comm defaults to true for
  // stage 3, false below: zero/config.py overlap_comm_valid).
  bool overlap_grad_reduce_zero3_only = false;
  // The highest ZeRO stage the framework runs beside pipeline parallelism (DeepSpeed's
  // PipelineEngine: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism").
  int max_zero_with_pp = 3;
  bool overlap_grad_reduce_at(int zero_stage) const {
    return overlap_grad_reduce && (!overlap_grad_reduce_zero3_only || zero_stage == 3);
  }
};

const FrameworkPreset& framework_preset(Framework framework);

}  // namespace trainsim::spec
