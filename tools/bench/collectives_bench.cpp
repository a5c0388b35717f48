// Topology build time and memory for 1k–64k devices; collective plan and query throughput.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include "bench/benchmarks.hpp"
#include "trainsim/cost/cost_model.hpp"

#include "trainsim/spec/cluster_spec.hpp"

namespace trainsim::bench {
namespace {

spec::ClusterSpec h100_cluster(int nodes) {
  nlohmann::json j = {{"name", "bench"},
                      {"device",
                       {{"name", "H100"},
                        {"peak_flops", {{"bf16", "989 TFLOP/s"}}},
                        {"memory", "80 GiB"},
                        {"memory_bandwidth", "3350 GB/s"},
                        {"sms", 132}}},
                      {"nodes", nodes},
                      {"node",
                       {{"devices", 8},
                        {"fabric",
                         {{"kind", "nvswitch"},
                          {"bandwidth", "450 GB/s"},
                          {"latency", "0.2 us"},
                          {"efficiency", 0.82},
                          {"in_network_reduction", true}}}}},
                      {"network",
                       {{"kind", "leaf_spine"},
                        {"nics_per_node", 8},
                        {"nic_bandwidth", "400 Gb/s"},
                        {"leaf_radix", 64},
                        {"tiers", 3},
                        {"rail_optimized", true},
                        {"latency", "5 us"},
                        {"switch_latency", "130 ns"},
                        {"efficiency", 0.94}}}};
  return spec::read_cluster_spec(j, "bench");
}

cost::Group strided(std::uint32_t first, std::uint32_t count, std::uint32_t stride) {
  cost::Group g;
  for (std::uint32_t i = 0; i < count; ++i) g.devices.push_back({first + i * stride});
  return g;
}

}  // namespace

void collectives() {
  fmt::print("## topology build (H100 nodes of 8, rail-optimised three-tier fat tree, radix 64)\n");
  fmt::print("{:>8} {:>10} {:>10} {:>12} {:>14}\n", "devices", "vertices", "links", "build (ms)", "memory (MiB)");
  for (const int nodes : {128, 2048, 8192}) {
    const auto spec = h100_cluster(nodes);
    const auto rss_before = resident_kib("VmRSS:");
    const auto start = std::chrono::steady_clock::now();
    const auto topo = topo::Topology::build(spec);
    const double build = seconds_since(start);
    const auto rss_after = resident_kib("VmRSS:");
    fmt::print("{:>8} {:>10} {:>10} {:>12.1f} {:>8.1f} est, {:.1f} RSS\n", topo.num_devices(), topo.num_vertices(),
               topo.num_links(), build * 1e3, topo.memory_bytes() / 1048576.0, (rss_after - rss_before) / 1024.0);
  }

  const auto topo = topo::Topology::build(h100_cluster(2048));
  cost::AlgorithmRegistry registry;
  cost::register_builtin_algorithms(registry);
  cost::CostModel model(topo, registry);
  fmt::print("\n## collective plans on 16,384 H100s (first query of a group lays out every algorithm)\n");
  fmt::print("{:<32} {:>14}\n", "group", "plan (ms)");
  const std::vector<std::pair<std::string, cost::Group>> groups{{"tp: 8 GPUs of a node", strided(0, 8, 1)},
                                                                {"dp: 128 GPUs, one per node", strided(0, 128, 128)},
                                                                {"dp: 2048 GPUs, one per node", strided(0, 2048, 8)},
                                                                {"all 16,384 GPUs", strided(0, 16384, 1)}};
  std::vector<cost::GroupId> ids;
  for (const auto& [name, g] : groups) {
    const auto start = std::chrono::steady_clock::now();
    const auto id = model.intern(g);
    model.cost(cost::AllReduce{gib(1)}, id);
    fmt::print("{:<32} {:>14.1f}\n", name, seconds_since(start) * 1e3);
    ids.push_back(id);
  }
  const int queries = 2'000'000;
  const auto start = std::chrono::steady_clock::now();
  Duration sum = Duration::zero();
  for (int i = 0; i < queries; ++i) {
    const Bytes bytes{std::int64_t{1024} << (i % 23)};
    sum += model.cost(cost::AllReduce{bytes}, ids[static_cast<std::size_t>(i) % ids.size()]).time;
  }
  const double elapsed = seconds_since(start);
  fmt::print(
      "\n## cached queries: {} all-reduce costs (auto: every algorithm and protocol evaluated) in {:.2f} s = "
      "{:.2f} M queries/s (checksum {} ps)\n",
      queries, elapsed, queries / elapsed / 1e6, sum.ps);
}

}  // namespace trainsim::bench
