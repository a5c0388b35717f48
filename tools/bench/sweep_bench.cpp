// Strategy search throughput: configurations enumerated and plans simulated per second, for the
// sweeps of issue 31's targets, on one core and on every core.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/strategy_spec.hpp"

namespace trainsim::bench {
namespace {

void one(const std::string& topology, const std::string& workload, std::int64_t gpus, const std::string& fix,
         unsigned threads) {
  const auto cluster = spec::load_cluster_spec("topologies/" + topology + ".json");
  const auto w = spec::load_workload_spec("workloads/" + workload + ".json");
  search::SweepOptions options;
  options.gpus = {gpus};
  options.threads = threads;
  if (!fix.empty()) options.fixed = spec::parse_inline_strategy(fix, "--fix");
  const auto start = std::chrono::steady_clock::now();
  const auto r = search::sweep(cluster, w, {topology, workload, "--fix"}, options);
  const double wall = seconds_since(start);
  fmt::print("{:<20} {:<16} {:<15} {:>5} {:>2} {:>7} {:>7} {:>5} {:>7.2f} {:>8.0f} {:>7.1f}  {}\n",
             topology.substr(0, 20), workload.substr(0, 16), fix.empty() ? "-" : fix, gpus, threads, r.enumerated,
             r.candidates, r.stats.simulated, wall, static_cast<double>(r.enumerated) / wall,
             static_cast<double>(r.stats.simulated) / wall, r.top.empty() ? std::string("-") : r.top.front().strategy);
}

}  // namespace

void sweep() {
  const unsigned all = std::max(1u, std::thread::hardware_concurrency());
  fmt::print("## sweep, top 10 by step time (threads: 1, then all {})\n", all);
  fmt::print("{:<20} {:<16} {:<15} {:>5} {:>2} {:>7} {:>7} {:>5} {:>7} {:>8} {:>7}  {}\n", "topology", "workload",
             "fix", "gpus", "th", "configs", "cands", "sims", "wall s", "config/s", "plans/s", "best");
  for (const unsigned threads : {1u, all}) {
    one("dgx-a100-superpod", "gpt3-175b", 1024, "", threads);
    one("dgx-h100-superpod", "llama3-70b", 512, "framework=nemo", threads);
    one("dgx-h100-superpod", "qwen3-30b-a3b", 128, "", threads);
    one("h100-roce-llama3", "deepseek-v3-like", 2048, "", threads);
  }
}

}  // namespace trainsim::bench
