#include "trainsim/topo/topology.hpp"

#include <algorithm>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/reverse_graph.hpp>

#include "topo/index.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::topo {

struct VertexProps {
  VertexKind kind = VertexKind::Device;
};
struct EdgeProps {
  std::uint32_t link = 0;
};
// vecS everywhere: vertex and edge order follow insertion, so traversals are deterministic.
using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, EdgeProps>;

struct Topology::Graph {
  BoostGraph g;
};

std::string_view link_class_name(LinkClass cls) {
  switch (cls) {
    case LinkClass::Fabric:
      return "fabric";
    case LinkClass::Host:
      return "host";
    case LinkClass::Network:
      return "network";
    case LinkClass::Torus:
      return "torus";
  }
  return "?";
}

std::string_view vertex_kind_name(VertexKind kind) {
  switch (kind) {
    case VertexKind::Device:
      return "device";
    case VertexKind::NodeSwitch:
      return "node_switch";
    case VertexKind::Nic:
      return "nic";
    case VertexKind::Leaf:
      return "leaf";
    case VertexKind::Spine:
      return "spine";
    case VertexKind::Core:
      return "core";
  }
  return "?";
}

Topology::Topology(spec::ClusterSpec spec)
    : spec_(std::move(spec)), graph_(std::make_unique<Graph>()), index_(std::make_unique<TopologyIndex>()) {}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

Topology Topology::build(const spec::ClusterSpec& cluster) {
  Topology topo(cluster);
  topo.num_devices_ = cluster.num_devices();
  SIM_ASSERT(topo.num_devices_ > 0 && topo.num_devices_ <= spec::kMaxDevices, "bad device count {}", topo.num_devices_);
  for (std::int64_t d = 0; d < topo.num_devices_; ++d) topo.add_vertex(VertexKind::Device);
  build_node_fabrics(topo, cluster, *topo.index_);
  std::visit(
      [&](const auto& net) {
        using T = std::decay_t<decltype(net)>;
        if constexpr (std::is_same_v<T, spec::LeafSpineNetwork>)
          build_fat_tree(topo, cluster, net, *topo.index_);
        else if constexpr (std::is_same_v<T, spec::TorusNetwork>)
          build_torus(topo, cluster, net, *topo.index_);
      },
      cluster.network);
  return topo;
}

std::size_t Topology::degrade_nic(DeviceId d, double fraction) {
  SIM_ASSERT(fraction > 0 && fraction <= 1, "a link degraded to {} of its rate", fraction);
  std::vector<VertexId> nics;
  for (const auto& l : links_)
    if (l.cls == LinkClass::Host && l.from == vertex_of(d) && vertex_kind(l.to) == VertexKind::Nic) nics.push_back(l.to);
  std::size_t changed = 0;
  for (auto& l : links_) {
    if (l.cls != LinkClass::Network) continue;
    if (std::find(nics.begin(), nics.end(), l.from) == nics.end() && std::find(nics.begin(), nics.end(), l.to) == nics.end())
      continue;
    l.bandwidth = l.bandwidth * fraction;
    ++changed;
  }
  return changed;
}

VertexId Topology::add_vertex(VertexKind kind) {
  return {static_cast<std::uint32_t>(boost::add_vertex(VertexProps{kind}, graph_->g))};
}

LinkId Topology::add_link(VertexId from, VertexId to, Bandwidth bandwidth, double efficiency, Duration latency,
                          LinkClass cls) {
  SIM_ASSERT(bandwidth.bytes_per_s > 0 && efficiency > 0, "link without bandwidth");
  const LinkId id{static_cast<std::uint32_t>(links_.size())};
  links_.push_back(
      Link{.from = from, .to = to, .bandwidth = bandwidth, .efficiency = efficiency, .latency = latency, .cls = cls});
  boost::add_edge(from.index(), to.index(), EdgeProps{id.value}, graph_->g);
  return id;
}

std::size_t Topology::num_vertices() const {
  return boost::num_vertices(graph_->g);
}
VertexKind Topology::vertex_kind(VertexId v) const {
  return graph_->g[v.index()].kind;
}

bool Topology::network_reduction() const {
  const auto* ls = std::get_if<spec::LeafSpineNetwork>(&spec_.network);
  return ls && ls->in_network_reduction;
}

Route Topology::route(DeviceId src, DeviceId dst) const {
  SIM_ASSERT(src.value < num_devices_ && dst.value < num_devices_, "route between unknown devices {} {}", src.value,
             dst.value);
  Route r;
  if (src == dst) return r;
  if (node_of(src) == node_of(dst) && !index_->fabric.mesh.empty()) {
    const auto hop = index_->fabric.mesh[src.index() * static_cast<std::size_t>(index_->fabric.mesh_devices) +
                                         static_cast<std::size_t>(local_index(dst))];
    r.hops = {{hop, 1.0}};
    r.latency = link(hop).latency;
    return r;
  }
  if (node_of(src) == node_of(dst)) {
    const auto up = index_->fabric.up.at(src.index());
    const auto down = index_->fabric.down.at(dst.index());
    r.hops = {{up, 1.0}, {down, 1.0}};
    r.latency = link(up).latency + link(down).latency;
    r.switches = 1;
    return r;
  }
  std::visit(
      [&](const auto& net) {
        using T = std::decay_t<decltype(net)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          SIM_ASSERT(false, "devices on different nodes without a network");
        else
          net.add_route(*this, src, dst, r);
      },
      index_->network);
  return r;
}

