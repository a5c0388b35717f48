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
void one(std::int64_t gpus, bool full) {
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
  const auto start = std::chrono::steady_clock::now();
  const auto r = driver::build_run_report(job, options);
  const double wall = seconds_since(start);
  const auto& s = *r.simulation;
  fmt::print("{:>7} {:>6} {:>5} {:>12} {:>9} {:>10} {:>8.2f} {:>9.0f} {:>9.2f}\n", gpus, full ? "full" : "folded",
             job.dp, job.micro_batches, s.simulated_ranks, s.events, wall, resident_kib("VmHWM:") / 1024.0,
             s.step_time_s);
}

}  // namespace

void scale() {
  fmt::print("## Llama 3 405B, tp=8 sp pp=16 zero=1, 16M tokens per step: one step\n");
  fmt::print("{:>7} {:>6} {:>5} {:>12} {:>9} {:>10} {:>8} {:>9} {:>9}\n", "gpus", "ranks", "dp", "micro-batch",
             "simulated", "events", "wall (s)", "peak MiB", "step (s)");
  for (const std::int64_t gpus : {1024, 4096, 16384, 65536}) in_child([gpus] { one(gpus, false); });
  in_child([] { one(1024, true); });
}

}  // namespace trainsim::bench
