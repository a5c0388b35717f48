// TPU-style tori: chip (x, y, z) links to its ±1 neighbours in every dimension, wrapping around
// when the torus does. Routes are dimension-ordered along the shorter way; when both ways are
// equally short the flow splits between them. A multislice topology repeats the torus per slice
// and joins the slices through their hosts' NICs and the data-centre network (DCN): a route
// between slices goes chip -> host NICs -> DCN fabric -> host NICs -> chip.
#include <numeric>

#include "topo/index.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::topo {

std::vector<int> TorusIndex::coordinates(DeviceId d) const {
  std::vector<int> c(dims.size());
  auto rest = d.value % slice_devices;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    c[k] = static_cast<int>(rest % static_cast<std::uint32_t>(dims[k]));
    rest /= static_cast<std::uint32_t>(dims[k]);
  }
  return c;
}

DeviceId TorusIndex::device_at(std::uint32_t slice, const std::vector<int>& coords) const {
  std::uint32_t id = 0;
  for (std::size_t k = dims.size(); k-- > 0;)
    id = id * static_cast<std::uint32_t>(dims[k]) + static_cast<std::uint32_t>(coords[k]);
  return {slice * slice_devices + id};
}

namespace {

void add_torus_links(Topology& topo, const spec::TorusNetwork& net, TorusIndex& t) {
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
          if (!t.wraparound[k]) continue;
          next[k] = (next[k] + t.dims[k]) % t.dims[k];
        }
        t.links[(d * nd + k) * 2 + static_cast<std::size_t>(dir)] =
            topo.add_link(topo.vertex_of(DeviceId{d}), topo.vertex_of(t.device_at(t.slice_of(DeviceId{d}), next)),
                          net.link_bandwidth, net.efficiency, net.latency, LinkClass::Torus);
      }
    }
  }
}

// Every host's NICs (one vertex of their summed rate) to one non-blocking DCN switch; each chip to
// its host's NICs at its share of their rate, as Google states DCN bandwidth per chip: in a
// training step every chip of a host crosses the DCN at once (the data-parallel reduction), and a
// step simulated folded, one rank for all, sees no other chip's traffic on the NICs.
void add_dcn(Topology& topo, const spec::DcnNetwork& dcn, TorusIndex& t) {
  const auto n = static_cast<std::uint32_t>(topo.num_devices());
  t.chips_per_host = static_cast<std::uint32_t>(dcn.chips_per_host);
  const auto hosts = n / t.chips_per_host;
  const Bandwidth rate = dcn.nic_bandwidth * dcn.nics_per_host;
  const Bandwidth share = rate * (1.0 / dcn.chips_per_host);
  const Duration half{dcn.latency.ps / 2};
  const VertexId fabric = topo.add_vertex(VertexKind::Core);
  std::vector<VertexId> nics(hosts);
  for (std::uint32_t h = 0; h < hosts; ++h) {
    nics[h] = topo.add_vertex(VertexKind::Nic);
    t.nic_up.push_back(topo.add_link(nics[h], fabric, rate, dcn.efficiency, half, LinkClass::Network));
    t.nic_down.push_back(topo.add_link(fabric, nics[h], rate, dcn.efficiency, half, LinkClass::Network));
  }
  for (std::uint32_t d = 0; d < n; ++d) {
    const VertexId chip = topo.vertex_of(DeviceId{d});
    const VertexId nic = nics[d / t.chips_per_host];
    t.host_up.push_back(topo.add_link(chip, nic, share, dcn.efficiency, Duration::zero(), LinkClass::Host));
    t.host_down.push_back(topo.add_link(nic, chip, share, dcn.efficiency, Duration::zero(), LinkClass::Host));
  }
}

}  // namespace

void build_torus(Topology& topo, const spec::ClusterSpec& /*cluster*/, const spec::TorusNetwork& net,
                 TopologyIndex& index) {
  TorusIndex t;
  t.dims = net.dims;
  t.wraparound = net.wraparound;
  t.slice_devices = static_cast<std::uint32_t>(net.slice_devices());
  add_torus_links(topo, net, t);
  if (net.dcn) add_dcn(topo, *net.dcn, t);
  index.network = std::move(t);
}

void TorusIndex::add_route(const Topology& topo, DeviceId src, DeviceId dst, Route& route) const {
  if (slice_of(src) != slice_of(dst)) {
    SIM_ASSERT(chips_per_host > 0, "a route between slices without a data-centre network");
    const auto a = src.value / chips_per_host;
    const auto b = dst.value / chips_per_host;
    route.hops = {{host_up[src.index()], 1.0}, {nic_up[a], 1.0}, {nic_down[b], 1.0}, {host_down[dst.index()], 1.0}};
    route.switches = 1;
    route.crosses_network = true;
    route.latency = topo.link(nic_up[a]).latency + topo.link(nic_down[b]).latency;
    return;
  }
  const auto slice = slice_of(src);
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
    if (!wraparound[k]) {
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
        const auto link = links[(device_at(slice, pos).index() * nd + k) * 2 + static_cast<std::size_t>(dir)];
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
