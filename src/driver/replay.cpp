#include "trainsim/driver/replay.hpp"

#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::driver {
namespace {

// Calls `replay` with the options a request sets: its scales and, with a cluster, the cluster's
// collective model (tuned by the calibration), which lives until `replay` returns.
template <class F>
auto with_options(const ReplayRequest& request, F&& replay) {
  trace::ReplayOptions options{.compute_scale = request.compute_scale, .network_scale = request.network_scale};
  if (!request.cluster) return replay(options);
  spec::Tunables tunables;
  if (request.calibration) request.calibration->apply(tunables);
  const ClusterModel cluster(*request.cluster, tunables.collectives);
  const auto costs = cluster.cost_model();
  options.costs = costs.get();
  return replay(options);
}

}  // namespace

trace::TraceReport replay(const std::vector<trace::RankTrace>& traces, const ReplayRequest& request) {
  return with_options(request, [&](trace::ReplayOptions& options) {
    // without a cluster, a calibration's measured collectives replace the recorded ones
    if (options.costs == nullptr && request.calibration) options.fits = request.calibration->fits;
    return trace::replay(traces, options);
  });
}

trace::ChakraReport replay_chakra(const trace::ChakraJob& job, const ReplayRequest& request) {
  if (request.cost_compute && !request.cluster)
    throw SpecError("--cost-compute", "", "costing the kernels needs a device: give -t TOPOLOGY");
  return with_options(request, [&](trace::ReplayOptions& options) {
    trace::ComputeCosting compute;
    if (request.cost_compute) {
      compute.device = &request.cluster->device;
      compute.kernels =
          resolve_tunables(*request.cluster, request.calibration ? &*request.calibration : nullptr).values.kernels;
    }
    return trace::replay_chakra(job, options, compute);
  });
}

}  // namespace trainsim::driver
