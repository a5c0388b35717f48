#include "trainsim/driver/tunables.hpp"

namespace trainsim::driver {
namespace {

void mark(std::vector<std::string>& origins, const spec::TunableValues& values, const char* origin) {
  const auto fields = spec::tunable_fields();
  for (const auto& [field, value] : values.values) origins[static_cast<std::size_t>(field - fields.data())] = origin;
}

}  // namespace

ResolvedTunables resolve_tunables(const spec::ClusterSpec& cluster, const spec::CalibrationSpec* calibration,
                                  const spec::TunableValues* overrides) {
  ResolvedTunables r;
  r.origins.assign(spec::tunable_fields().size(), "default");
  const auto& fitted = cluster.device.fitted;
  fitted.apply(r.values);
  mark(r.origins, fitted, "device");
  r.kernels_fitted = fitted.sets_kernel_efficiency();
  if (calibration != nullptr) {
    calibration->apply(r.values);
    mark(r.origins, calibration->values, "calibration");
    r.kernels_fitted = r.kernels_fitted || calibration->values.sets_kernel_efficiency();
  }
  if (overrides != nullptr) {
    overrides->apply(r.values);
    mark(r.origins, *overrides, "override");
    r.kernels_fitted = r.kernels_fitted || overrides->sets_kernel_efficiency();
  }
  return r;
}

}  // namespace trainsim::driver
