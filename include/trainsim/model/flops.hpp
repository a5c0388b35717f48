#pragma once
// FLOPs per step: what the model needs (model FLOPs, the basis of MFU), what the hardware executes
// (plus recomputation), and the Megatron-LM paper's closed form as a cross-check.
#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::model {

struct StepFlops {
  double model = 0;      // forward + backward of every GEMM and attention product, all GPUs, one step
  double hardware = 0;   // model + the forward work recomputation repeats
  double per_token = 0;  // model / tokens per step
};

// LayerShape of one micro-batch on one GPU of the job.
LayerShape gpu_layer_shape(const spec::Job& job);

struct LayerCheckpoint;
// Forward FLOPs (GEMMs and attention) of the kernels a checkpointing policy replays.
double replayed_fwd_flops(const std::vector<Op>& ops, const LayerCheckpoint& checkpoint);
StepFlops step_flops(const spec::Job& job);

// Narayanan et al. 2021 eq. (3): F = 72·B·s·l·h²·(1 + s/6h + V/12lh) without recomputation and
// 96·B·s·l·h²·(1 + s/6h + V/16lh) with full recomputation (the repeated forward counted). Exact for
// GPT-style models (4h MLP, multi-head attention); an approximation for others.
double megatron_formula_flops(const spec::WorkloadSpec& workload, bool full_recompute);

}  // namespace trainsim::model
