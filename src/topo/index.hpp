#pragma once
// Structural routing tables of a Topology, one kind per network. Private to topo/.
#include <cstdint>
#include <variant>
#include <vector>

#include "trainsim/topo/topology.hpp"

namespace trainsim::topo {

// Device <-> node switch (NVSwitch or PCIe switch), or the direct links of a full mesh; empty when
// nodes hold one device.
struct NodeFabricIndex {
  std::vector<LinkId> up;    // per device: device -> switch
  std::vector<LinkId> down;  // per device: switch -> device
  int mesh_devices = 0;      // a full mesh: devices per node
  std::vector<LinkId> mesh;  // a full mesh: [device * mesh_devices + local index of the peer]
};

// Leaf/spine(/core) fat tree. Spines are grouped in pods (all spines form one pod with two tiers);
// every leaf of a pod has one link to each of the pod's `spines_per_pod` spines, and spine j of
// every pod has one aggregated link to core plane j.
struct FatTreeIndex {
  int devices_per_node = 0;
  int nics_per_node = 0;
  int nics_per_device = 1;  // > 1 when a device drives several NICs
  int devices_per_nic = 1;  // > 1 when devices share a NIC
  int planes = 1;           // NIC r of a node is on plane r mod planes
  int spines_per_pod = 0;
  std::vector<LinkId> host_up;    // per (device, its k-th NIC): device -> NIC
  std::vector<LinkId> host_down;  // per (device, its k-th NIC): NIC -> device
  std::vector<LinkId> nic_up;     // per NIC: NIC -> leaf
  std::vector<LinkId> nic_down;   // per NIC: leaf -> NIC
  std::vector<std::uint32_t> nic_leaf;
  std::vector<std::uint32_t> leaf_pod;  // pods are numbered plane by plane
  std::vector<LinkId> leaf_spine_up;    // [leaf * spines_per_pod + j]
  std::vector<LinkId> leaf_spine_down;  // [leaf * spines_per_pod + j]
  std::vector<LinkId> spine_core_up;    // [pod * spines_per_pod + j]
  std::vector<LinkId> spine_core_down;  // [pod * spines_per_pod + j]
  Duration nic_latency;                 // half of the NIC-to-NIC latency, on each NIC link
  Duration switch_latency;              // each switch-to-switch link

  // The NICs device `d` sends through: [first, first + count).
  std::uint32_t first_nic(DeviceId d) const;
  std::uint32_t plane_of(std::uint32_t nic) const;
  void add_route(const Topology& topo, DeviceId src, DeviceId dst, Route& route) const;
};

// Torus or mesh of chips: one link per chip, dimension and direction; with several slices each
// slice is its own torus, and their hosts' NICs meet in the data-centre network (one switch).
struct TorusIndex {
  std::vector<int> dims;
  std::vector<bool> wraparound;  // per dimension
  std::uint32_t slice_devices = 1;
  std::vector<LinkId> links;  // [(device * dims + dim) * 2 + (0: +1, 1: -1)]; kNoLink where absent
  static constexpr LinkId kNoLink{0xffffffffu};
  // The data-centre network, where the topology has one: a host's NICs as one vertex.
  std::uint32_t chips_per_host = 0;  // 0: no DCN
  std::vector<LinkId> host_up;       // per device: chip -> its host's NICs
  std::vector<LinkId> host_down;     // per device
  std::vector<LinkId> nic_up;        // per host: NICs -> data-centre fabric
  std::vector<LinkId> nic_down;      // per host

  std::uint32_t slice_of(DeviceId d) const { return d.value / slice_devices; }
  std::vector<int> coordinates(DeviceId d) const;  // inside its slice
  DeviceId device_at(std::uint32_t slice, const std::vector<int>& coords) const;
  void add_route(const Topology& topo, DeviceId src, DeviceId dst, Route& route) const;
};

class TopologyIndex {
 public:
  NodeFabricIndex fabric;
  std::variant<std::monostate, FatTreeIndex, TorusIndex> network;
};

// Builders, one per network kind; each adds vertices and links to `topo` and fills `index`.
void build_node_fabrics(Topology& topo, const spec::ClusterSpec& cluster, TopologyIndex& index);
void build_fat_tree(Topology& topo, const spec::ClusterSpec& cluster, const spec::LeafSpineNetwork& net,
                    TopologyIndex& index);
void build_torus(Topology& topo, const spec::ClusterSpec& cluster, const spec::TorusNetwork& net, TopologyIndex& index);

}  // namespace trainsim::topo
