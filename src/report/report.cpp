#include "trainsim/report/report.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/model/params.hpp"

namespace trainsim::report {

RunReport build_run_report(const spec::Job& job) {
  RunReport r;
  r.job = &job;
  const auto& m = job.workload.model;
  r.params_total = model::count_params(m, job.workload.training.seq_len).total();
  for (const auto& s : model::stage_params(job)) r.params_per_gpu = std::max(r.params_per_gpu, s.total());
  r.flops = model::step_flops(job);
  r.megatron_formula_flops =
      model::megatron_formula_flops(job.workload, job.strategy.recompute == spec::Recompute::Full);
  r.memory = model::estimate_memory(job);
  r.device_memory = job.cluster.device.memory;
  r.fits = r.memory.peak().bytes.total() <= r.device_memory;
  r.warnings = job.warnings;
  if (r.memory.peak().bytes.total().count >= Bytes::kSaturated)
    r.warnings.push_back("memory estimate saturated at 1 EiB: the configuration is far outside any real device");

  const auto shape = model::gpu_layer_shape(job);
  if (!m.moe || m.moe->dense_layers > 0) r.layers.push_back({"dense", model::layer_ops(m, shape, false)});
  if (m.moe) r.layers.push_back({"moe", model::layer_ops(m, shape, true)});
  return r;
}

}  // namespace trainsim::report
