// Leaf/spine fat trees (two tiers), and three tiers of leaves, pod spines and core planes.
//
// A leaf has k ports: d = k·o/(1+o) down to NICs and u = k − d up, one to each of the u spines
// of its pod (o is the leaf oversubscription). Rail-optimised: NIC r of a group of d nodes sits on
// the group's leaf r; otherwise NICs fill leaves in order. Three tiers: a pod is either the
// topology's `pods.devices` or spine_radix/2 leaves; spine j of every pod reaches core plane j over
// an aggregated link of (leaves in pod / pod oversubscription) switch ports. Switch ports run at the
// NIC rate. Flows between leaves split evenly over the u spines (ECMP as fluid flow).
//
// With several network planes each plane is such a fat tree of its own, over NIC r of every node
// for r ≡ plane (mod planes), with no link between planes: a flow whose NICs sit on different
// planes first crosses the source node's fabric to the device whose NIC is on the destination's
// plane (NCCL's PXN), then stays on that plane.
#include <algorithm>
#include <cmath>

#include "topo/index.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::topo {
namespace {

struct Shape {
  int leaf_down = 0;
  int leaf_up = 0;
  std::uint32_t leaves = 0;
  std::uint32_t leaves_per_pod = 0;
  std::uint32_t pods = 1;
  bool three_tier = false;
};

// One plane of the network: the nodes' NICs on it.
spec::LeafSpineNetwork one_plane(const spec::LeafSpineNetwork& net) {
  auto plane = net;
  plane.nics_per_node = net.nics_per_node / net.planes;
  plane.planes = 1;
  return plane;
}

// The shape of one plane.
Shape fat_tree_shape(const spec::ClusterSpec& cluster, const spec::LeafSpineNetwork& net) {
  Shape s;
  const double o = net.oversubscription;
  s.leaf_down = std::clamp(static_cast<int>(std::floor(net.leaf_radix * o / (1.0 + o))), 1, net.leaf_radix - 1);
  s.leaf_up = net.leaf_radix - s.leaf_down;
  const auto nodes = static_cast<std::uint32_t>(cluster.nodes);
  const auto rails = static_cast<std::uint32_t>(net.nics_per_node);
  const auto down = static_cast<std::uint32_t>(s.leaf_down);
  s.leaves = net.rail_optimized ? (nodes + down - 1) / down * rails : (nodes * rails + down - 1) / down;
  s.three_tier = net.tiers == 3 || net.pods.has_value();
  if (!s.three_tier) {
    s.leaves_per_pod = s.leaves;
    return s;
  }
  if (net.pods) {
    const auto pod_nodes = static_cast<std::uint32_t>(net.pods->devices / cluster.node.devices);
    s.leaves_per_pod = net.rail_optimized ? std::max(1u, pod_nodes / down) * rails
                                          : std::max(1u, (pod_nodes * rails + down - 1) / down);
  } else {
    s.leaves_per_pod = std::max(1u, static_cast<std::uint32_t>(net.spine_radix / 2));
  }
  s.pods = (s.leaves + s.leaves_per_pod - 1) / s.leaves_per_pod;
  return s;
}

// Nodes that fill whole leaves (two tiers) or whole pods (three tiers).
std::int64_t nodes_per_unit(const spec::LeafSpineNetwork& net, const Shape& s) {
  const auto down = static_cast<std::int64_t>(s.leaf_down);
  const auto rails = static_cast<std::int64_t>(net.nics_per_node);
  // the NIC ports of whole leaves (of a pod's leaves with three tiers) in whole nodes: a rail group
  // of leaves serves `down` nodes; otherwise a leaf serves down/rails nodes where that divides
  const std::int64_t ports = s.three_tier ? static_cast<std::int64_t>(s.leaves_per_pod) * down : down;
  if (net.rail_optimized) return s.three_tier ? static_cast<std::int64_t>(s.leaves_per_pod) / rails * down : down;
  return ports % rails == 0 ? ports / rails : ports;
}

std::uint32_t leaf_of_nic(const spec::LeafSpineNetwork& net, const Shape& s, std::uint32_t node, std::uint32_t rail) {
  const auto down = static_cast<std::uint32_t>(s.leaf_down);
  const auto rails = static_cast<std::uint32_t>(net.nics_per_node);
  return net.rail_optimized ? node / down * rails + rail : (node * rails + rail) / down;
}

}  // namespace

