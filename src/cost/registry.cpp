#include <fmt/format.h>

#include "trainsim/cost/algorithm.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::cost {

void AlgorithmRegistry::add(std::unique_ptr<CollectiveAlgorithm> algorithm) {
  for (const auto& a : algorithms_)
    SIM_ASSERT(a->name() != algorithm->name(), "algorithm {} registered twice", a->name());
  algorithms_.push_back(std::move(algorithm));
}

const CollectiveAlgorithm& AlgorithmRegistry::get(std::string_view name, const std::string& source) const {
  for (const auto& a : algorithms_)
    if (a->name() == name) return *a;
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  throw SpecError(source, "", fmt::format("unknown algorithm \"{}\"; expected one of: auto, {}", name, known));
}

std::vector<std::string> AlgorithmRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& a : algorithms_) out.emplace_back(a->name());
  return out;
}

void register_builtin_algorithms(AlgorithmRegistry& registry) {
  registry.add(make_ring_algorithm());
  registry.add(make_tree_algorithm());
  registry.add(make_hierarchical_algorithm());
  registry.add(make_nvls_algorithm());
  registry.add(make_sharp_algorithm());
  registry.add(make_torus_algorithm());
  registry.add(make_direct_algorithm());
}

}  // namespace trainsim::cost
