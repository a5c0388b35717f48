#include "trainsim/driver/cluster_model.hpp"

namespace trainsim::driver {

ClusterModel::ClusterModel(const spec::ClusterSpec& cluster, cost::CollectiveTuning tuning)
    : topology_(topo::Topology::build(cluster)), tuning_(std::move(tuning)) {
  cost::register_builtin_algorithms(registry_);
}

ClusterModel::ClusterModel(topo::Topology topology, cost::CollectiveTuning tuning)
    : topology_(std::move(topology)), tuning_(std::move(tuning)) {
  cost::register_builtin_algorithms(registry_);
}

std::unique_ptr<cost::CostModel> ClusterModel::cost_model() const {
  return cost_model(tuning_);
}

std::unique_ptr<cost::CostModel> ClusterModel::cost_model(const cost::CollectiveTuning& tuning) const {
  return std::make_unique<cost::CostModel>(topology_, registry_, tuning);
}

}  // namespace trainsim::driver
