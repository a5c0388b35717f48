#pragma once
// A `replay`: recorded traces run back through the engine, their collectives optionally costed on
// a cluster with the tuning in force (a calibration file's values and fits) or by the fits alone.
#include <optional>
#include <vector>

#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/trace/chakra.hpp"

namespace trainsim::driver {

struct ReplayRequest {
  double compute_scale = 1;
  double network_scale = 1;
  std::optional<spec::ClusterSpec> cluster;
  std::optional<spec::CalibrationSpec> calibration;
  // Chakra: device kernels costed on the cluster's device from their FLOPs and bytes
  bool cost_compute = false;
};

trace::TraceReport replay(const std::vector<trace::RankTrace>& traces, const ReplayRequest& request);
// Chakra execution traces replayed, collectives costed on the cluster when there is one.
trace::ChakraReport replay_chakra(const trace::ChakraJob& job, const ReplayRequest& request);

}  // namespace trainsim::driver
