#include "trainsim/spec/framework.hpp"

#include <array>

#include "trainsim/util/error.hpp"

namespace trainsim::spec {
namespace {

// the distributed optimizer is ZeRO-1; --use-torch-fsdp2 shards everything (ZeRO-3)
constexpr std::array<int, 3> kMegatronZero{0, 1, 3};
constexpr std::array<int, 2> kFsdpZero{0, 3};  // DDP (replicate) or FSDP
constexpr std::array<int, 4> kDeepSpeedZero{0, 1, 2, 3};
constexpr std::array<int, 3> kFsdp1Zero{0, 2, 3};  // NO_SHARD, SHARD_GRAD_OP, FULL_SHARD

// One row per framework; docs/model.md "Frameworks" gives the same table with its sources.
constexpr std::array<FrameworkPreset, 8> kPresets{{
    {.framework = Framework::MegatronCore,
     .zero = 0,
     .tp_overlap = false,
     .grad_reduce_dtype = Dtype::Fp32,
     .overlap_grad_reduce = false,
     .overlap_param_gather = false,
     .compile = true,
     .compile_is_torch_compile = false,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 2,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = true,
     .norm_grad_fused = true,
     .fp8_scaling = Fp8Scaling::Delayed,
     .fp8_weight_cache = true,
     .loss = LossImpl::VocabParallel,
     .loss_under_tp = LossImpl::VocabParallel,
     .repeat_kv = false,
     .fp8_saves_casts = true,
     .fp8_param_gather = false,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = true,
     .zero_stages = kMegatronZero,
     .source = "Megatron-LM megatron/training/arguments.py: --use-distributed-optimizer, --overlap-grad-reduce, "
               "--overlap-param-gather and --tp-comm-overlap default off; with --bf16 gradients accumulate and "
               "reduce in fp32 unless --grad-reduce-in-bf16; --fp8-recipe defaults to delayed (Transformer "
               "Engine DelayedScaling); Transformer Engine picks cuDNN fused attention on Hopper and later, "
               "FlashAttention-2 on Ampere (dot_product_attention/utils.py get_attention_backend)"},
    {.framework = Framework::Megatron2021,
     .zero = 0,
     .tp_overlap = false,
     .grad_reduce_dtype = std::nullopt,
     .overlap_grad_reduce = false,
     .overlap_param_gather = false,
     .compile = true,
     .compile_is_torch_compile = false,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 2,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = false,
     .norm_grad_fused = false,
     .fp8_scaling = Fp8Scaling::Delayed,
     .fp8_weight_cache = true,
     .loss = LossImpl::VocabParallel,
     .loss_under_tp = LossImpl::VocabParallel,
     .repeat_kv = false,
     .fp8_saves_casts = true,
     .fp8_param_gather = false,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = false,
     .zero_stages = kMegatronZero,
     .source = "Megatron-LM as Narayanan et al. (2021) and Korthikanti et al. (2022) ran it: local DDP all-reducing "
               "the gradients in the training precision after the backward pass, fused scale-mask-softmax "
               "(no flash attention), no communication overlap"},
    {.framework = Framework::Nemo,
     .zero = 1,
     .tp_overlap = true,
     .grad_reduce_dtype = Dtype::Fp32,
     .overlap_grad_reduce = true,
     .overlap_param_gather = true,
     .compile = true,
     .compile_is_torch_compile = false,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 2,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = true,
     .norm_grad_fused = true,
     .fp8_scaling = Fp8Scaling::Delayed,
     .fp8_weight_cache = true,
     .loss = LossImpl::VocabParallel,
     .loss_under_tp = LossImpl::VocabParallel,
     .repeat_kv = false,
     .fp8_saves_casts = true,
     .fp8_param_gather = true,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = true,
     .zero_stages = kMegatronZero,
     .source = "NeMo 2 / Megatron-Bridge pre-training recipes on Megatron-Core: distributed optimizer with "
               "overlap_grad_reduce and overlap_param_gather, tp_comm_overlap with sequence parallelism, "
               "grad_reduce_in_fp32, Transformer Engine DelayedScaling for FP8; fp8_param_gather on in the FP8 "
               "pre-training recipes (Megatron-Bridge scripts/performance, Llama 3 70B and 405B)"},
    {.framework = Framework::TorchTitan,
     .zero = 3,
     .tp_overlap = false,
     .grad_reduce_dtype = Dtype::Fp32,
     .overlap_grad_reduce = true,
     .overlap_param_gather = true,
     .compile = false,
     .compile_is_torch_compile = true,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 2,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = false,
     .norm_grad_fused = false,
     .fp8_scaling = Fp8Scaling::Current,
     .fp8_weight_cache = false,
     .loss = LossImpl::Upcast,
     .loss_under_tp = LossImpl::LossParallel,
     .repeat_kv = true,
     .fp8_saves_casts = false,
     .fp8_param_gather = false,
     .sp_saves_gathered = true,
     .offers_dualpipev = true,
     .offers_deepep = false,
     .zero_stages = kFsdpZero,
     .source = "TorchTitan config_manager.py: FSDP2 (fully_shard) with mixed_precision_param bfloat16 and "
               "mixed_precision_reduce float32, prefetching the next block's all-gather and reducing each block "
               "as its backward ends; AsyncTP (enable_async_tensor_parallel) and torch.compile off by default "
               "(eager element-wise kernels); the loss is F.cross_entropy on pred.float() (train.py loss_fn, "
               "DTensor's loss parallelism under TP unless disable_loss_parallel); Float8 via torchao "
               "with dynamic (current) tensorwise scaling; attention through PyTorch SDPA (FlashAttention-2)"},
    {.framework = Framework::DeepSpeed,
     .zero = 3,
     .tp_overlap = false,
     .grad_reduce_dtype = std::nullopt,
     .overlap_grad_reduce = true,
     .overlap_param_gather = false,
     .compile = false,
     .compile_is_torch_compile = true,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 1,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = false,
     .norm_grad_fused = false,
     .fp8_scaling = Fp8Scaling::Delayed,
     .fp8_weight_cache = true,
     .loss = LossImpl::Upcast,
     .loss_under_tp = LossImpl::Upcast,
     .repeat_kv = false,
     .fp8_saves_casts = true,
     .fp8_param_gather = false,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = false,
     .zero_stages = kDeepSpeedZero,
     .source = "DeepSpeed 0.16 (deepspeed/runtime/zero/config.py, partitioned_param_coordinator.py, engine.py) "
               "on a Hugging Face model: stage 3 fetching each module's parameters in one coalesced all-gather "
               "and prefetching the next, tensors under stage3_param_persistence_threshold (1e5) kept whole, "
               "overlap_comm on under stage 3, gradients reduced in the training dtype "
               "(communication_data_type), FusedAdam; the model's eager PyTorch ops, FlashAttention-2 and "
               "the fp32 cross entropy of transformers' causal LM heads",
     .zero3_gather = Zero3Gather::Module,
     .zero3_sync = false,
     .zero3_list_io = false,
     .zero3_persistence_threshold = 100'000,
     .overlap_grad_reduce_zero3_only = true,
     .max_zero_with_pp = 1},
    {.framework = Framework::DeepSpeed2021,
     .zero = 3,
     .tp_overlap = false,
     .grad_reduce_dtype = std::nullopt,
     .overlap_grad_reduce = true,
     .overlap_param_gather = false,
     .compile = true,
     .compile_is_torch_compile = false,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 1,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = false,
     .norm_grad_fused = false,
     .fp8_scaling = Fp8Scaling::Delayed,
     .fp8_weight_cache = true,
     .loss = LossImpl::VocabParallel,
     .loss_under_tp = LossImpl::VocabParallel,
     .repeat_kv = false,
     .fp8_saves_casts = true,
     .fp8_param_gather = false,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = false,
     .zero_stages = kDeepSpeedZero,
     .source = "DeepSpeed ZeRO-3 as Narayanan et al. (2021) Table 2 compared it, DeepSpeed 0.3.13-0.3.16 "
               "(deepspeed/runtime/zero/partition_parameters.py, stage3.py): fp16 gradients reduce-scattered "
               "tensor by tensor with overlap_comm; each parameter tensor of at least "
               "stage3_param_persistence_threshold (1e5) elements all-gathered alone after a "
               "torch.cuda.synchronize(), through torch.distributed's tensor lists, before its module runs; "
               "Megatron-DeepSpeed's fused softmax attention",
     .zero3_gather = Zero3Gather::Parameter,
     .zero3_sync = true,
     .zero3_list_io = true,
     .zero3_persistence_threshold = 100'000,
     .overlap_grad_reduce_zero3_only = true},
    {.framework = Framework::Composer,
     .zero = 3,
     .tp_overlap = false,
     .grad_reduce_dtype = Dtype::Fp32,
     .overlap_grad_reduce = true,
     .overlap_param_gather = true,
     .compile = true,
     .compile_is_torch_compile = false,
     .limit_all_gathers = true,
     .backward_prefetch = BackwardPrefetch::Post,
     .caching_allocator = true,
     .remat_to_fit = false,
     .fsdp_version = 1,
     .optimizer_impl = OptimizerImpl::ForLoop,
     .bias_grad_fused = false,
     .norm_grad_fused = false,
     .fp8_scaling = Fp8Scaling::Delayed,
     .fp8_weight_cache = true,
     .loss = LossImpl::Fused,
     .loss_under_tp = LossImpl::Fused,
     .repeat_kv = false,
     .fp8_saves_casts = true,
     .fp8_param_gather = false,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = false,
     .zero_stages = kFsdp1Zero,
     .source = "MosaicML Composer with PyTorch FSDP1 as llm-foundry runs it (scripts/train/benchmarking, "
               "mosaicml/llm-foundry @ 5e85bd62): FULL_SHARD per transformer block, mixed precision DEFAULT "
               "(bf16 parameters, fp32 gradient reduction), limit_all_gathers and BACKWARD_POST prefetch "
               "(composer/trainer/dist_strategy.py, v0.16.4); MPT's fused kernels (low-precision LayerNorm, "
               "GeLU) without torch.compile; flash-attn's fused cross entropy on bf16 logits (loss_fn "
               "fused_crossentropy); Triton or FlashAttention-2 attention; Transformer Engine layers for FP8"},
    {.framework = Framework::MaxText,
     .zero = 3,
     .tp_overlap = true,
     .grad_reduce_dtype = Dtype::Fp32,
     .overlap_grad_reduce = true,
     .overlap_param_gather = true,
     .compile = true,
     .compile_is_torch_compile = true,
     .limit_all_gathers = false,
     .backward_prefetch = BackwardPrefetch::Pre,
     .caching_allocator = false,
     .remat_to_fit = true,
     .fsdp_version = 2,
     .optimizer_impl = OptimizerImpl::Fused,
     .bias_grad_fused = false,
     .norm_grad_fused = false,
     .fp8_scaling = Fp8Scaling::Current,
     .fp8_weight_cache = false,
     .loss = LossImpl::Fused,
     .loss_under_tp = LossImpl::Fused,
     .repeat_kv = false,
     .fp8_saves_casts = false,
     .fp8_param_gather = false,
     .sp_saves_gathered = false,
     .offers_dualpipev = false,
     .offers_deepep = false,
     .zero_stages = kFsdpZero,
     .source = "MaxText (AI-Hypercomputer/maxtext) on JAX and XLA: the mesh's fsdp axis shards every weight "
               "array (ici_fsdp_parallelism -1: ZeRO-3, per parameter), fp32 weights and gradients "
               "(base.yml weight_dtype float32) with bf16 compute; the whole step one XLA program, element-"
               "wise ops fused into their producers and the optimizer update fused; collectives asynchronous "
               "and overlapped with compute, tensor-parallel ones beside the matrix products they feed "
               "(configs/v5p/*.sh LIBTPU_INIT_ARGS: xla_tpu_enable_async_collective_fusion, "
               "xla_tpu_enable_async_collective_fusion_fuse_all_gather, xla_tpu_overlap_compute_collective_tc, "
               "xla_enable_async_collective_permute); the cross entropy fused into its reductions over the "
               "logits; attention='flash' (Pallas splash attention on TPU); XLA assigns every buffer of the "
               "program when it compiles it (no caching allocator) and, where they would not fit, rematerialises "
               "more of the forward in the backward until they do (its HloRematerialization pass, which the TPU "
               "compiler runs with the device's memory as the limit)"},
}};

}  // namespace

LossTraffic loss_traffic_per_logit(LossImpl loss, bool compiled) {
  const bool torch_loss = loss == LossImpl::Upcast || loss == LossImpl::LossParallel;
  // Inductor's cross entropy: amax and sum of exponentials in one reduction over the bf16 logits
  // (read twice), the gradient in one pass (read the logits, write the bf16 gradient)
  if (compiled && torch_loss) return {4, 4};
  switch (loss) {
    case LossImpl::VocabParallel:
      // megatron/core/tensor_parallel/cross_entropy.py: .float() (2 + 4), max (4), subtract, exp and
      // divide in place (8 each), sum (4); backward: the in-place multiply (8) and the cast of the
      // gradient back to bf16 (4 + 2)
      return {38, 14};
    case LossImpl::Upcast:
      // .float() (6); log_softmax (cunn_SoftMaxForward: max, sum and the write pass read the fp32
      // row 3 times, a row of a large vocabulary does not fit in shared memory: 16); backward:
      // nll_loss_backward's zeros (4), log_softmax_backward (a sum, then read gradient and output,
      // write: 16), the cast to bf16 (6)
      return {22, 26};
    case LossImpl::LossParallel:
      // DTensor's ops (torch/distributed/tensor/parallel/loss.py) one aten kernel each: .float()
      // (6), amax (4), subtract (8), exp (8), sum (4), subtract (8); backward: zeros (4), exp (8),
      // add (12), multiply (8), the cast to bf16 (6)
      return {38, 38};
    case LossImpl::Fused:
      // flash-attn's cross_entropy_fwd_kernel reads the bf16 logits once; the backward reads them
      // and writes the bf16 gradient
      return {2, 4};
    case LossImpl::FusedInplace:
      // Transformer Engine's online softmax pass (2), then the gradient written over the logits
      // (2 + 2); backward: the gradient scaled in place (2 + 2)
      return {6, 4};
    case LossImpl::FusedLinear:
      // Liger's cross-entropy kernel on each chunk of logits (liger_kernel/ops/cross_entropy.py):
      // an online-softmax pass (2), then the gradient written over the chunk (2 + 2); the backward
      // only scales the saved gradients, and not at all when the loss is the output (1.0)
      return {6, 0};
  }
  SIM_ASSERT(false, "unhandled loss implementation");
  return {};
}

double loss_bytes_per_logit(LossImpl loss) {
  switch (loss) {
    case LossImpl::VocabParallel:
      // the bf16 logits (2) and their fp32 copy, exponentiated in place and kept as the softmax (4);
      // the backward turns the softmax into the gradient in place (megatron/core/tensor_parallel/
      // cross_entropy.py)
      return 6;
    case LossImpl::Upcast:
      // the backward of F.cross_entropy(logits.float()): the saved fp32 log-softmax (4), the
      // gradient of the NLL loss (4) and the log-softmax's input gradient (4)
      return 12;
    case LossImpl::Fused:
      // the saved bf16 logits and the bf16 gradient the backward writes (flash-attn
      // flash_attn/losses/cross_entropy.py without inplace_backward; fp32 scalars per row aside)
      return 4;
    case LossImpl::FusedInplace:
      // the bf16 logits, overwritten by their gradient in the forward (Transformer Engine
      // pytorch/triton/cross_entropy.py)
      return 2;
    case LossImpl::FusedLinear:
      // a chunk's bf16 logits, overwritten by their gradient (liger_kernel/ops/
      // fused_linear_cross_entropy.py); per logit of a chunk, not of the micro-batch
      // (spec::loss_chunk_tokens), beside the saved input and weight gradients (model::memory)
      return 2;
    case LossImpl::LossParallel:
      // DTensor's loss-parallel backward (torch/distributed/tensor/parallel/loss.py,
      // _nll_loss_and_log_softmax_backward): beside the saved fp32 log-softmax (4) it builds
      // zeros_like(x) (4), exp(x) (4) and their sum (4) at once, then the product with the
      // incoming gradient; the forward's peak is 14 (the bf16 logits, their fp32 copy, the shifted
      // logits and their exponentials)
      return 16;
  }
  SIM_ASSERT(false, "unhandled loss implementation");
  return 0;
}

std::int64_t loss_chunk_tokens(LossImpl loss, std::int64_t tokens, std::int64_t vocab_shard, std::int64_t hidden) {
  if (loss != LossImpl::FusedLinear) return tokens;
  // liger_kernel/ops/fused_linear_cross_entropy.py: inc_factor = cdiv(V, H), chunk_size =
  // next_power_of_2(cdiv(BT, inc_factor)): a chunk's logits about the size of the hidden states
  const std::int64_t factor = (vocab_shard + hidden - 1) / hidden;
  const std::int64_t rows = (tokens + factor - 1) / factor;
  std::int64_t chunk = 1;
  while (chunk < rows) chunk *= 2;
  return std::min(chunk, tokens);
}

double loss_cached_bytes_per_logit(LossImpl loss) {
  switch (loss) {
    case LossImpl::Upcast:
    case LossImpl::LossParallel:
      // the bf16 logits (2) are freed after the forward (TorchTitan's train step: `del pred`) and
      // their block stays cached: PyTorch's allocator serves a request from a free block at least
      // as large (c10/cuda/CUDACachingAllocator.cpp, get_free_block), and every tensor the
      // backward allocates at that size is an fp32 one of twice its size, so one more block is
      // reserved from the device beside it
      return 2;
    case LossImpl::VocabParallel:
      // the backward writes the gradient over the saved softmax; its bf16 cast reuses the logits'
      // block
    case LossImpl::Fused:
    case LossImpl::FusedInplace:
    case LossImpl::FusedLinear:
      // bf16 throughout: the gradient's block is the logits' size
      return 0;
  }
  SIM_ASSERT(false, "unhandled loss implementation");
  return 0;
}

const FrameworkPreset& framework_preset(Framework framework) {
  for (const auto& p : kPresets)
    if (p.framework == framework) return p;
  SIM_ASSERT(false, "framework {} has no preset", static_cast<int>(framework));
  return kPresets.front();
}

}  // namespace trainsim::spec
