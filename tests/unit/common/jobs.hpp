#pragma once
// Building jobs from shipped specs in tests.
#include <string>

#include "common/paths.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::test {

inline spec::Job make_job(const std::string& topology_name, const spec::WorkloadSpec& workload,
                          const std::string& strategy) {
  spec::Sources sources{.topology = topology_name, .workload = workload.name, .strategy = "strategy"};
  return spec::resolve_job(spec::load_cluster_spec(topology(topology_name)), workload,
                           spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "strategy"), "strategy"),
                           sources);
}

inline spec::Job make_job(const std::string& topology_name, const std::string& workload_name,
                          const std::string& strategy) {
  return make_job(topology_name, spec::load_workload_spec(workload(workload_name)), strategy);
}

inline nlohmann::json load_reference(const std::string& name) {
  return spec::load_json_file(reference(name));
}

}  // namespace trainsim::test
