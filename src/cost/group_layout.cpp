#include "cost/group_layout.hpp"

#include <algorithm>
#include <map>

#include "trainsim/util/error.hpp"

namespace trainsim::cost {

std::vector<NodeSlice> slices_by_node(const Group& group, const topo::Topology& topo) {
  std::map<std::int64_t, std::vector<topo::DeviceId>> by_node;
  for (const auto d : group.devices) by_node[topo.node_of(d)].push_back(d);
  std::vector<NodeSlice> out;
  for (auto& [node, devices] : by_node) out.push_back({node, std::move(devices)});
  return out;
}

bool same_size_slices(const std::vector<NodeSlice>& slices) {
  return std::all_of(slices.begin(), slices.end(),
                     [&](const NodeSlice& s) { return s.devices.size() == slices.front().devices.size(); });
}

std::vector<topo::DeviceId> ring_order(const std::vector<NodeSlice>& slices, int channel) {
  std::vector<topo::DeviceId> order;
  if (slices.size() == 1) {
    const auto& d = slices.front().devices;
    for (std::size_t i = 0; i < d.size(); ++i) order.push_back(d[(i + static_cast<std::size_t>(channel)) % d.size()]);
    return order;
  }
  const auto c = static_cast<std::size_t>(channel);
  for (std::size_t k = 0; k < slices.size(); ++k) {
    const auto& d = slices[k].devices;
    const std::size_t m = d.size();
    if (m == 1) {
      order.push_back(d.front());
      continue;
    }
    const std::size_t entry = (c + (k % 2)) % m;
    const std::size_t exit = (c + 1 - (k % 2)) % m;
    order.push_back(d[entry]);
    for (std::size_t i = 1; i < m; ++i) {
      const std::size_t pos = (entry + i) % m;
      if (pos != exit) order.push_back(d[pos]);
    }
    if (exit != entry) order.push_back(d[exit]);
  }
  return order;
}

Duration LoadAccumulator::add_flow(topo::DeviceId src, topo::DeviceId dst, double scale) {
  const auto route = topo_->route(src, dst);
  for (const auto& hop : route.hops) loads_[hop.link.value] += hop.fraction * scale;
  return route.latency;
}

std::vector<LinkLoad> LoadAccumulator::finish() const {
  std::vector<LinkLoad> out;
  out.reserve(loads_.size());
  for (const auto& [link, load] : loads_) out.push_back({topo::LinkId{link}, load});
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) { return a.link < b.link; });
  return out;
}

Duration add_ring(LoadAccumulator& acc, const std::vector<topo::DeviceId>& order, double scale, Duration intra_floor,
                  int* network_hops) {
  const auto& topo = acc.topology();
  Duration lap = Duration::zero();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto src = order[i];
    const auto dst = order[(i + 1) % order.size()];
    const auto hop = acc.add_flow(src, dst, scale);
    const bool inside = topo.node_of(src) == topo.node_of(dst);
    lap += inside ? std::max(hop, intra_floor) : hop;
    if (!inside && network_hops != nullptr) ++*network_hops;
  }
  return lap;
}

void finish_phase(Phase& phase, const LoadAccumulator& acc, const topo::Topology& topo, double efficiency) {
  phase.loads = acc.finish();
  phase.seconds_per_byte = bottleneck_seconds_per_byte(phase.loads, topo, efficiency);
}

Phase intra_node_ring_phase(const std::vector<NodeSlice>& slices, const topo::Topology& topo, int channels,
                            std::string description) {
  const double m = static_cast<double>(slices.front().devices.size());
  LoadAccumulator acc(topo);
  Duration lap = Duration::zero();
  for (const auto& s : slices) {
    const std::vector<NodeSlice> one{s};
    for (int c = 0; c < channels; ++c) lap = std::max(lap, add_ring(acc, ring_order(one, c), (m - 1) / m / channels));
  }
  Phase phase{.description = std::move(description),
              .bus_bytes_per_byte = (m - 1) / m,
              .latency = Duration::from_seconds(lap.seconds() * (m - 1) / m),
              .pipeline_steps = static_cast<int>(m) - 1,
              .chunk_divisor = m * channels};
  finish_phase(phase, acc, topo);
  return phase;
}

}  // namespace trainsim::cost
