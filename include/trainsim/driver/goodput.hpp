#pragma once
// `goodput`: a job's step from the simulator, its checkpoint from the model's state as the
// strategy shards it, its failures from a reliability spec; then the training time under failures,
// in closed form and by Monte Carlo (model/goodput.hpp, docs/goodput.md).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainsim/driver/run.hpp"
#include "trainsim/model/goodput.hpp"
#include "trainsim/spec/reliability_spec.hpp"

namespace trainsim::driver {

struct GoodputRequest {
  // what to train: a number of tokens, or for a number of days
  std::optional<double> tokens;
  std::optional<double> days;
  std::optional<double> interval_s;  // over the spec's; absent in both: Daly's optimum
  std::uint64_t seed = 1;
  int samples = 1000;
};

struct Percentiles {
  double p10 = 0;
  double p50 = 0;
  double p90 = 0;
};

struct GoodputReport {
  const spec::Job* job = nullptr;
  std::string reliability;  // the spec's name
  double step_s = 0;        // failure-free, simulated
  // the memory verdict of the step priced (RunReport's): a plan that does not fit cannot run at all
  bool fits = false;
  bool memory_at_risk = false;
  std::int64_t peak_memory = 0;
  Bytes device_memory;
  double tokens_per_step = 0;
  std::int64_t nodes = 0;
  int domain_devices_used = 0;  // with spare trays: the devices of each scale-up domain the job runs on
  model::GoodputModel model;
  bool interval_optimal = false;  // τ from Daly's formula
  double checkpoint_bytes = 0;    // distinct state saved: weights and optimizer state
  double checkpoint_write_s = 0;  // the save's transfer to storage
  double checkpoint_load_s = 0;
  // the target: failure-free training time for the tokens (tokens mode), or the days (days mode)
  double work_s = 0;
  std::optional<double> horizon_s;
  // closed form (Daly 2006; unlimited spares)
  double closed_wall_s = 0;
  double closed_ettr = 0;
  // Monte Carlo
  int samples = 0;
  std::uint64_t seed = 0;
  double wall_s = 0;  // mean
  Percentiles wall;
  double ettr = 0;  // saved training over wall time, mean over samples
  double tokens = 0;  // trained (mean): the target, or what the days gave
  Percentiles tokens_trained;
  double interruptions = 0;  // mean
  std::vector<std::pair<std::string, double>> interruptions_by_cause;  // mean
  double checkpoint_overhead_s = 0;
  double lost_s = 0;
  double restart_total_s = 0;
  double waiting_s = 0;
  std::vector<std::string> assumptions;
  std::vector<std::string> warnings;
  double gpu_hours() const;
  double goodput_tokens_per_s() const { return tokens / wall_s; }
};

GoodputReport build_goodput_report(const spec::Job& job, const spec::ReliabilitySpec& reliability,
                                   const GoodputRequest& request, const RunOptions& options = {});

}  // namespace trainsim::driver
