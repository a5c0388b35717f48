#pragma once
// Fitting a device's kernel and collective parameters to its microbenchmarks (`trainsim calibrate
// --microbenchmarks`): the catalogue's fitted values are this command's output.
#include <string>

#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/trace/microbench.hpp"

namespace trainsim::driver {

// The rows of `path` whose device contains `match`, fitted on `cluster`'s device; the all-reduce
// sweep is costed on the cluster's first node.
trace::MicrobenchFit fit_device(const std::string& path, const std::string& match, const spec::ClusterSpec& cluster);

}  // namespace trainsim::driver
