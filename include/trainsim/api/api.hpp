#pragma once
// What each command computes, from its inputs to its report, with no printing: the CLI
// (src/cli/) and the Python module (src/python/) are two front ends of these functions, so a
// Python call and the command line give the same report for the same inputs.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/driver/collective.hpp"
#include "trainsim/driver/goodput.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/workload_spec.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/trace/chakra.hpp"

namespace trainsim::api {

// A spec given as a file or as a JSON value already in memory (a Python dict). `text` is a
// file's path, or for a strategy also an inline list ("tp=8,pp=2") or "megatron:ARGS"; `value`
// wins when present and `label` names it in errors ("topology dict").
struct SpecInput {
  std::string text;
  std::optional<nlohmann::json> value;
  std::string label;

  bool empty() const { return text.empty() && !value; }
  // How errors and reports name it: the path (or inline text) or the label.
  std::string name() const { return value ? label : text; }
};

spec::ClusterSpec load_cluster(const SpecInput& in);
spec::WorkloadSpec load_workload(const SpecInput& in, const spec::TrainingOverrides& overrides);

struct RunRequest {
  SpecInput topology;
  SpecInput workload;         // may be empty with a launch configuration
  SpecInput strategy;         // a file, an inline list, "megatron:ARGS" or a dict; with a launch, keys over it
  std::string megatron_args;  // a Megatron-LM launch file
  std::string torchtitan;     // a TorchTitan TOML
  spec::TrainingOverrides training;
  std::string calibration;  // a calibration file
  std::string perturb;      // a stragglers file
  int steps = 1;
  double memory_headroom = driver::RunOptions::kDefaultMemoryHeadroom;
  bool full = false;
  bool analytic = false;
  bool timeline = false;  // a timeline will be asked for: the step must be simulated
  bool chakra = false;    // a Chakra export will be asked for: simulated, with each task's work kept
};

// A run's report with the job it points into (moving the result keeps the pointer valid).
struct RunResult {
  std::unique_ptr<spec::Job> job;
  driver::RunReport report;
};

RunResult run(const RunRequest& request);

struct SweepRequest {
  SpecInput topology;
  SpecInput workload;
  spec::TrainingOverrides training;
  std::vector<std::int64_t> gpus;
  std::string fix;  // strategy keys pinned, "tp=8,zero=1"
  std::string rank_by = "step_time";
  std::size_t top = 10;
  unsigned threads = 0;
  std::string shard;  // "I/N"
  std::string calibration;
  double memory_headroom = driver::RunOptions::kDefaultMemoryHeadroom;
  bool exhaustive = false;
  std::function<void(std::size_t, std::size_t)> progress;
};

search::SweepResult sweep(const SweepRequest& request);

// `sweep merge`: shard results (sweep --shard I/N --format json) joined.
search::SweepResult merge_sweeps(const std::vector<std::string>& files);

struct CollectiveRequest {
  SpecInput topology;
  std::string op;
  std::string bytes;  // one size ("1GiB") or
  std::string sweep;  // sizes MIN:MAX, doubling
  std::string group = "all";
  std::string algorithm = "auto";
  std::string strategy;
  std::string calibration;
};

driver::CollectiveReport collective(const CollectiveRequest& request);

struct GoodputRequest {
  SpecInput topology;
  SpecInput workload;
  SpecInput strategy;
  spec::TrainingOverrides training;
  std::string reliability;  // empty: the default spec
  std::optional<double> tokens;
  std::optional<double> days;
  std::string checkpoint_interval;  // a duration, "30min"
  std::uint64_t seed = 1;
  int samples = 1000;
};

struct GoodputResult {
  std::unique_ptr<spec::Job> job;
  driver::GoodputReport report;
};

GoodputResult goodput(const GoodputRequest& request);

struct ReplayRequest {
  std::vector<std::string> traces;
  std::string topology;
  std::string calibration;
  double compute_scale = 1;
  double network_scale = 1;
  bool cost_compute = false;  // Chakra: kernels costed on the topology's device
  // The job the traces recorded (with `topology`): the model's peak memory against the
  // allocator's recorded one (trace::MemoryComparison). Both or neither.
  std::string workload;
  std::string strategy;
};

trace::TraceReport replay(const ReplayRequest& request);

// `replay --chakra DIR`: a folder of Chakra execution traces replayed (`traces` unused).
trace::ChakraReport replay_chakra(const std::string& dir, const ReplayRequest& request);

// `calibrate --trace`: collective and kernel parameters fitted to traces (topology optional); with
// the job the traces recorded (workload and strategy, as for replay) also memory.fragmentation.
trace::CalibrationReport calibrate(const std::vector<std::string>& traces, const std::string& topology,
                                   const std::string& workload = "", const std::string& strategy = "");

std::vector<trace::RankTrace> read_traces(const std::vector<std::string>& paths);

}  // namespace trainsim::api