spec::ClusterSpec reachable_part(const spec::ClusterSpec& cluster, std::int64_t devices) {
  if (const auto* torus = std::get_if<spec::TorusNetwork>(&cluster.network); torus && devices > 0) {
    // whole slices: a slice's torus is as in the whole cluster, and the DCN switch joins any number
    const std::int64_t slice = torus->slice_devices();
    const auto slices = static_cast<int>(std::min<std::int64_t>(torus->slices, (devices + slice - 1) / slice));
    if (slices == torus->slices) return cluster;
    auto part = cluster;
    std::get<spec::TorusNetwork>(part.network).slices = slices;
    part.nodes = slice * slices;
    return part;
  }
  const auto* net = std::get_if<spec::LeafSpineNetwork>(&cluster.network);
  if (net == nullptr || devices <= 0) return cluster;
  const auto plane = one_plane(*net);
  const std::int64_t unit = std::max<std::int64_t>(1, nodes_per_unit(plane, fat_tree_shape(cluster, plane)));
  const std::int64_t needed = (devices + cluster.node.devices - 1) / cluster.node.devices;
  const std::int64_t nodes = std::min(cluster.nodes, (needed + unit - 1) / unit * unit);
  if (nodes == cluster.nodes) return cluster;
  auto part = cluster;
  part.nodes = nodes;
  return part;
}

std::uint32_t FatTreeIndex::first_nic(DeviceId d) const {
  const auto node = d.value / static_cast<std::uint32_t>(devices_per_node);
  const auto local = d.value % static_cast<std::uint32_t>(devices_per_node);
  const auto local_nic = nics_per_device > 1 ? local * static_cast<std::uint32_t>(nics_per_device)
                                             : local / static_cast<std::uint32_t>(devices_per_nic);
  return node * static_cast<std::uint32_t>(nics_per_node) + local_nic;
}

namespace {

// Spines per pod, one link from every leaf of the pod to each; with three tiers, spine j of every
// pod of a plane to the plane's core j.
void add_spines(Topology& topo, const spec::LeafSpineNetwork& net, const Shape& s, std::uint32_t planes,
                const std::vector<VertexId>& leaf_vertex, FatTreeIndex& ft) {
  const Bandwidth port = net.nic_bandwidth;
  const double eff = net.efficiency;
  const auto u = static_cast<std::uint32_t>(s.leaf_up);
  std::vector<VertexId> spine_vertex(planes * s.pods * u);
  for (auto& v : spine_vertex) v = topo.add_vertex(VertexKind::Spine);
  for (std::uint32_t leaf = 0; leaf < planes * s.leaves; ++leaf) {
    const std::uint32_t pod = leaf / s.leaves * s.pods + leaf % s.leaves / s.leaves_per_pod;
    ft.leaf_pod.push_back(pod);
    for (std::uint32_t j = 0; j < u; ++j) {
      const VertexId spine = spine_vertex[pod * u + j];
      ft.leaf_spine_up.push_back(
          topo.add_link(leaf_vertex[leaf], spine, port, eff, net.switch_latency, LinkClass::Network));
      ft.leaf_spine_down.push_back(
          topo.add_link(spine, leaf_vertex[leaf], port, eff, net.switch_latency, LinkClass::Network));
    }
  }
  if (!s.three_tier) return;
  const double pod_oversubscription = net.pods ? net.pods->oversubscription : 1.0;
  std::vector<VertexId> core_vertex(planes * u);
  for (auto& v : core_vertex) v = topo.add_vertex(VertexKind::Core);
  for (std::uint32_t pod = 0; pod < planes * s.pods; ++pod) {
    const std::uint32_t in_plane = pod % s.pods;
    const std::uint32_t leaves_here = std::min(s.leaves_per_pod, s.leaves - in_plane * s.leaves_per_pod);
    const Bandwidth trunk = port * (leaves_here / pod_oversubscription);
    for (std::uint32_t j = 0; j < u; ++j) {
      const VertexId spine = spine_vertex[pod * u + j];
      const VertexId core = core_vertex[pod / s.pods * u + j];
      ft.spine_core_up.push_back(topo.add_link(spine, core, trunk, eff, net.switch_latency, LinkClass::Network));
      ft.spine_core_down.push_back(topo.add_link(core, spine, trunk, eff, net.switch_latency, LinkClass::Network));
    }
  }
}

}  // namespace

