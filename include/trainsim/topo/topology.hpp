#pragma once
// The cluster as a graph (Boost.Graph inside, a narrow API outside): devices, node switches
// (NVSwitch/PCIe), NICs, leaf/spine/core switches or torus links, with per-direction bandwidth,
// efficiency and latency on every link. Routes are computed structurally for speed and can be
// checked against shortest paths with ECMP on the graph itself.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/util/strong_id.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::topo {

using DeviceId = StrongId<struct DeviceTag>;
using LinkId = StrongId<struct LinkTag>;
using VertexId = StrongId<struct VertexTag>;

enum class VertexKind { Device, NodeSwitch, Nic, Leaf, Spine, Core };
// Fabric: NVLink (or PCIe) inside a node; Host: GPU to NIC; Network: NIC and switch links; Torus: chip-to-chip.
enum class LinkClass { Fabric, Host, Network, Torus };
std::string_view link_class_name(LinkClass cls);
std::string_view vertex_kind_name(VertexKind kind);

// A directed link: one direction of a cable (or of a bundle of parallel cables).
struct Link {
  VertexId from;
  VertexId to;
  Bandwidth bandwidth;  // line rate
  double efficiency = 1.0;
  Duration latency;
  LinkClass cls = LinkClass::Network;
  Bandwidth usable() const { return bandwidth * efficiency; }
  friend bool operator==(const Link&, const Link&) = default;
};

// The links a transfer crosses, each with the share of the transfer it carries (equal-cost
// multipath splits a flow evenly over the equal next hops).
struct RouteHop {
  LinkId link;
  double fraction = 1.0;
  friend bool operator==(const RouteHop&, const RouteHop&) = default;
};

struct Route {
  std::vector<RouteHop> hops;
  Duration latency;  // along the slowest of the equal-cost paths
  int switches = 0;  // switches crossed on each path
  bool crosses_network = false;
};

class TopologyIndex;  // structural routing per network kind (fat tree, torus, single node)

// The part of `cluster` a job on its first `devices` devices can reach: the nodes it needs, rounded
// up to whole leaves of a two-tier fat tree or whole pods of a three-tier one, so that every link
// and switch its traffic may cross is as in the whole cluster (a pod's trunk to the core counts its
// leaves). A torus is returned in whole slices (a smaller torus has other wraparounds), a single
// node whole. A job's
// topology is built from this: a 512-GPU job on a 4-million-GPU topology built the whole graph
// (6.7 GB, 42 s) for links it never uses.
spec::ClusterSpec reachable_part(const spec::ClusterSpec& cluster, std::int64_t devices);

class Topology {
 public:
  static Topology build(const spec::ClusterSpec& cluster);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  ~Topology();

  const spec::ClusterSpec& spec() const { return spec_; }
  std::int64_t num_devices() const { return num_devices_; }
  int devices_per_node() const { return spec_.node.devices; }
  std::int64_t num_nodes() const { return spec_.nodes; }
  std::int64_t node_of(DeviceId d) const { return d.value / static_cast<std::uint32_t>(spec_.node.devices); }
  int local_index(DeviceId d) const {
    return static_cast<int>(d.value % static_cast<std::uint32_t>(spec_.node.devices));
  }
  VertexId vertex_of(DeviceId d) const { return {d.value}; }  // devices are the first vertices

  std::size_t num_links() const { return links_.size(); }
  const Link& link(LinkId id) const { return links_[id.index()]; }
  std::size_t num_vertices() const;
  VertexKind vertex_kind(VertexId v) const;

  // Structural route (fast): node switch, rail NIC, leaf, ECMP over spines (and core planes), or
  // dimension-ordered torus hops with ties split between both directions.
  Route route(DeviceId src, DeviceId dst) const;
  // Reference route: all shortest paths on the graph (breadth-first search), flow split evenly
  // over equal next hops at every vertex. Slow; for tests and unusual graphs.
  Route route_shortest_paths(DeviceId src, DeviceId dst) const;

  bool intra_node_reduction() const { return spec_.node.fabric.in_network_reduction; }
  bool network_reduction() const;
  // Runs the network links of device d's NICs (both directions of each NIC-to-leaf cable) at
  // `fraction` of their line rate; returns how many links changed (0 where d has no NIC: a torus or
  // a single node).
  std::size_t degrade_nic(DeviceId d, double fraction);

  // Approximate heap footprint, for the benchmark.
  std::size_t memory_bytes() const;

  // Used by the builders.
  VertexId add_vertex(VertexKind kind);
  LinkId add_link(VertexId from, VertexId to, Bandwidth bandwidth, double efficiency, Duration latency, LinkClass cls);

 private:
  explicit Topology(spec::ClusterSpec spec);
  struct Graph;

  spec::ClusterSpec spec_;
  std::int64_t num_devices_ = 0;
  std::vector<Link> links_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<TopologyIndex> index_;
};

}  // namespace trainsim::topo
