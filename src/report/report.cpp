#include "trainsim/report/report.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/model/params.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

void simulate(RunReport& r, const spec::Job& job, const RunOptions& options, cost::CostModel& costs) {
  auto step = std::make_shared<SimulatedStep>();
  step->lowered = lower::lower(job, costs, options.lowering);
  step->timeline = sim::run(step->lowered.graph);
  r.simulation = summarize(step->lowered, step->timeline);
  r.step = std::move(step);
}

}  // namespace

RunReport build_run_report(const spec::Job& job, const RunOptions& options) {
  if (!options.simulate) return build_run_report(job, options, nullptr);
  const auto topo = topo::Topology::build(job.cluster);
  cost::AlgorithmRegistry registry;
  cost::register_builtin_algorithms(registry);
  cost::CostModel costs(topo, registry, options.collectives);
  return build_run_report(job, options, &costs);
}

RunReport build_run_report(const spec::Job& job, const RunOptions& options, cost::CostModel* costs) {
  SIM_ASSERT(!options.simulate || costs != nullptr, "a simulated report needs a cost model");
  RunReport r;
  r.job = &job;
  const auto& m = job.workload.model;
  r.params_total = model::count_params(m, job.workload.training.seq_len).total();
  for (const auto& s : model::stage_params(job)) r.params_per_gpu = std::max(r.params_per_gpu, s.total());
  r.flops = model::step_flops(job);
  r.megatron_formula_flops =
      model::megatron_formula_flops(job.workload, job.strategy.recompute == spec::Recompute::Full);
  r.memory = model::estimate_memory(job, options.lowering.memory);
  r.device_memory = job.cluster.device.memory;
  r.runtime_reserved = options.lowering.memory.runtime_reserved;
  r.warnings = job.warnings;
  r.peak_memory = r.memory.peak().bytes.total().count;
  if (r.peak_memory >= Bytes::kSaturated)
    r.warnings.push_back("memory estimate saturated at 1 EiB: the configuration is far outside any real device");

  if (options.simulate) {
    // every micro-batch is a set of tasks: beyond a million per pipeline a step takes hours
    if (job.micro_batches > kMaxSimulatedMicroBatches)
      throw SpecError(job.sources.workload, "/training/global_batch",
                      fmt::format("{} micro-batches per pipeline per step (global_batch / (dp·mb)) are more than "
                                  "a simulation takes ({}); raise mb or dp, or use --analytic",
                                  job.micro_batches, kMaxSimulatedMicroBatches));
    simulate(r, job, options, *costs);
    const auto& s = *r.simulation;
    r.peak_memory = s.peak_memory;
    const double tokens =
        static_cast<double>(job.workload.training.global_batch) * static_cast<double>(job.workload.training.seq_len);
    const double gpus = static_cast<double>(job.gpus);
    const double counted = job.strategy.recompute == spec::Recompute::Full ? r.flops.hardware : r.flops.model;
    const double peak = job.cluster.device.peak_flops.at(job.workload.training.dtype).flop_per_s;
    r.tokens_per_s = tokens / s.step_time_s;
    r.tflops_per_gpu = counted / s.step_time_s / gpus / 1e12;
    r.mfu = r.flops.model / s.step_time_s / gpus / peak;
    const auto& fitted_on = options.lowering.kernel.fitted_on;
    if (!options.calibrated_kernels && job.cluster.device.name.find(fitted_on) == std::string::npos)
      r.warnings.push_back(fmt::format(
          "kernel efficiencies were fitted to {} step times; on {} they are not validated by any measurement "
          "(calibrate them from a profiler trace: trainsim calibrate)",
          fitted_on, job.cluster.device.name));
    for (auto& w : costs->warnings()) r.warnings.push_back(std::move(w));
  }
  r.fits = r.peak_memory <= r.device_memory.count;

  const auto shape = model::gpu_layer_shape(job);
  if (!m.moe || m.moe->dense_layers > 0) r.layers.push_back({"dense", model::layer_ops(m, shape, false)});
  if (m.moe) r.layers.push_back({"moe", model::layer_ops(m, shape, true)});
  return r;
}

void apply_calibration(const spec::CalibrationSpec& c, RunOptions& options) {
  auto& k = options.lowering.kernel;
  const auto& ck = c.kernels;
  k.gemm_ceiling = ck.gemm_ceiling.value_or(k.gemm_ceiling);
  k.sustained_fraction = ck.sustained_fraction.value_or(k.sustained_fraction);
  k.tile_m = ck.tile_m.value_or(k.tile_m);
  k.tile_n = ck.tile_n.value_or(k.tile_n);
  k.k_overhead = ck.k_overhead.value_or(k.k_overhead);
  k.flash_fwd_efficiency = ck.flash_fwd_efficiency.value_or(k.flash_fwd_efficiency);
  k.flash_bwd_efficiency = ck.flash_bwd_efficiency.value_or(k.flash_bwd_efficiency);
  k.hbm_efficiency = ck.hbm_efficiency.value_or(k.hbm_efficiency);
  k.kernel_gap = ck.kernel_gap.value_or(k.kernel_gap);
  auto& t = options.collectives;
  const auto& cc = c.collectives;
  t.launch = cc.launch.value_or(t.launch);
  t.channels = cc.channels.value_or(t.channels);
  t.ll128_channel_cap = cc.ll128_channel_cap.value_or(t.ll128_channel_cap);
  t.simple_chunk = cc.simple_chunk.value_or(t.simple_chunk);
  t.in_switch_efficiency = cc.in_switch_efficiency.value_or(t.in_switch_efficiency);
  t.in_switch_latency = cc.in_switch_latency.value_or(t.in_switch_latency);
  for (const auto& f : cc.fits) t.fits.push_back(cost::fitted_collective(f));
  options.calibrated_kernels = options.calibrated_kernels || ck.gemm_ceiling || ck.sustained_fraction ||
                               ck.flash_fwd_efficiency || ck.flash_bwd_efficiency || ck.hbm_efficiency;
  options.lowering.memory.runtime_reserved = c.runtime_reserved.value_or(options.lowering.memory.runtime_reserved);
}

}  // namespace trainsim::report
