// How the cost of simulating one training step grows with the cluster: Llama 3 405B (TP 8, PP 16,
// 8,192-token sequences, 16M-token batch, ZeRO-1) on 1k to 64k H100s of the Llama 3 RoCE fabric,
// folded (one simulated rank per pipeline stage, every data-parallel replica and tensor-parallel
// peer identical) and, where it stays small, every rank simulated.
#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::bench {
namespace {

// One step, run in a child process (in_child) so that its peak resident memory is its own.
// `slow_rank` >= 0: that GPU 20% slow (`run --perturb`).
void one(std::int64_t gpus, bool full, int slow_rank = -1) {
  auto topology = spec::load_json_file("topologies/h100-roce-llama3.json");
  topology["nodes"] = std::max<std::int64_t>(topology["nodes"].get<std::int64_t>(), gpus / 8);
  const auto cluster = spec::read_cluster_spec(topology, "h100-roce-llama3 (scaled)");
  const auto strategy = fmt::format("tp=8,sp=on,pp=16,gpus={},zero=1,first_stage_layers=7,last_stage_layers=7", gpus);
  const spec::Sources sources{.topology = "h100-roce-llama3", .workload = "llama3-405b", .strategy = strategy};
  const auto job =
      spec::resolve_job(cluster, spec::load_workload_spec("workloads/llama3-405b.json"),
                        spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
  driver::RunOptions options;
  options.full = full;
  if (slow_rank >= 0) {
    spec::PerturbSpec p;
    p.slow_gpus.push_back({.rank = slow_rank, .compute_factor = 1.2});
    options.perturb = p;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r = driver::build_run_report(job, options);
  const double wall = seconds_since(start);
  const auto& s = *r.simulation;
  const double peak = static_cast<double>(resident_kib("VmHWM:")) * 1024;
  fmt::print("{:>7} {:>14} {:>5} {:>12} {:>9} {:>10} {:>10} {:>8.2f} {:>9.2f} {:>9.0f} {:>10.0f} {:>9.2f}\n", gpus,
             std::string(slow_rank >= 0 ? "perturbed " : "") + (full ? "full" : "folded"), job.dp, job.micro_batches, s.simulated_ranks,
             s.tasks, s.events, wall, static_cast<double>(s.events) / wall / 1e6, peak / (1 << 20),
             peak / static_cast<double>(s.tasks), s.step_time_s);
}

}  // namespace

void scale() {
  fmt::print("## Llama 3 405B, tp=8 sp pp=16 zero=1, 16M tokens per step: one step\n");
  fmt::print("{:>7} {:>14} {:>5} {:>12} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>9}\n", "gpus", "ranks", "dp",
             "micro-batch", "simulated", "tasks", "events", "wall (s)", "Mevents/s", "peak MiB", "bytes/task",
             "step (s)");
  for (const std::int64_t gpus : {1024, 4096, 16384, 65536}) in_child([gpus] { one(gpus, false); });
  in_child([] { one(1024, true); });
  in_child([] { one(16384, true); });
  // perturbed runs simulate twice (the unperturbed step and the perturbed one): the slow GPU's
  // distinct ranks only, or with --full every rank
  in_child([] { one(16384, false, 5000); });
  in_child([] { one(16384, true, 5000); });
}

}  // namespace trainsim::bench
