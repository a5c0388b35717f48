#include <doctest/doctest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "common/clusters.hpp"
#include "common/paths.hpp"
#include "trainsim/topo/topology.hpp"

using namespace trainsim;
using namespace trainsim::topo;

namespace {

std::map<std::uint32_t, double> by_link(const Route& r) {
  std::map<std::uint32_t, double> out;
  for (const auto& h : r.hops) out[h.link.value] += h.fraction;
  return out;
}

void check_same_routes(const Topology& topo, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) {
  for (const auto& pair : pairs) {
    const auto a = pair.first;  // not a structured binding: CAPTURE's lambda takes it by reference
    const auto b = pair.second;
    CAPTURE(a);
    CAPTURE(b);
    const auto fast = topo.route(DeviceId{a}, DeviceId{b});
    const auto reference = topo.route_shortest_paths(DeviceId{a}, DeviceId{b});
    const auto f = by_link(fast);
    const auto r = by_link(reference);
    REQUIRE(f.size() == r.size());
    for (const auto& [link, share] : r) CHECK(f.at(link) == doctest::Approx(share));
    CHECK(fast.latency == reference.latency);
    CHECK(fast.switches == reference.switches);
  }
}

}  // namespace

TEST_CASE("a four-node rail-optimised fat tree has the switches and links it should") {
  const auto topo = Topology::build(test::fat_tree_cluster(4, 40, true, 2));
  // 32 GPUs, 4 NVSwitches, 8 rail leaves, 32 NICs, 20 spines (a radix-40 leaf has 20 ports up)
  CHECK(topo.num_vertices() == 32 + 4 + 8 + 32 + 20);
  // per direction: 32 NVLink, 32 NIC-leaf, 32 GPU-NIC, 8 × 20 leaf-spine
  CHECK(topo.num_links() == 2 * (32 + 32 + 32 + 8 * 20));
}

TEST_CASE("structural routes equal shortest paths with ECMP on the graph") {
  SUBCASE("two tiers, rail-optimised") {
    check_same_routes(Topology::build(test::fat_tree_cluster(6, 16, true, 2)),
                      {{0, 1}, {0, 8}, {0, 11}, {3, 45}, {47, 2}, {9, 9 + 16}});
  }
  SUBCASE("two tiers, NICs filling leaves in order") {
    check_same_routes(Topology::build(test::fat_tree_cluster(6, 16, false, 2)), {{0, 8}, {0, 40}, {7, 33}, {12, 13}});
  }
  SUBCASE("three tiers, oversubscribed leaves") {
    check_same_routes(Topology::build(test::fat_tree_cluster(12, 8, true, 3, {{"oversubscription", 3.0}})),
                      {{0, 8}, {0, 95}, {17, 60}, {5, 88}});
  }
  SUBCASE("three tiers with pods") {
    check_same_routes(Topology::build(test::fat_tree_cluster(16, 8, false, 3,
                                                             {{"pods", {{"devices", 32}, {"oversubscription", 7}}}})),
                      {{0, 31}, {0, 32}, {3, 127}, {64, 65}});
  }
}

TEST_CASE("a group inside one node never touches a NIC") {
  const auto topo = Topology::build(test::fat_tree_cluster(2, 40, true, 2));
  for (std::uint32_t a = 0; a < 8; ++a)
    for (std::uint32_t b = 0; b < 8; ++b)
      for (const auto& hop : topo.route(DeviceId{a}, DeviceId{b}).hops)
        CHECK(topo.link(hop.link).cls == LinkClass::Fabric);
}

TEST_CASE("rail-optimised traffic between equal GPUs stays under one leaf") {
  const auto topo = Topology::build(test::fat_tree_cluster(4, 40, true, 2));
  const auto same_rail = topo.route(DeviceId{3}, DeviceId{8 + 3});
  CHECK(same_rail.switches == 1);
  CHECK(same_rail.latency == microseconds(5));
  const auto cross_rail = topo.route(DeviceId{3}, DeviceId{8 + 4});
  CHECK(cross_rail.switches == 3);
  CHECK(cross_rail.latency == microseconds(5) + nanoseconds(260));
}

TEST_CASE("leaf oversubscription leaves fewer uplinks") {
  // radix 64 at 3:1 → 48 ports down, 16 up: 16 spines
  const auto topo = Topology::build(test::fat_tree_cluster(8, 64, false, 2, {{"oversubscription", 3.0}}));
  std::size_t spines = 0;
  for (std::size_t v = 0; v < topo.num_vertices(); ++v)
    spines += topo.vertex_kind(VertexId{static_cast<std::uint32_t>(v)}) == VertexKind::Spine;
  CHECK(spines == 16);
}

