// Wall time, tasks and events of simulated training steps: lowering plus the engine.
#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::bench {
namespace {

void one(const std::string& topology, const std::string& workload, const std::string& strategy, bool full) {
  spec::Sources sources{.topology = topology, .workload = workload, .strategy = strategy};
  const auto job =
      spec::resolve_job(spec::load_cluster_spec("topologies/" + topology + ".json"),
                        spec::load_workload_spec("workloads/" + workload + ".json"),
                        spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
  driver::RunOptions options;
  options.full = full;
  const auto rss = resident_kib("VmHWM:");
  const auto start = std::chrono::steady_clock::now();
  const auto r = driver::build_run_report(job, options);
  const double wall = seconds_since(start);
  const auto& s = *r.simulation;
  fmt::print("{:<12} {:<16} {:<44} {:>5} {:>6} {:>9} {:>10} {:>8.2f} {:>10.2f} {:>9.1f}\n", topology.substr(0, 12),
             workload, strategy + (full ? " --full" : ""), job.gpus, s.simulated_ranks, s.tasks, s.events, wall,
             static_cast<double>(s.events) / wall / 1e6, (resident_kib("VmHWM:") - rss) / 1024.0);
}

}  // namespace

void engine() {
  fmt::print("## simulated steps (lowering + engine), folded unless --full\n");
  fmt::print("{:<12} {:<16} {:<44} {:>5} {:>6} {:>9} {:>10} {:>8} {:>10} {:>9}\n", "topology", "workload", "strategy",
             "gpus", "ranks", "tasks", "events", "wall (s)", "Mevents/s", "+RSS MiB");
  one("dgx-a100-superpod", "gpt3-175b", "tp=8,gpus=1024,zero=1,sp=on,recompute=selective", false);
  one("dgx-a100-superpod", "megatron2021-7.5b", "tp=4,gpus=128,mb=4,recompute=full", false);
  one("dgx-a100-superpod", "megatron2021-7.5b", "tp=4,gpus=128,mb=4,recompute=full", true);
  one("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024,sp=on,recompute=selective", false);
  one("dgx-a100-superpod", "megatron2021-1t", "tp=8,pp=64,gpus=3072,recompute=full,schedule=interleaved,vpp=2", false);
}

}  // namespace trainsim::bench
