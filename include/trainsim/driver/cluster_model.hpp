#pragma once
// A cluster as the models see it: its topology graph and the registered collective algorithms,
// built once; cost models (one per thread that simulates) are made from it with the tuning in
// force. This is the one place that assembles topology, algorithms and tuning.
#include <memory>

#include "trainsim/cost/algorithm.hpp"
#include "trainsim/cost/cost_model.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/topo/topology.hpp"

namespace trainsim::driver {

class ClusterModel {
 public:
  ClusterModel(const spec::ClusterSpec& cluster, cost::CollectiveTuning tuning);
  // On a topology already built (one with degraded links, say).
  ClusterModel(topo::Topology topology, cost::CollectiveTuning tuning);
  ClusterModel(const ClusterModel&) = delete;
  ClusterModel& operator=(const ClusterModel&) = delete;

  const topo::Topology& topology() const { return topology_; }
  const cost::AlgorithmRegistry& registry() const { return registry_; }
  const cost::CollectiveTuning& tuning() const { return tuning_; }
  // A fresh cost model (its plan cache is its own: one per thread).
  std::unique_ptr<cost::CostModel> cost_model() const;
  // One under another collective tuning (a fit tries many on one topology).
  std::unique_ptr<cost::CostModel> cost_model(const cost::CollectiveTuning& tuning) const;

 private:
  topo::Topology topology_;
  cost::AlgorithmRegistry registry_;
  cost::CollectiveTuning tuning_;
};

}  // namespace trainsim::driver
