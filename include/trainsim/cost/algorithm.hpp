#pragma once
// Collective algorithms: one seam of polymorphism (docs/architecture.md "Conventions"). Each algorithm lays a collective out
// on the topology as a size-independent plan, or declines when it does not apply (an in-switch
// reduction without a reducing switch, a torus algorithm off a torus). Registered by name.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainsim/cost/plan.hpp"

namespace trainsim::cost {

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                             const CollectiveTuning& tuning) const = 0;
  // Whether `auto` may choose it: an algorithm the communication library does not run by itself
  // is priced only when named.
  virtual bool chosen_by_auto() const { return true; }
};

class AlgorithmRegistry {
 public:
  void add(std::unique_ptr<CollectiveAlgorithm> algorithm);
  // Throws SpecError(source) listing every registered name when `name` is unknown.
  const CollectiveAlgorithm& get(std::string_view name, const std::string& source = "algorithm") const;
  const std::vector<std::unique_ptr<CollectiveAlgorithm>>& all() const { return algorithms_; }
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<CollectiveAlgorithm>> algorithms_;
};

// ring, tree, hier, nvls, sharp, torus, direct — in the order `auto` prefers on equal times.
void register_builtin_algorithms(AlgorithmRegistry& registry);

std::unique_ptr<CollectiveAlgorithm> make_ring_algorithm();
std::unique_ptr<CollectiveAlgorithm> make_tree_algorithm();
std::unique_ptr<CollectiveAlgorithm> make_hierarchical_algorithm();
std::unique_ptr<CollectiveAlgorithm> make_nvls_algorithm();
std::unique_ptr<CollectiveAlgorithm> make_sharp_algorithm();
std::unique_ptr<CollectiveAlgorithm> make_torus_algorithm();
std::unique_ptr<CollectiveAlgorithm> make_direct_algorithm();

}  // namespace trainsim::cost