TEST_CASE("torus routes are shortest and split ties between both ways") {
  const auto topo = Topology::build(test::torus_cluster({4, 4, 4}, true));
  CHECK(topo.num_links() == 64 * 6);
  for (const auto& pair :
       std::vector<std::pair<std::uint32_t, std::uint32_t>>{{0, 1}, {0, 3}, {0, 2}, {0, 63}, {5, 42}}) {
    const auto a = pair.first;
    const auto b = pair.second;
    CAPTURE(a);
    CAPTURE(b);
    const auto fast = topo.route(DeviceId{a}, DeviceId{b});
    const auto reference = topo.route_shortest_paths(DeviceId{a}, DeviceId{b});
    CHECK(fast.latency == reference.latency);  // as many hops as the shortest path
    double out_of_source = 0;
    for (const auto& h : fast.hops)
      if (topo.link(h.link).from == topo.vertex_of(DeviceId{a})) out_of_source += h.fraction;
    CHECK(out_of_source == doctest::Approx(1.0));
  }
  // two hops either way around a ring of four: half the flow each way
  const auto tie = topo.route(DeviceId{0}, DeviceId{2});
  CHECK(tie.hops.size() == 4);
  CHECK(tie.hops.front().fraction == 0.5);
}

TEST_CASE("a mesh without wraparound routes the long way round") {
  const auto topo = Topology::build(test::torus_cluster({4}, false));
  CHECK(topo.num_links() == 6);
  CHECK(topo.route(DeviceId{0}, DeviceId{3}).hops.size() == 3);
  CHECK(topo.route(DeviceId{3}, DeviceId{0}).latency == microseconds(6));
}

TEST_CASE("slices of a torus: ICI inside each, the hosts' NICs and the data-centre network between") {
  const auto topo = Topology::build(test::multislice_cluster({4, 4}, 2));
  // 2 slices x 16 chips x 4 torus links, 8 hosts' NICs up and down, every chip to its host and back
  CHECK(topo.num_links() == 2 * 16 * 4 + 8 * 2 + 32 * 2);
  const auto one = Topology::build(test::torus_cluster({4, 4}, true));
  // inside a slice as on a torus of its own, shifted by the slice
  const auto inside = topo.route(DeviceId{16}, DeviceId{21});
  const auto alone = one.route(DeviceId{0}, DeviceId{5});
  REQUIRE(inside.hops.size() == alone.hops.size());
  CHECK(inside.latency == alone.latency);
  for (std::size_t i = 0; i < inside.hops.size(); ++i) {
    CHECK(topo.link(inside.hops[i].link).from.value == one.link(alone.hops[i].link).from.value + 16);
    CHECK(topo.link(inside.hops[i].link).cls == LinkClass::Torus);
  }
  // between slices: chip, its host's NICs, the DCN, the other host's NICs, chip
  const auto across = topo.route(DeviceId{5}, DeviceId{16 + 9});
  REQUIRE(across.hops.size() == 4);
  CHECK(topo.link(across.hops[0].link).cls == LinkClass::Host);
  CHECK(topo.link(across.hops[0].link).bandwidth.bytes_per_s == doctest::Approx(25e9 / 4));  // the chip's share
  CHECK(topo.link(across.hops[1].link).bandwidth.bytes_per_s == doctest::Approx(25e9));  // 2 x 100 Gb/s
  CHECK(across.latency == microseconds(20));
  CHECK(across.switches == 1);
  // chips 4-7 share host 1's NICs; chip 25 is on host 6
  CHECK(topo.route(DeviceId{7}, DeviceId{16}).hops[1].link == across.hops[1].link);
  CHECK(topo.route(DeviceId{24}, DeviceId{0}).hops[1].link == topo.route(DeviceId{25}, DeviceId{1}).hops[1].link);
  // a degraded NIC on a chip slows its host's NICs (both directions)
  auto degraded = Topology::build(test::multislice_cluster({4, 4}, 2));
  CHECK(degraded.degrade_nic(DeviceId{5}, 0.5) == 2);
  // a job on 20 chips reaches two slices of four
  const auto four = test::multislice_cluster({4, 4}, 4);
  CHECK(reachable_part(four, 20).num_devices() == 32);
  CHECK(std::get<spec::TorusNetwork>(reachable_part(four, 20).network).slices == 2);
  CHECK(reachable_part(four, 64) == four);
}

TEST_CASE("a torus wraps around only along the dimensions that have the links") {
  // 8 x 16 v6e slice: a mesh along the 8, a ring along the 16
  auto j = nlohmann::json{{"name", "v6e-8x16"},
                          {"device", "tpu-v6e"},
                          {"network", {{"kind", "torus"}, {"link", "ici-v6e"}, {"dims", {8, 16}}}}};
  const auto topo = Topology::build(spec::read_cluster_spec(j, test::topology("tpu-v6e-pod")));
  CHECK(topo.num_links() == 16 * 7 * 2 + 8 * 16 * 2);
  CHECK(topo.route(DeviceId{0}, DeviceId{7}).hops.size() == 7);       // no way round along x
  CHECK(topo.route(DeviceId{0}, DeviceId{8 * 15}).hops.size() == 1);  // y wraps
}

TEST_CASE("every shipped topology builds, the largest with hundreds of thousands of links") {
  for (const auto& path : test::shipped("topologies")) {
    CAPTURE(path);
    const auto topo = Topology::build(spec::load_cluster_spec(path));
    CHECK(topo.num_devices() == topo.spec().num_devices());
  }
}

