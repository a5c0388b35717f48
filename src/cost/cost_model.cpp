#include "trainsim/cost/cost_model.hpp"

#include <algorithm>

#include <boost/container_hash/hash.hpp>

#include <fmt/format.h>

#include "trainsim/util/error.hpp"

namespace trainsim::cost {
CostModel::CostModel(const topo::Topology& topo, const AlgorithmRegistry& registry, CollectiveTuning tuning)
    : topo_(&topo), registry_(&registry), tuning_(tuning) {}

GroupId CostModel::intern(const Group& group) {
  SIM_ASSERT(!group.devices.empty(), "empty group");
  SIM_ASSERT(std::is_sorted(group.devices.begin(), group.devices.end()) &&
                 std::adjacent_find(group.devices.begin(), group.devices.end()) == group.devices.end(),
             "group devices must be sorted and distinct");
  SIM_ASSERT(group.devices.back().value < topo_->num_devices(), "group device {} outside the topology",
             group.devices.back().value);
  const auto [it, inserted] = group_ids_.try_emplace(group, static_cast<GroupId>(groups_.size()));
  if (inserted) {
    groups_.push_back(group);
    plans_.emplace_back(kCollectiveKinds * registry_->all().size());
  }
  return it->second;
}

const std::optional<CollectivePlan>& CostModel::cached_plan(std::size_t algorithm, CollectiveKind kind, GroupId group) {
  auto& slot = plans_.at(group)[static_cast<std::size_t>(kind) * registry_->all().size() + algorithm];
  if (!slot.computed) {
    slot.plan = registry_->all()[algorithm]->plan(kind, groups_[group], *topo_, tuning_);
    slot.computed = true;
  }
  return slot.plan;
}

const CollectivePlan* CostModel::plan(CollectiveKind kind, GroupId group, std::string_view algorithm) {
  const auto& algorithms = registry_->all();
  for (std::size_t a = 0; a < algorithms.size(); ++a) {
    if (algorithms[a]->name() != algorithm) continue;
    const auto& p = cached_plan(a, kind, group);
    return p ? &*p : nullptr;
  }
  return nullptr;
}

CollectiveCost CostModel::p2p(topo::DeviceId src, topo::DeviceId dst, Bytes bytes) {
  if (src == dst) return CollectiveCost{.algorithm = "none"};
  auto it = p2p_plans_.find({src.value, dst.value});
  if (it == p2p_plans_.end()) {
    // one flow from src to dst: the direct algorithm's send/recv plan, in this direction
    CollectivePlan plan{.algorithm = "p2p", .kind = CollectiveKind::SendRecv, .ranks = 2, .channels = 1};
    Phase phase{.description = "one flow", .bus_bytes_per_byte = 1.0};
    const auto route = topo_->route(src, dst);
    std::map<std::uint32_t, double> loads;
    for (const auto& hop : route.hops) loads[hop.link.value] += hop.fraction;
    for (const auto& [link, load] : loads) phase.loads.push_back({topo::LinkId{link}, load});
    phase.latency = route.latency;
    phase.seconds_per_byte = bottleneck_seconds_per_byte(phase.loads, *topo_);
    plan.phases.push_back(std::move(phase));
    it = p2p_plans_.emplace(std::make_pair(src.value, dst.value), std::move(plan)).first;
  }
  return evaluate(it->second, bytes, tuning_);
}

std::size_t CostModel::CostKeyHash::operator()(const CostKey& k) const {
  std::size_t h = 0;
  boost::hash_combine(h, k.bytes);
  boost::hash_combine(h, static_cast<int>(k.kind));
  boost::hash_combine(h, k.group);
  boost::hash_combine(h, k.algorithm);
  return h;
}

CollectiveCost CostModel::cost(const Collective& collective, GroupId group, std::string_view algorithm,
                               const std::string& source) {
  const auto kind = kind_of(collective);
  const auto bytes = bytes_of(collective);
  if (groups_.at(group).size() < 2) return CollectiveCost{.algorithm = "none"};
  // the registry index of a named algorithm (an unknown name is left to fail below, uncached)
  std::int32_t index = -2;
  if (algorithm == "auto") {
    index = -1;
  } else {
    const auto& algorithms = registry_->all();
    for (std::size_t a = 0; a < algorithms.size(); ++a)
      if (algorithms[a]->name() == algorithm) index = static_cast<std::int32_t>(a);
  }
  const CostKey key{kind, group, bytes.count, index};
  if (index >= -1)
    if (const auto it = costs_.find(key); it != costs_.end()) return it->second;
  auto c = uncached_cost(kind, bytes, group, algorithm, source);
  if (index >= -1) costs_.emplace(key, c);
  return c;
}

CollectiveCost CostModel::uncached_cost(CollectiveKind kind, Bytes bytes, GroupId group, std::string_view algorithm,
                                        const std::string& source) {
  if (algorithm == "auto") {
    for (const auto& f : tuning_.fits) {
      if (f.group_size != static_cast<int>(groups_[group].size()) || f.op != collective_name(kind)) continue;
      // measured: the fit's time, on the links NCCL's choice would load
      auto c = best_modelled(kind, group, bytes, source);
      c.latency = f.latency;
      c.time = f.time(bytes);
      c.algorithm = "fitted";
      c.algbw_Bps = bytes.as_double() / c.time.seconds();
      c.busbw_Bps = c.algbw_Bps * bus_factor(kind, static_cast<int>(groups_[group].size()));
      if (!f.covers(bytes))
        warnings_.insert(
            fmt::format("the fitted {} on {} ranks (measured from {} to {} bytes) is extrapolated to "
                        "messages outside that range",
                        f.op, f.group_size, f.min_bytes.count, f.max_bytes.count));
      return c;
    }
  }
  if (algorithm != "auto") {
    registry_->get(algorithm, source);  // unknown names fail here, listing the known ones
    const auto* p = plan(kind, group, algorithm);
    if (!p)
      throw SpecError(source, "",
                      fmt::format("algorithm \"{}\" cannot run {} on this group of {} devices", algorithm,
                                  collective_name(kind), groups_[group].size()));
    return evaluate(*p, bytes, tuning_);
  }
  return best_modelled(kind, group, bytes, source);
}

CollectiveCost CostModel::best_modelled(CollectiveKind kind, GroupId group, Bytes bytes, const std::string& source) {
  const auto& algorithms = registry_->all();
  std::optional<CollectiveCost> best;
  for (std::size_t a = 0; a < algorithms.size(); ++a) {
    if (!algorithms[a]->chosen_by_auto()) continue;
    const auto& p = cached_plan(a, kind, group);
    if (!p) continue;
    auto c = evaluate(*p, bytes, tuning_);
    if (!best || c.time < best->time) best = std::move(c);
  }
  if (!best)
    throw SpecError(
        source, "",
        fmt::format("no algorithm models {} on a group of {} devices{}", collective_name(kind), groups_[group].size(),
                    kind == CollectiveKind::AllToAll ? " (all-to-all is laid out for at most 1024)" : ""));
  return *best;
}

}  // namespace trainsim::cost
