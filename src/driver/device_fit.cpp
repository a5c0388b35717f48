#include "trainsim/driver/device_fit.hpp"

#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/tunables.hpp"

namespace trainsim::driver {

trace::MicrobenchFit fit_device(const std::string& path, const std::string& match, const spec::ClusterSpec& cluster) {
  const auto bench = trace::read_microbenchmarks(path, match);
  trace::check_physical(bench, cluster);
  // from the device's values: what the fit does not reach (tiles, channels, protocol caps) stays
  const auto start = resolve_tunables(cluster, nullptr).values;
  const ClusterModel model(cluster, start.collectives);
  return trace::fit_microbenchmarks(bench, cluster.device, start,
                                    [&](const cost::CollectiveTuning& t) { return model.cost_model(t); });
}

}  // namespace trainsim::driver
