// Inside a node: every device has one link up to the node's switch (NVSwitch, or a PCIe switch)
// and one down, at the fabric's per-device bandwidth; half the device-to-device latency on each.
// A full mesh instead joins every pair of devices directly.
#include "topo/index.hpp"

namespace trainsim::topo {

namespace {

// A link from every device of a node to every other (AMD Infinity Fabric): the device's bandwidth
// split evenly over its n−1 links, one step of latency per hop, no switch.
void build_full_mesh(Topology& topo, const spec::ClusterSpec& cluster, TopologyIndex& index) {
  const auto& fabric = cluster.node.fabric;
  const int n = cluster.node.devices;
  const Bandwidth per_link = fabric.bandwidth * (1.0 / (n - 1));
  index.fabric.mesh_devices = n;
  index.fabric.mesh.assign(static_cast<std::size_t>(topo.num_devices()) * static_cast<std::size_t>(n),
                           TorusIndex::kNoLink);
  for (std::int64_t node = 0; node < cluster.nodes; ++node) {
    for (int a = 0; a < n; ++a) {
      const DeviceId from{static_cast<std::uint32_t>(node * n + a)};
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        const DeviceId to{static_cast<std::uint32_t>(node * n + b)};
        index.fabric.mesh[from.index() * static_cast<std::size_t>(n) + static_cast<std::size_t>(b)] =
            topo.add_link(topo.vertex_of(from), topo.vertex_of(to), per_link, fabric.efficiency, fabric.latency,
                          LinkClass::Fabric);
      }
    }
  }
}

}  // namespace

void build_node_fabrics(Topology& topo, const spec::ClusterSpec& cluster, TopologyIndex& index) {
  const auto& fabric = cluster.node.fabric;
  if (cluster.node.devices < 2 || fabric.kind == spec::FabricKind::None) return;
  if (fabric.kind == spec::FabricKind::FullMesh) {
    build_full_mesh(topo, cluster, index);
    return;
  }
  const Duration half = Duration{fabric.latency.ps / 2};
  index.fabric.up.resize(static_cast<std::size_t>(topo.num_devices()));
  index.fabric.down.resize(static_cast<std::size_t>(topo.num_devices()));
  for (std::int64_t node = 0; node < cluster.nodes; ++node) {
    const VertexId sw = topo.add_vertex(VertexKind::NodeSwitch);
    for (int local = 0; local < cluster.node.devices; ++local) {
      const DeviceId d{static_cast<std::uint32_t>(node * cluster.node.devices + local)};
      index.fabric.up[d.index()] =
          topo.add_link(topo.vertex_of(d), sw, fabric.bandwidth, fabric.efficiency, half, LinkClass::Fabric);
      index.fabric.down[d.index()] =
          topo.add_link(sw, topo.vertex_of(d), fabric.bandwidth, fabric.efficiency, half, LinkClass::Fabric);
    }
  }
}

}  // namespace trainsim::topo
