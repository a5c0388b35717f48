#include "trainsim/driver/replay.hpp"

#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::driver {

trace::TraceReport replay(const std::vector<trace::RankTrace>& traces, const ReplayRequest& request) {
  trace::ReplayOptions options{.compute_scale = request.compute_scale, .network_scale = request.network_scale};
  if (!request.cluster) {
    if (request.calibration) options.fits = request.calibration->fits;
    return trace::replay(traces, options);
  }
  spec::Tunables tunables;
  if (request.calibration) request.calibration->apply(tunables);
  const ClusterModel cluster(*request.cluster, tunables.collectives);
  const auto costs = cluster.cost_model();
  options.costs = costs.get();
  return trace::replay(traces, options);
}

trace::ChakraReport replay_chakra(const trace::ChakraJob& job, const ReplayRequest& request) {
  trace::ReplayOptions options{.compute_scale = request.compute_scale, .network_scale = request.network_scale};
  if (!request.cluster) {
    if (request.cost_compute)
      throw SpecError("--cost-compute", "", "costing the kernels needs a device: give -t TOPOLOGY");
    return trace::replay_chakra(job, options);
  }
  spec::Tunables tunables;
  if (request.calibration) request.calibration->apply(tunables);
  const ClusterModel cluster(*request.cluster, tunables.collectives);
  const auto costs = cluster.cost_model();
  options.costs = costs.get();
  trace::ComputeCosting compute;
  if (request.cost_compute) {
    compute.device = &request.cluster->device;
    compute.kernels =
        resolve_tunables(*request.cluster, request.calibration ? &*request.calibration : nullptr).values.kernels;
  }
  return trace::replay_chakra(job, options, compute);
}

}  // namespace trainsim::driver