TEST_CASE("a job's reachable part: whole leaves or pods around its nodes, links as in the whole cluster") {
  // Llama 3's RoCE cluster: pods of 3,072 GPUs (384 nodes: 96 ToR leaves of 32 NIC ports, 8 NICs a
  // node); a 512-GPU job needs 64 nodes, one pod
  const auto llama3 = spec::load_cluster_spec(test::topology("h100-roce-llama3"));
  CHECK(reachable_part(llama3, 512).nodes == 384);
  CHECK(reachable_part(llama3, 3072 + 8).nodes == 768);
  CHECK(reachable_part(llama3, llama3.num_devices()).nodes == llama3.nodes);
  // two tiers, rail-optimised, radix 64: a rail group of leaves serves 32 nodes
  const auto superpod = spec::load_cluster_spec(test::topology("dgx-h100-superpod"));
  CHECK(reachable_part(superpod, 64).nodes == 32);
  CHECK(reachable_part(superpod, 8 * 33).nodes == 64);
  // a torus is whole (a smaller one wraps around elsewhere)
  const auto tpu = spec::load_cluster_spec(test::topology("tpu-v4-pod"));
  CHECK(reachable_part(tpu, 16) == tpu);
  // the part's links from one leaf up are the whole cluster's: the same route between two of its GPUs
  const auto whole = Topology::build(llama3);
  const auto part = Topology::build(reachable_part(llama3, 512));
  CHECK(part.num_devices() == 3072);
  const DeviceId a{0}, b{511};
  const auto ra = whole.route(a, b);
  const auto rb = part.route(a, b);
  CHECK(ra.hops.size() == rb.hops.size());
  CHECK(ra.latency == rb.latency);
  CHECK(ra.switches == rb.switches);
}

TEST_CASE("a multi-plane fat tree is a two-tier fat tree per plane (DeepSeek's MPFT)") {
  // Zhao et al., Insights into DeepSeek-V3 (ISCA 2025) Table 3: eight planes of 64-port 400G
  // switches join 16,384 GPUs in two tiers with 768 switches (per plane 64 leaves and 32 spines);
  // one plane of the same switches needs three tiers (tests/reference/multi_plane.json)
  const auto reference = nlohmann::json::parse(std::ifstream(test::reference("multi_plane.json")));
  const auto& mpft = reference.at("mpft");
  auto j = nlohmann::json::parse(std::ifstream(test::source_path("topologies/deepseek-h800-mpft.json")));
  j["nodes"] = mpft.at("endpoints").template get<int>() / 8;
  const auto cluster = spec::read_cluster_spec(j, "mpft");
  CHECK(std::get<spec::LeafSpineNetwork>(cluster.network).tiers == mpft.at("tiers").template get<int>());
  const auto topo = Topology::build(cluster);
  std::size_t switches = 0;
  for (std::size_t v = 0; v < topo.num_vertices(); ++v) {
    const auto kind = topo.vertex_kind(VertexId{static_cast<std::uint32_t>(v)});
    switches += kind == VertexKind::Leaf || kind == VertexKind::Spine || kind == VertexKind::Core;
  }
  CHECK(switches == mpft.at("switches").template get<std::size_t>());
  j["network"].erase("planes");
  CHECK(std::get<spec::LeafSpineNetwork>(spec::read_cluster_spec(j, "one plane").network).tiers == 3);
}

TEST_CASE("routes inside a plane equal shortest paths; between planes the source node forwards") {
  SUBCASE("two planes, each GPU with a NIC on each (an 800G port as two 400G planes)") {
    const auto two = test::fat_tree_cluster(6, 16, true, 2, {{"nics_per_node", 16}, {"planes", 2}});
    check_same_routes(Topology::build(two), {{0, 1}, {0, 8}, {0, 11}, {3, 45}, {47, 2}, {9, 9 + 16}});
  }
  SUBCASE("rail-only: a plane per NIC") {
    const auto topo = Topology::build(test::fat_tree_cluster(4, 40, true, 2, {{"planes", 8}}));
    const auto same_rail = topo.route(DeviceId{3}, DeviceId{8 + 3});
    CHECK(same_rail.switches == 1);
    CHECK(same_rail.latency == microseconds(5));
    // GPU 3 hands the data over NVLink to GPU 4 of its node, whose NIC is on the destination's plane
    const auto cross_rail = topo.route(DeviceId{3}, DeviceId{8 + 4});
    CHECK(cross_rail.switches == 2);  // the NVSwitch and the rail's leaf: no spine joins planes
    CHECK(cross_rail.latency == microseconds(5) + nanoseconds(200));
    const auto forward = topo.route(DeviceId{3}, DeviceId{4});
    auto hops = by_link(cross_rail);
    for (const auto& hop : forward.hops) CHECK(hops.at(hop.link.value) == 1.0);
    for (const auto& [link, share] : hops) {
      CHECK(share == 1.0);
      CHECK(topo.vertex_kind(topo.link(LinkId{link}).to) != VertexKind::Spine);
    }
    CHECK(topo.link(cross_rail.hops[2].link).from == topo.vertex_of(DeviceId{4}));  // GPU 4's NIC sends
  }
}
