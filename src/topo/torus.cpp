// TPU-style tori: chip (x, y, z) links to its ±1 neighbours in every dimension, wrapping around
// when the torus does. Routes are dimension-ordered along the shorter way; when both ways are
// equally short the flow splits between them.
#include <numeric>

#include "topo/index.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::topo {

std::vector<int> TorusIndex::coordinates(DeviceId d) const {
  std::vector<int> c(dims.size());
  auto rest = d.value;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    c[k] = static_cast<int>(rest % static_cast<std::uint32_t>(dims[k]));
    rest /= static_cast<std::uint32_t>(dims[k]);
  }
  return c;
}

DeviceId TorusIndex::device_at(const std::vector<int>& coords) const {
  std::uint32_t id = 0;
  for (std::size_t k = dims.size(); k-- > 0;)
    id = id * static_cast<std::uint32_t>(dims[k]) + static_cast<std::uint32_t>(coords[k]);
  return {id};
}

void build_torus(Topology& topo, const spec::ClusterSpec& /*cluster*/, const spec::TorusNetwork& net,
                 TopologyIndex& index) {
  TorusIndex t;
  t.dims = net.dims;
  t.wraparound = net.wraparound;
  const auto n = static_cast<std::uint32_t>(topo.num_devices());
  const std::size_t nd = t.dims.size();
  t.links.assign(n * nd * 2, TorusIndex::kNoLink);
  for (std::uint32_t d = 0; d < n; ++d) {
    const auto c = t.coordinates(DeviceId{d});
    for (std::size_t k = 0; k < nd; ++k) {
      if (t.dims[k] < 2) continue;
      for (int dir = 0; dir < 2; ++dir) {
        auto next = c;
        next[k] += dir == 0 ? 1 : -1;
        if (next[k] < 0 || next[k] >= t.dims[k]) {
          if (!t.wraparound) continue;
          next[k] = (next[k] + t.dims[k]) % t.dims[k];
        }
        t.links[(d * nd + k) * 2 + static_cast<std::size_t>(dir)] =
            topo.add_link(topo.vertex_of(DeviceId{d}), topo.vertex_of(t.device_at(next)), net.link_bandwidth,
                          net.efficiency, net.latency, LinkClass::Torus);
      }
    }
  }
  index.network = std::move(t);
}

void TorusIndex::add_route(const Topology& topo, DeviceId src, DeviceId dst, Route& route) const {
  auto at = coordinates(src);
  const auto target = coordinates(dst);
  const std::size_t nd = dims.size();
  int hops_total = 0;
  for (std::size_t k = 0; k < nd; ++k) {
    const int n = dims[k];
    const int forward = ((target[k] - at[k]) % n + n) % n;
    if (forward == 0) continue;
    // (direction, hops, share of the flow)
    std::vector<std::tuple<int, int, double>> ways;
    if (!wraparound) {
      ways.emplace_back(target[k] > at[k] ? 0 : 1, std::abs(target[k] - at[k]), 1.0);
    } else if (2 * forward < n) {
      ways.emplace_back(0, forward, 1.0);
    } else if (2 * forward > n) {
      ways.emplace_back(1, n - forward, 1.0);
    } else {
      ways.emplace_back(0, forward, 0.5);
      ways.emplace_back(1, forward, 0.5);
    }
    for (const auto& [dir, hops, share] : ways) {
      auto pos = at;
      for (int h = 0; h < hops; ++h) {
        const auto link = links[(device_at(pos).index() * nd + k) * 2 + static_cast<std::size_t>(dir)];
        SIM_ASSERT(link != kNoLink, "torus route left the mesh");
        route.hops.push_back({link, share});
        pos[k] = (pos[k] + (dir == 0 ? 1 : -1) + n) % n;
      }
    }
    hops_total += std::get<1>(ways.front());
    at[k] = target[k];
  }
  route.switches = 0;
  route.crosses_network = true;
  route.latency = hops_total > 0 ? topo.link(route.hops.front().link).latency * hops_total : Duration::zero();
}

}  // namespace trainsim::topo
