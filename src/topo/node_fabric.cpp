// Inside a node: every device has one link up to the node's switch (NVSwitch, or a PCIe switch)
// and one down, at the fabric's per-device bandwidth; half the device-to-device latency on each.
#include "topo/index.hpp"

namespace trainsim::topo {

void build_node_fabrics(Topology& topo, const spec::ClusterSpec& cluster, TopologyIndex& index) {
  const auto& fabric = cluster.node.fabric;
  if (cluster.node.devices < 2 || fabric.kind == spec::FabricKind::None) return;
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
