#pragma once
// Paths of shipped specs and reference data, for tests.
#include <string>

namespace trainsim::test {

inline std::string source_path(const std::string& relative) {
  return std::string(TRAINSIM_SOURCE_DIR) + "/" + relative;
}
inline std::string topology(const std::string& name) {
  return source_path("topologies/" + name + ".json");
}
inline std::string workload(const std::string& name) {
  return source_path("workloads/" + name + ".json");
}
inline std::string reference(const std::string& name) {
  return std::string(TRAINSIM_REFERENCE_DIR) + "/" + name;
}

}  // namespace trainsim::test
