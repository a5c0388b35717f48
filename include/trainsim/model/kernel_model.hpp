#pragma once
// How long a kernel takes on a device (docs/model.md "Kernels"):
//  - GEMMs: FLOPs / (peak × ceiling × wave-and-tile utilisation × K efficiency), never faster than
//    moving A, B and C through HBM;
//  - attention: flash-attention FLOPs (causal masks halve them) at their own efficiency, or the
//    unfused form (two batched GEMMs and memory-bound softmax/dropout over the a·s² scores);
//  - element-wise kernels: bytes / (HBM bandwidth × efficiency);
//  - a gap per kernel for launch and tail effects.
#include <string>

#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/spec/tunables.hpp"

namespace trainsim::model {

enum class Pass { Forward, BackwardData, BackwardWeight };

// The tunables (spec::KernelTuning) carry the efficiencies; docs/model.md "Kernels" their sources.
// How FP8 linear layers run (Transformer Engine or torchao): their inputs, weights and output
// gradients are cast to FP8 by memory-bound kernels around each GEMM.
struct Fp8Casts {
  spec::Fp8Recipe recipe = spec::Fp8Recipe::Off;
  spec::Fp8Scaling scaling = spec::Fp8Scaling::Delayed;
  // Share of the micro-batches that cast the weights: 1/micro-batches where the FP8 weights are
  // cast once per step and kept (Transformer Engine), 1 where every micro-batch casts them.
  double weight_cast_share = 1.0;
  // A tensorwise cast writes the FP8 copy's transpose too (for the backward's GEMMs): always under
  // torchao, under Transformer Engine only where the device's FP8 GEMMs take just the TN layout.
  bool writes_transpose = true;
  // The weights' transposes are not kept with their FP8 copies (fp8_transpose_cache=off): each
  // backward data-gradient GEMM first transposes its FP8 weight (read 1 byte, write 1 per element,
  // one kernel), and the weight's cast writes no transpose.
  bool transposes_weight_per_backward = false;
};

struct KernelContext {
  const spec::DeviceSpec* device = nullptr;
  spec::Dtype dtype = spec::Dtype::Bf16;       // activations, attention, element-wise kernels
  spec::Dtype gemm_dtype = spec::Dtype::Bf16;  // the linear layers' GEMMs (fp8 under an FP8 recipe)
  spec::AttentionImpl attention = spec::AttentionImpl::Flash;
  spec::KernelTuning tuning;
  Fp8Casts fp8;
  // Element-wise ops run op by op in eager PyTorch (no torch.compile): more kernels and HBM passes.
  bool eager = false;
  // The linear layers' weights do not train (LoRA): no weight-gradient GEMMs.
  bool frozen_weights = false;
  // The bias and norm weight gradients as kernels of their own (strategy keys bias_grad and
  // norm_grad `separate`) rather than inside the GEMM's epilogue or the norm's data-gradient kernel.
  bool separate_bias_grad = false;
  bool separate_norm_grad = false;
};

// Bytes one FP8 linear layer's casts move in a pass, per element of the operands involved, and
// how many cast kernels that takes (docs/model.md "FP8").
struct CastTraffic {
  double bytes = 0;
  int kernels = 0;
};
CastTraffic fp8_cast_traffic(const Gemm& g, Pass pass, const KernelContext& ctx);

// The kernels of a job: its device, its training dtype, its FP8 recipe (FP8 runs the linear
// layers' GEMMs in fp8 and the rest in bf16), its attention implementation.
KernelContext kernel_context(const spec::Job& job, const spec::KernelTuning& tuning);

// The share of the specified peaks a power-capped device keeps: clocks fall as the cube root of
// the power the clocked logic may draw (dynamic power ∝ f·V² with V ∝ f), which is the limit less
// the share of the TDP that does not scale with the clock (HBM, I/O, leakage:
// kernels.static_power_share); 1 without a limit below its TDP.
double clock_factor(const spec::DeviceSpec& device, double static_power_share);

// The rate compute-bound kernels of `dtype` are measured against: the peak, clocked and sustained.
double sustained_peak(const KernelContext& ctx, spec::Dtype dtype);

// The share of the (sustained) peak a GEMM of this shape reaches; `ceiling` is the dtype's.
double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, int sms,
                       const spec::KernelTuning& tuning, double ceiling);
// The share of the bf16 (sustained) peak an attention kernel reaches.
double attention_efficiency(const AttentionCore& core, Pass pass, spec::AttentionImpl impl,
                            const spec::KernelTuning& tuning);

// One pass of one kernel. Backward passes of GEMMs are the dX = dY·Wᵀ and dW = Xᵀ·dY GEMMs with
// their own shapes; the attention backward (no weights) is all BackwardData.
Duration kernel_time(const Op& op, Pass pass, const KernelContext& ctx);
// How many kernels the host launches for an op's pass: one per GEMM or fused pass, FlashAttention's
// three backward kernels, an FP8 recipe's casts, and an eager element-wise op's separate kernels.
int kernel_launches(const Op& op, Pass pass, const KernelContext& ctx);
// The HBM bytes of an op's weight-gradient pass that run as memory-bound kernels of their own: a
// linear layer's bias gradient (the output gradient summed over its rows) and a norm's weight
// gradient (its input and output gradient read again), where the context runs them separately.
double weight_grad_bytes(const Op& op, const KernelContext& ctx);
// Forward, backward (both passes) of a list of kernels.
Duration forward_time(const std::vector<Op>& ops, const KernelContext& ctx);
Duration backward_time(const std::vector<Op>& ops, const KernelContext& ctx);

// The fused optimizer step over `params` parameters held by this GPU: memory-bound, ~28 bytes
// read and written per parameter with mixed-precision Adam (gradient, master weight, m, v, new
// weight); plus the gradient-norm pass over the gradients.
Duration optimizer_time(double params, spec::Optimizer optimizer, const KernelContext& ctx);

}  // namespace trainsim::model
