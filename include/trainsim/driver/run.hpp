#pragma once
// A `run`: a job's parameters, FLOPs and analytic memory, and (unless analytic) its step lowered,
// simulated and measured: step time, throughput, MFU, the memory peak. What report/ renders.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/driver/simulation.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/lower/lowering.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/perturb_spec.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/tunables.hpp"

namespace trainsim::driver {

struct LayerSummary {
  std::string kind;  // "dense" or "moe"
  std::vector<model::Op> ops;
};

// Every micro-batch is a set of tasks per layer: beyond this many layer passes per pipeline (micro-
// batches × layers) a step takes minutes and about a gibibyte to simulate (Llama 3 8B at 125,000
// micro-batches: 4 million passes, 23 s and 1.9 GiB), and build_run_report refuses (the analytic
// report still answers). GPT-3 175B at 21,845 micro-batches, Llama 3 8B at 65,536.
inline constexpr std::int64_t kMaxSimulatedLayerPasses = std::int64_t{1} << 21;
// The layer passes a simulation of `job` lowers per pipeline.
inline std::int64_t layer_passes(const spec::Job& job) {
  return job.micro_batches * std::max<std::int64_t>(1, job.workload.model.layers);
}

struct RunOptions {
  bool simulate = true;  // false: the analytic figures only
  bool full = false;     // simulate every rank instead of one per pipeline stage
  // The tunables are the defaults, then the device's, then this calibration's, then `overrides`.
  std::optional<spec::CalibrationSpec> calibration;
  spec::TunableValues overrides;
  // Megatron-LM's data-parallel bucket: max(40M, 1M · dp) parameters.
  double min_bucket_params = 40e6;
  // Share of device memory kept free for what the model does not count (docs/model.md "What a GPU
  // holds beyond the model, and the headroom"). A plan whose
  // peak enters it fits but is at risk, and so does one whose live tensors fit only if the caching
  // allocator gives back its reserve; the sweep ranks both, flagged.
  double memory_headroom = kDefaultMemoryHeadroom;
  static constexpr double kDefaultMemoryHeadroom = 0.05;
  // Stragglers: every rank simulated, over `steps` steps (each its own noise draw)
  std::optional<spec::PerturbSpec> perturb;
  int steps = 1;
  // Keep what each task does (lower::Lowered::work), for a Chakra export.
  bool record_work = false;

  ResolvedTunables tunables(const spec::ClusterSpec& cluster) const;
  lower::LoweringOptions lowering(const spec::Tunables& tunables) const;
};

// The simulated step kept for timelines and tests.
struct SimulatedStep {
  lower::Lowered lowered;
  sim::Timeline timeline;
};

// What stragglers did: the steps simulated with every rank, against the unperturbed step.
struct Perturbation {
  int steps = 0;
  double unperturbed_step_s = 0;
  double mean_step_s = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  // On the slowest step's critical path: the rank with the most compute, and the resource (compute,
  // or a kind of communication) that held the path longest, with its share of the path.
  int critical_rank = 0;
  std::string critical_resource;
  double critical_share = 0;
  std::vector<int> slow_ranks;      // the ranks made slow
  std::vector<int> degraded_ranks;  // the ranks whose NIC runs below its line rate
  double gpu_hours_per_day = 0;     // what the slowdown costs the job per day of training
};

struct RunReport {
  const spec::Job* job = nullptr;
  double params_total = 0;
  double params_per_gpu = 0;  // the largest stage's per-GPU share before ZeRO sharding
  model::StepFlops flops;
  double megatron_formula_flops = 0;
  model::MemoryEstimate memory;  // analytic
  std::optional<Simulation> simulation;
  std::shared_ptr<SimulatedStep> step;  // present when simulated
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;     // Megatron-LM's count: the recomputed forward counted under full recompute
  // MFU = model FLOPs / (step × gpus × the peak of mfu_dtype), the dtype the GEMMs run in (fp8
  // under an FP8 recipe, however it was asked for; else the training dtype); mfu_bf16 against the
  // bf16 peak whatever the GEMMs ran in, as Megatron-LM and NeMo print it (an FP8 run's can pass 100%)
  double mfu = 0;
  spec::Dtype training_dtype = spec::Dtype::Bf16;  // weights, activations, non-GEMM kernels
  spec::Dtype mfu_dtype = spec::Dtype::Bf16;
  double mfu_peak_flops = 0;  // per GPU, FLOP/s
  std::optional<double> mfu_bf16;  // absent on a device without a bf16 peak
  std::int64_t peak_memory = 0;  // simulated when simulated, else analytic
  // The same without the caching allocator's reserve (memory.fragmentation): the live tensors,
  // which must fit. The reserve is given back under pressure (docs/model.md "Fits").
  std::int64_t live_peak_memory = 0;
  Bytes device_memory;
  spec::MemoryTuning memory_tuning;  // what the memory figures assumed
  Bytes runtime_memory;  // part of every GPU's buffers: CUDA context, cuBLAS and NCCL (model::runtime_memory)
  bool fits = false;
  double memory_headroom = 0;
  // fits, but its peak (with the allocator's reserve) is within the headroom of the device's memory
  // or beyond it
  bool memory_at_risk = false;
  std::vector<LayerSummary> layers;  // one micro-batch on one GPU
  std::vector<std::string> warnings;
  std::optional<Perturbation> perturbation;
};

// Builds the job's cluster model (topology, algorithms, the options' collective tuning) when it
// simulates.
RunReport build_run_report(const spec::Job& job, const RunOptions& options = {});
// The same on a cost model made for the job's cluster with the options' collective tuning (a sweep
// simulates many jobs on one topology); may be null when `options.simulate` is false.
RunReport build_run_report(const spec::Job& job, const RunOptions& options, cost::CostModel* costs);

// The job as its compiler would lay it out: where remat_to_fit is on and the live tensors would not
// fit, the layers XLA's rematerialisation recomputes (model::apply_remat_to_fit), with the memory
// tunables `options` gives its cluster. Every command that reports on a resolved job calls it
// first (the sweep screens with the same function).
void prepare_job(spec::Job& job, const RunOptions& options);

// The worst tp, cp and ep group that straddles two scale-up domains (or TPU slices), each by its
// first rank, for the lowering to simulate beside the first group (lower::LoweringOptions::
// distinct_groups); with `warnings`, one line per dimension that has such groups.
std::vector<lower::DistinctGroup> straddling_groups(const spec::Job& job, std::vector<std::string>* warnings = nullptr);

}  // namespace trainsim::driver
