#pragma once
// How long a kernel takes on a device (DESIGN.md "Compute kernels"):
//  - GEMMs: FLOPs / (peak × ceiling × wave-and-tile utilisation × K efficiency), never faster than
//    moving A, B and C through HBM;
//  - attention: flash-attention FLOPs (causal masks halve them) at their own efficiency, or the
//    unfused form (two batched GEMMs and memory-bound softmax/dropout over the a·s² scores);
//  - element-wise kernels: bytes / (HBM bandwidth × efficiency);
//  - a gap per kernel for launch and tail effects.
#include <string>

#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/cluster_spec.hpp"

namespace trainsim::model {

enum class Pass { Forward, BackwardData, BackwardWeight };

struct KernelTuning {
  // Share of peak a large GEMM reaches once tiles fill every SM: 8192³ bf16 on A100 measures
  // 253.7 of 312 TFLOP/s with cuBLASLt (DESIGN.md), which this ceiling reproduces with the
  // tile and K terms below.
  double gemm_ceiling = 0.82;
  // Share of the microbenchmark rate compute-bound kernels sustain inside a training step: clocks
  // drop under sustained power draw (an A100 SXM at 400 W holds about 1.2–1.3 of its 1.41 GHz
  // boost), and overlapped NCCL kernels take SMs. Fitted once across every reference row
  // (README "Calibration"); a calibration file overrides it.
  double sustained_fraction = 0.88;
  // Output tile of one thread block (128×256 is cuBLAS's usual bf16 choice on A100/H100); either
  // orientation may be used, whichever wastes less.
  std::int64_t tile_m = 128;
  std::int64_t tile_n = 256;
  // Pipeline prologue and epilogue of the K loop, in K elements: efficiency k / (k + k0).
  double k_overhead = 64;
  // Flash-attention share of peak, forward and backward (FlashAttention-2, Dao 2023: 50–73% of
  // A100 peak forward at head dim 128, backward about two thirds of the forward's rate).
  double flash_fwd_efficiency = 0.55;
  double flash_bwd_efficiency = 0.40;
  // Achievable share of the HBM datasheet bandwidth (A100 STREAM triad: 1.70 of 2.04 TB/s).
  double hbm_efficiency = 0.83;
  // Gap between consecutive kernels on a stream (launch latency, tail of the previous kernel).
  Duration kernel_gap = nanoseconds(3000);
  // The devices whose measured step times the defaults above were fitted to (a device name
  // containing this); elsewhere reports warn until a calibration file sets the efficiencies.
  std::string fitted_on = "A100";
};

enum class AttentionKind { Flash, Unfused };

struct KernelContext {
  const spec::DeviceSpec* device = nullptr;
  spec::Dtype dtype = spec::Dtype::Bf16;
  AttentionKind attention = AttentionKind::Flash;
  KernelTuning tuning;
};

// FLOPs per second a GEMM of this shape reaches (for tests and reports).
double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, int sms,
                       const KernelTuning& tuning);

// One pass of one kernel. Backward passes of GEMMs are the dX = dY·Wᵀ and dW = Xᵀ·dY GEMMs with
// their own shapes; the attention backward (no weights) is all BackwardData.
Duration kernel_time(const Op& op, Pass pass, const KernelContext& ctx);
// Forward, backward (both passes) of a list of kernels.
Duration forward_time(const std::vector<Op>& ops, const KernelContext& ctx);
Duration backward_time(const std::vector<Op>& ops, const KernelContext& ctx);

// The fused optimizer step over `params` parameters held by this GPU: memory-bound, ~28 bytes
// read and written per parameter with mixed-precision Adam (gradient, master weight, m, v, new
// weight); plus the gradient-norm pass over the gradients.
Duration optimizer_time(double params, spec::Optimizer optimizer, const KernelContext& ctx);

}  // namespace trainsim::model