void build_fat_tree(Topology& topo, const spec::ClusterSpec& cluster, const spec::LeafSpineNetwork& net,
                    TopologyIndex& index) {
  const auto plane = one_plane(net);
  const Shape s = fat_tree_shape(cluster, plane);
  const auto planes = static_cast<std::uint32_t>(net.planes);
  FatTreeIndex ft;
  ft.devices_per_node = cluster.node.devices;
  ft.nics_per_node = net.nics_per_node;
  ft.nics_per_device = std::max(1, net.nics_per_node / cluster.node.devices);
  ft.devices_per_nic = std::max(1, cluster.node.devices / net.nics_per_node);
  ft.planes = net.planes;
  ft.spines_per_pod = s.leaf_up;
  ft.nic_latency = Duration{net.latency.ps / 2};
  ft.switch_latency = net.switch_latency;
  const auto nodes = static_cast<std::uint32_t>(cluster.nodes);
  const auto rails = static_cast<std::uint32_t>(net.nics_per_node);
  const Bandwidth port = net.nic_bandwidth;
  const double eff = net.efficiency;

  // NICs, each under its plane's leaf; the PCIe link from GPU to NIC is not a bottleneck (it runs
  // at least at the NIC rate) and adds no latency. Leaves, pods and spines are numbered plane by plane.
  std::vector<VertexId> leaf_vertex(planes * s.leaves);
  for (auto& v : leaf_vertex) v = topo.add_vertex(VertexKind::Leaf);
  for (std::uint32_t node = 0; node < nodes; ++node) {
    for (std::uint32_t rail = 0; rail < rails; ++rail) {
      const VertexId nic = topo.add_vertex(VertexKind::Nic);
      const auto leaf = rail % planes * s.leaves + leaf_of_nic(plane, s, node, rail / planes);
      ft.nic_leaf.push_back(leaf);
      ft.nic_up.push_back(topo.add_link(nic, leaf_vertex[leaf], port, eff, ft.nic_latency, LinkClass::Network));
      ft.nic_down.push_back(topo.add_link(leaf_vertex[leaf], nic, port, eff, ft.nic_latency, LinkClass::Network));
    }
  }
  const std::uint32_t first_nic_vertex = static_cast<std::uint32_t>(topo.num_vertices()) - nodes * rails;
  for (std::uint32_t d = 0; d < static_cast<std::uint32_t>(topo.num_devices()); ++d) {
    const auto first = ft.first_nic(DeviceId{d});
    for (int k = 0; k < ft.nics_per_device; ++k) {
      const VertexId nic{first_nic_vertex + first + static_cast<std::uint32_t>(k)};
      const VertexId dev = topo.vertex_of(DeviceId{d});
      ft.host_up.push_back(topo.add_link(dev, nic, port, 1.0, Duration::zero(), LinkClass::Host));
      ft.host_down.push_back(topo.add_link(nic, dev, port, 1.0, Duration::zero(), LinkClass::Host));
    }
  }
  add_spines(topo, net, s, planes, leaf_vertex, ft);
  index.network = std::move(ft);
}

std::uint32_t FatTreeIndex::plane_of(std::uint32_t nic) const {
  return nic % static_cast<std::uint32_t>(nics_per_node) % static_cast<std::uint32_t>(planes);
}

void FatTreeIndex::add_route(const Topology& topo, DeviceId src, DeviceId dst, Route& route) const {
  const auto k = static_cast<std::uint32_t>(nics_per_device);
  const double per_nic = 1.0 / k;
  const auto u = static_cast<std::uint32_t>(spines_per_pod);
  const double per_spine = per_nic / u;
  const auto src_nic = first_nic(src);
  const auto dst_nic = first_nic(dst);
  const auto nics = static_cast<std::uint32_t>(nics_per_node);
  int switches = 1;
  Duration forwarded = Duration::zero();  // across the source node to a NIC on the destination's plane
  int forwarding_switches = 0;
  for (std::uint32_t i = 0; i < k; ++i) {
    auto a = src_nic + i;
    auto from = src;
    const auto b = dst_nic + i;
    if (plane_of(a) != plane_of(b)) {
      // the source node's device with the destination's local index sends on its NIC
      from = DeviceId{src.value - src.value % static_cast<std::uint32_t>(devices_per_node) +
                      dst.value % static_cast<std::uint32_t>(devices_per_node)};
      a = a - a % nics + b % nics;
      const auto inside = topo.route(src, from);
      for (const auto& hop : inside.hops) route.hops.push_back({hop.link, hop.fraction * per_nic});
      forwarded = std::max(forwarded, inside.latency);
      forwarding_switches = std::max(forwarding_switches, inside.switches);
    }
    route.hops.push_back({host_up[from.index() * k + i], per_nic});
    route.hops.push_back({nic_up[a], per_nic});
    const auto la = nic_leaf[a];
    const auto lb = nic_leaf[b];
    if (la != lb) {
      const auto pa = leaf_pod[la];
      const auto pb = leaf_pod[lb];
      switches = pa == pb ? 3 : 5;
      for (std::uint32_t j = 0; j < u; ++j) {
        route.hops.push_back({leaf_spine_up[la * u + j], per_spine});
        if (pa != pb) {
          route.hops.push_back({spine_core_up[pa * u + j], per_spine});
          route.hops.push_back({spine_core_down[pb * u + j], per_spine});
        }
        route.hops.push_back({leaf_spine_down[lb * u + j], per_spine});
      }
    }
    route.hops.push_back({nic_down[b], per_nic});
    route.hops.push_back({host_down[dst.index() * k + i], per_nic});
  }
  route.switches = switches + forwarding_switches;
  route.crosses_network = true;
  route.latency = forwarded + topo.link(nic_up[src_nic]).latency + topo.link(nic_down[dst_nic]).latency +
                  switch_latency * static_cast<std::int64_t>(switches - 1);
}

}  // namespace trainsim::topo
