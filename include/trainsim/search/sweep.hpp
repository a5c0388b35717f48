#pragma once
// Strategy search (`trainsim sweep`): enumerate every strategy of a workload on a cluster (tp, sp,
// cp, ep, pp, schedule and vpp, zero, mb, recompute, for each device count asked for), prune what
// the job rules reject or what cannot fit in device memory, simulate the rest and rank them.
//
// The ranking is exact: a candidate is skipped only when a lower bound on its step time (compute
// alone, lower::step_time_lower_bound) already exceeds the K-th best simulated result. Candidates
// are simulated in rounds of fixed size in bound order, so the answer and every reported count
// are the same for any thread count; `SearchStats` (how much was simulated) depends on the bound
// and the shard and is kept out of the answer.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::search {

// What "best" means. Tokens per second orders like step time for one workload (the tokens of a step
// are fixed); cost, in GPU-hours per million tokens, differs when several device counts compete.
enum class Objective { StepTime, TokensPerS, Cost };
std::string_view objective_name(Objective objective);
Objective objective_from_name(std::string_view name);  // SpecError naming --rank-by

// GPU-hours per million tokens of a step of `workload` taking `step_time_s` on `gpus` devices.
double gpu_hours_per_mtoken(double step_time_s, std::int64_t gpus, const spec::WorkloadSpec& workload);

struct SweepOptions {
  std::vector<std::int64_t> gpus;  // device counts to try; empty: every device of the cluster
  // Strategy keys pinned by the user (`--fix tp=8,zero=1`), as parse_inline_strategy gives them.
  nlohmann::json fixed = nlohmann::json::object();
  std::string fixed_source = "--fix";
  Objective objective = Objective::StepTime;
  std::size_t top = 10;
  unsigned threads = 0;  // 0: every hardware thread
  int shard = 0;         // this process's share: candidates whose index ≡ shard (mod shards)
  int shards = 1;
  // What the sweep's inputs hash to (the API's), in a shard's JSON: shards of different sweeps are
  // refused by it when merged.
  std::string fingerprint;
  bool exhaustive = false;  // simulate every candidate that fits instead of skipping bounded ones
  driver::RunOptions run;   // kernel and collective tuning (a calibration file)
  // Called after each simulation with (simulated so far, candidates left to consider at most);
  // serialised, from worker threads.
  std::function<void(std::size_t, std::size_t)> progress;
};

// The part of the cluster every candidate is given: a pinned segment's hosts of each node (the
// strategy key `segment`), or the cluster; a segment the cluster cannot allocate is an error at
// the pinned key.
spec::ClusterSpec allocated_cluster(const spec::ClusterSpec& cluster, const SweepOptions& options);

struct Plan {
  std::size_t index = 0;  // position in the enumeration (breaks ties; the same in every shard)
  std::string strategy;   // inline list for `trainsim run -s`
  std::int64_t gpus = 0;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  double exposed_comm_s = 0;
  double gpu_hours_per_mtoken = 0;  // GPU-hours per million tokens
  std::int64_t peak_memory = 0;
  // the peak fits but enters the memory headroom (--memory-headroom): kept and ranked, flagged
  bool memory_at_risk = false;
  double objective = 0;  // minimised
  double bound = 0;      // the lower bound on the objective the sweep ordered it by
};

// Configurations pruned for one reason, with the first of them as an example.
struct PrunedFamily {
  std::string reason;
  std::int64_t count = 0;
  std::size_t example_index = 0;
  std::string example;
};

struct SearchStats {
  std::int64_t simulated = 0;
  std::int64_t bounded_out = 0;              // compute alone slower than the K-th best
  std::int64_t simulated_out_of_memory = 0;  // fitted by the analytic estimate, not in the simulation
  double seconds = 0;
};

struct SweepResult {
  std::string topology;
  std::string workload;
  Objective objective = Objective::StepTime;
  std::size_t top_k = 0;
  std::vector<std::int64_t> gpus;
  int shards = 1;
  std::vector<int> shard_indices;  // the shards this result covers (all of them once merged)
  std::string fingerprint;         // SweepOptions::fingerprint
  std::int64_t enumerated = 0;
  std::int64_t invalid = 0;        // rejected by the job rules
  std::int64_t out_of_memory = 0;  // the analytic memory estimate exceeds the device
  std::int64_t candidates = 0;     // the rest: simulated or bounded out
  std::vector<Plan> top;
  // the plans simulated that fit and whose bound does not exceed the K-th best objective (every
  // sweep simulates those, sharded or not: which others it simulates depends on the order the
  // bound tightened in), in enumeration order (index, strategy, gpus, step time, peak memory,
  // bound), for the step-time/memory picture of the search; with `exhaustive`, every plan that fits
  std::vector<Plan> simulated;
  bool exhaustive = false;
  std::vector<PrunedFamily> pruned;  // most common reason first
  SearchStats stats;
};

SweepResult sweep(const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload, const spec::Sources& sources,
                  const SweepOptions& options);

// Joins the results of shards of one sweep (each read back with sweep_from_json from the file in
// `sources`); checks that they belong together (inputs, options, fingerprint) and cover each shard
// once (a shard given twice with the same answer counts once: a rerun). The answer equals the
// unsharded sweep's.
SweepResult merge_sweeps(std::vector<SweepResult> parts, const std::vector<std::string>& sources);

nlohmann::ordered_json to_json(const SweepResult& result);
SweepResult sweep_from_json(const nlohmann::json& json, const std::string& source);
std::string to_table(const SweepResult& result);
std::string to_csv(const SweepResult& result);
std::string render(const SweepResult& result, report::Format format);

}  // namespace trainsim::search
