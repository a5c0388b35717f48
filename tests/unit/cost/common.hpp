#pragma once
#include "common/clusters.hpp"
#include "common/paths.hpp"
#include "trainsim/cost/cost_model.hpp"

namespace trainsim::test {

inline cost::Group devices(std::uint32_t first, std::uint32_t count, std::uint32_t stride = 1) {
  cost::Group g;
  for (std::uint32_t i = 0; i < count; ++i) g.devices.push_back({first + i * stride});
  return g;
}

// A topology with the built-in algorithms, ready for queries.
struct CostFixture {
  explicit CostFixture(const spec::ClusterSpec& cluster, cost::CollectiveTuning tuning = {})
      : topo(topo::Topology::build(cluster)), registry(make_registry()), model(topo, registry, tuning) {}
  static cost::AlgorithmRegistry make_registry() {
    cost::AlgorithmRegistry r;
    cost::register_builtin_algorithms(r);
    return r;
  }
  double busbw_GBps(cost::CollectiveKind kind, const cost::Group& g, Bytes bytes, std::string_view algo = "auto") {
    return model.cost(cost::make_collective(kind, bytes), g, algo).busbw_Bps / 1e9;
  }
  topo::Topology topo;
  cost::AlgorithmRegistry registry;
  cost::CostModel model;
};

}  // namespace trainsim::test
