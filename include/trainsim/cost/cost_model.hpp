#pragma once
// The collective cost model the engine and the CLI call: plans cached per (operation, group,
// algorithm), evaluated per size in constant time; `auto` takes the fastest algorithm and protocol
// for the size, as NCCL's tuner does.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {

using GroupId = std::uint32_t;

class CostModel {
 public:
  CostModel(const topo::Topology& topo, const AlgorithmRegistry& registry, CollectiveTuning tuning = {});

  // Interns a group (sorted, distinct devices) so repeated queries skip comparing device lists.
  GroupId intern(const Group& group);
  const Group& group(GroupId id) const { return groups_.at(id); }

  // `algorithm` is "auto" or a registered name. A named algorithm that cannot run the collective on
  // the group is a SpecError naming `source`. Under "auto", a fitted collective of the tuning (same
  // operation and group size) gives the time, on the links of the modelled choice.
  CollectiveCost cost(const Collective& collective, GroupId group, std::string_view algorithm = "auto",
                      const std::string& source = "--algo");
  CollectiveCost cost(const Collective& collective, const Group& group, std::string_view algorithm = "auto") {
    return cost(collective, intern(group), algorithm);
  }
  // A point-to-point transfer from `src` to `dst` (the direction matters for link sharing).
  CollectiveCost p2p(topo::DeviceId src, topo::DeviceId dst, Bytes bytes);

  // The plan `cost` used (the fastest for the size under "auto").
  const CollectivePlan* plan(CollectiveKind kind, GroupId group, std::string_view algorithm);

  const topo::Topology& topology() const { return *topo_; }
  const CollectiveTuning& tuning() const { return tuning_; }
  // What the queries so far rested on beyond validated ground: fitted collectives used at sizes
  // outside the range they were fitted on. Sorted, each once.
  std::vector<std::string> warnings() const { return {warnings_.begin(), warnings_.end()}; }

 private:
  const std::optional<CollectivePlan>& cached_plan(std::size_t algorithm, CollectiveKind kind, GroupId group);
  CollectiveCost uncached_cost(CollectiveKind kind, Bytes bytes, GroupId group, std::string_view algorithm,
                               const std::string& source);
  // The fastest modelled algorithm and protocol (what `auto` picks without a fitted collective).
  CollectiveCost best_modelled(CollectiveKind kind, GroupId group, Bytes bytes, const std::string& source);

  const topo::Topology* topo_;
  const AlgorithmRegistry* registry_;
  CollectiveTuning tuning_;
  std::map<Group, GroupId> group_ids_;
  std::vector<Group> groups_;
  // [group][kind][algorithm]; empty slots are not computed yet
  struct Slot {
    bool computed = false;
    std::optional<CollectivePlan> plan;
  };
  std::vector<std::vector<Slot>> plans_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, CollectivePlan> p2p_plans_;
  // Answers of `cost` by (operation, group, bytes, algorithm): a sweep asks the same questions of one
  // cost model for every plan it simulates. The algorithm is -1 for "auto", else its registry index.
  struct CostKey {
    CollectiveKind kind;
    GroupId group;
    std::int64_t bytes;
    std::int32_t algorithm;
    friend bool operator==(const CostKey&, const CostKey&) = default;
  };
  struct CostKeyHash {
    std::size_t operator()(const CostKey& k) const;
  };
  std::unordered_map<CostKey, CollectiveCost, CostKeyHash> costs_;
  std::set<std::string> warnings_;
};

}  // namespace trainsim::cost
