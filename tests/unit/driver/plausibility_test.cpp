// A unit slip never passes unseen: each physical figure of every shipped topology, multiplied or
// divided by 8 (bits for bytes), is rejected, warned about, or changes what a collective costs.
#include <algorithm>
#include <cstdio>
#include <string>

#include <doctest/doctest.h>

#include <fmt/format.h>

#include "common/paths.hpp"
#include "trainsim/driver/collective.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace plausibility_test {

// What the fabric's figures show: an 8 GiB all-reduce over the first two nodes (bandwidth) and a
// 1 KiB one between the first and the last device (latencies, switches crossed on the way).
double collective_seconds(const spec::ClusterSpec& cluster) {
  const auto tunables = driver::resolve_tunables(cluster, nullptr).values;
  const auto seconds = [&](Bytes bytes, const std::string& group) {
    driver::CollectiveQuery q;
    q.op = "all_reduce";
    q.sizes = {bytes};
    q.group = group;
    return driver::run_collective(cluster, q, tunables).rows.front().cost.time.seconds();
  };
  const auto devices = cluster.num_devices();
  const auto two_nodes = std::min<std::int64_t>(devices, 2 * cluster.node.devices);
  return seconds(Bytes{std::int64_t{8} << 30}, fmt::format("0-{}", two_nodes - 1)) +
         seconds(Bytes{1024}, devices > 1 ? fmt::format("0,{}", devices - 1) : "0");
}

// "400 Gb/s" scaled by `factor`: "3200 Gb/s".
std::string scaled(const std::string& text, double factor) {
  std::size_t end = 0;
  const double number = std::stod(text, &end);
  return fmt::format("{:g}{}", number * factor, text.substr(end));
}

// A figure the topology leaves to its link kind, written out as the topology would give it.
std::optional<std::string> resolved(const spec::ClusterSpec& c, std::string_view field) {
  const auto* ls = std::get_if<spec::LeafSpineNetwork>(&c.network);
  const auto* torus = std::get_if<spec::TorusNetwork>(&c.network);
  const bool fabric = c.node.devices > 1;
  if (field == "/node/fabric/bandwidth" && fabric)
    return fmt::format("{:g} GB/s", c.node.fabric.bandwidth.bytes_per_s / 1e9);
  if (field == "/node/fabric/latency" && fabric) return fmt::format("{:g} us", c.node.fabric.latency.seconds() * 1e6);
  if (field == "/network/nic_bandwidth" && ls) return fmt::format("{:g} Gb/s", ls->nic_bandwidth.bytes_per_s * 8 / 1e9);
  if (field == "/network/latency" && ls) return fmt::format("{:g} us", ls->latency.seconds() * 1e6);
  if (field == "/network/latency" && torus) return fmt::format("{:g} us", torus->latency.seconds() * 1e6);
  if (field == "/network/switch_latency" && ls) return fmt::format("{:g} ns", ls->switch_latency.seconds() * 1e9);
  if (field == "/network/link_bandwidth" && torus)
    return fmt::format("{:g} GB/s", torus->link_bandwidth.bytes_per_s / 1e9);
  return std::nullopt;
}

}  // namespace plausibility_test

using namespace plausibility_test;

TEST_CASE("every physical figure of every shipped topology, times or over 8: rejected, warned or visible" * doctest::test_suite("volume")) {
  const char* fields[] = {"/node/fabric/bandwidth", "/node/fabric/latency", "/network/nic_bandwidth",
                          "/network/latency", "/network/link_bandwidth", "/network/switch_latency"};
  int checked = 0;
  for (const auto& path : test::shipped("topologies")) {
    const auto original = spec::load_json_file(path);
    const auto base = spec::read_cluster_spec(original, path);
    const double base_seconds = collective_seconds(base);
    for (const auto* field : fields) {
      const nlohmann::json::json_pointer p(field);
      // a figure left to the link catalogue is checked as the value it resolves to
      const auto given = original.contains(p) && original.at(p).is_string()
                             ? std::optional<std::string>(original.at(p).get<std::string>())
                             : resolved(base, field);
      if (!given) continue;
      for (const double factor : {8.0, 1.0 / 8.0}) {
        CAPTURE(path);
        const std::string field_name(field);
        CAPTURE(field_name);
        CAPTURE(factor);
        auto j = original;
        j[p] = scaled(*given, factor);
        ++checked;
        try {
          const auto c = spec::read_cluster_spec(j, path);
          const bool warned = std::any_of(c.warnings.begin(), c.warnings.end(), [&](const std::string& w) {
            return w.find(field) != std::string::npos;
          });
          const bool visible = collective_seconds(c) != base_seconds;
          CHECK((warned || visible));
        } catch (const SpecError& e) {
          CHECK(std::string(e.what()).find(field) != std::string::npos);
        }
      }
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("collective --strategy with a segment costs groups on the part of each rack the job is given") {
  const auto rack = spec::load_cluster_spec(test::topology("gb200-nvl72"));
  const auto tunables = driver::resolve_tunables(rack, nullptr).values;
  const auto seconds = [&](const std::string& group, const std::string& strategy) {
    driver::CollectiveQuery q;
    q.op = "all_reduce";
    q.sizes = {Bytes{std::int64_t{1} << 30}};
    q.group = group;
    q.strategy = strategy;
    return driver::run_collective(rack, q, tunables).rows.front().cost.time.seconds();
  };
  // under segment=16 devices 64-127 are the second rack's 64 GPUs, all on NVLink, as 0-63 are the
  // first's (NVLS, 838 GB/s bus bandwidth); without it they are rack 0's last 8 and rack 1's first
  // 56, joined by the network (tree, 641 GB/s)
  const std::string segment = "tp=4,gpus=256,segment=16";
  CHECK(seconds("64-127", segment) == doctest::Approx(seconds("0-63", segment)));
  CHECK(seconds("64-127", segment) < seconds("64-127", "tp=4,gpus=256"));
  CHECK_THROWS_WITH_AS(seconds("0-63", "tp=4,gpus=64,segment=19"), doctest::Contains("/segment: 19 hosts"), SpecError);
}
