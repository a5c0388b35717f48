#pragma once
// The tunables in force for a job and where each value comes from: the built-in default, the
// device's fitted parameters, a calibration file, explicit overrides (later layers win).
#include <optional>
#include <string>
#include <vector>

#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/tunables.hpp"

namespace trainsim::driver {

struct ResolvedTunables {
  spec::Tunables values;
  // Per field of spec::tunable_fields(): "default", "device", "calibration" or "override".
  std::vector<std::string> origins;
  // The device's fitted values or a calibration file set the kernel efficiencies: the kernel
  // model stands on measurements of this device.
  bool kernels_fitted = false;
};

// `overrides` (what-ifs, tests) apply last.
ResolvedTunables resolve_tunables(const spec::ClusterSpec& cluster, const spec::CalibrationSpec* calibration,
                                  const spec::TunableValues* overrides = nullptr);

}  // namespace trainsim::driver
