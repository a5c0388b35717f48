// Strategy search throughput: configurations screened and simulated per second, on all cores.
#include <thread>

#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::bench {
namespace {

void one(const std::string& topology, const std::string& workload, std::int64_t gpus) {
  const auto cluster = spec::load_cluster_spec("topologies/" + topology + ".json");
  const auto w = spec::load_workload_spec("workloads/" + workload + ".json");
  search::SweepOptions options;
  options.gpus = {gpus};
  const auto start = std::chrono::steady_clock::now();
  const auto r = search::sweep(cluster, w, {topology, workload, "--fix"}, options);
  const double wall = seconds_since(start);
  fmt::print("{:<18} {:<16} {:>6} {:>8} {:>10} {:>9} {:>8.1f} {:>10.0f}  {}\n", topology.substr(0, 18), workload, gpus,
             r.enumerated, r.candidates, r.stats.simulated, wall, static_cast<double>(r.enumerated) / wall,
             r.top.empty() ? std::string("-") : r.top.front().strategy);
}

}  // namespace

void sweep() {
  fmt::print("## sweep, top 10 by step time, {} threads\n", std::thread::hardware_concurrency());
  fmt::print("{:<18} {:<16} {:>6} {:>8} {:>10} {:>9} {:>8} {:>10}  {}\n", "topology", "workload", "gpus", "configs",
             "candidates", "simulated", "wall (s)", "configs/s", "best");
  one("dgx-a100-superpod", "gpt3-175b", 1024);
  one("dgx-h100-superpod", "llama3-70b", 512);
}

}  // namespace trainsim::bench
