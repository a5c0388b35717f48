#pragma once
// The `run` report (INTERFACE.md "Report"): what a job costs in parameters, FLOPs and memory.
#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/model/flops.hpp"
#include "trainsim/model/layer_ops.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::report {

struct LayerSummary {
  std::string kind;  // "dense" or "moe"
  std::vector<model::Op> ops;
};

struct RunReport {
  const spec::Job* job = nullptr;
  double params_total = 0;
  double params_per_gpu = 0;  // the largest stage's per-GPU share before ZeRO sharding
  model::StepFlops flops;
  double megatron_formula_flops = 0;
  model::MemoryEstimate memory;
  Bytes device_memory;
  bool fits = false;
  std::vector<LayerSummary> layers;  // one micro-batch on one GPU
  std::vector<std::string> warnings;
};

RunReport build_run_report(const spec::Job& job);

}  // namespace trainsim::report