namespace {

// GPUs forward nothing: a shortest path may start and end at one but never pass through one.
// Torus chips do forward (their ICI routers do).
struct NoTransitDevices {
  const BoostGraph* g = nullptr;
  std::size_t src = 0;
  std::size_t dst = 0;
  bool devices_forward = false;
  bool operator()(std::size_t v) const {
    return devices_forward || v == src || v == dst || (*g)[v].kind != VertexKind::Device;
  }
};

template <class G>
std::vector<int> bfs_distances(const G& g, std::size_t from, std::size_t vertices) {
  std::vector<int> dist(vertices, std::numeric_limits<int>::max());
  dist[from] = 0;
  boost::breadth_first_search(
      g, from, boost::visitor(boost::make_bfs_visitor(boost::record_distances(dist.data(), boost::on_tree_edge()))));
  return dist;
}

}  // namespace

Route Topology::route_shortest_paths(DeviceId src, DeviceId dst) const {
  Route r;
  if (src == dst) return r;
  const auto& g = graph_->g;
  const std::size_t n = boost::num_vertices(g);
  const boost::filtered_graph<BoostGraph, boost::keep_all, NoTransitDevices> fg(
      g, boost::keep_all(),
      NoTransitDevices{&g, src.index(), dst.index(), std::holds_alternative<spec::TorusNetwork>(spec_.network)});
  const auto from_src = bfs_distances(fg, src.index(), n);
  const auto to_dst = bfs_distances(boost::make_reverse_graph(fg), dst.index(), n);
  const int total = from_src[dst.index()];
  SIM_ASSERT(total != std::numeric_limits<int>::max(), "no path from device {} to {}", src.value, dst.value);

  // Vertices on some shortest path, by distance from src; flow splits evenly over next hops.
  std::vector<std::vector<std::size_t>> layers(static_cast<std::size_t>(total) + 1);
  for (std::size_t v = 0; v < n; ++v)
    if (from_src[v] <= total && to_dst[v] <= total && from_src[v] + to_dst[v] == total)
      layers[static_cast<std::size_t>(from_src[v])].push_back(v);
  std::vector<double> flow(n, 0.0);
  std::vector<Duration> latency(n, Duration::zero());
  std::vector<int> switches(n, 0);
  flow[src.index()] = 1.0;
  for (const auto& layer : layers) {
    for (const auto v : layer) {
      std::vector<std::pair<std::size_t, std::uint32_t>> next;
      for (const auto e : boost::make_iterator_range(boost::out_edges(v, fg))) {
        const auto w = boost::target(e, fg);
        if (from_src[w] == from_src[v] + 1 && to_dst[w] + 1 == to_dst[v]) next.emplace_back(w, g[e].link);
      }
      for (const auto& [w, link_id] : next) {
        const double share = flow[v] / static_cast<double>(next.size());
        flow[w] += share;
        r.hops.push_back({LinkId{link_id}, share});
        latency[w] = std::max(latency[w], latency[v] + links_[link_id].latency);
        const bool is_switch = g[w].kind != VertexKind::Device && g[w].kind != VertexKind::Nic;
        switches[w] = std::max(switches[w], switches[v] + (is_switch ? 1 : 0));
        r.crosses_network = r.crosses_network || links_[link_id].cls == LinkClass::Network;
      }
    }
  }
  r.latency = latency[dst.index()];
  r.switches = switches[dst.index()];
  return r;
}

std::size_t Topology::memory_bytes() const {
  const std::size_t vertices = num_vertices();
  const std::size_t edges = links_.size();
  // adjacency_list<vecS, vecS, bidirectionalS>: per vertex two edge vectors and a property; per
  // edge an entry in each of them plus the edge list node.
  const std::size_t graph = vertices * (2 * sizeof(std::vector<int>) + sizeof(VertexProps)) + edges * 64;
  const auto& ix = *index_;
  std::size_t tables = (ix.fabric.up.size() + ix.fabric.down.size() + ix.fabric.mesh.size()) * sizeof(LinkId);
  if (const auto* ft = std::get_if<FatTreeIndex>(&ix.network)) {
    tables += (ft->host_up.size() + ft->host_down.size() + ft->nic_up.size() + ft->nic_down.size() +
               ft->leaf_spine_up.size() + ft->leaf_spine_down.size() + ft->spine_core_up.size() +
               ft->spine_core_down.size()) *
                  sizeof(LinkId) +
              (ft->nic_leaf.size() + ft->leaf_pod.size()) * sizeof(std::uint32_t);
  }
  if (const auto* t = std::get_if<TorusIndex>(&ix.network))
    tables += (t->links.size() + t->host_up.size() + t->host_down.size() + t->nic_up.size() + t->nic_down.size()) *
              sizeof(LinkId);
  return links_.size() * sizeof(Link) + graph + tables;
}

}  // namespace trainsim::topo
