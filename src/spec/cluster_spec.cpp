#include "trainsim/spec/cluster_spec.hpp"

#include <array>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr std::array<Choice<FabricKind>, 2> kFabricKinds{
    {{"nvswitch", FabricKind::NvSwitch}, {"pcie", FabricKind::Pcie}}};
enum class NetworkKind { LeafSpine, Torus, None };
constexpr std::array<Choice<NetworkKind>, 3> kNetworkKinds{
    {{"leaf_spine", NetworkKind::LeafSpine}, {"torus", NetworkKind::Torus}, {"none", NetworkKind::None}}};

// What the figures of a topology can be and usually are (docs/cli.md "Plausible values").
// NICs: 1 GbE to 3.2 Tb/s (twice NVIDIA ConnectX-8's 1.6 Tb/s ports); usually 10–800 Gb/s.
constexpr Plausibility kNicBandwidth{"a NIC's bandwidth", {1e9 / 8, 3.2e12 / 8}, {10e9 / 8, 800e9 / 8},
                                     "1 Gb/s to 3.2 Tb/s", "10 Gb/s to 800 Gb/s"};
// A device's link into its node: PCIe 3 x4 to twice NVLink 5 (900 GB/s per direction per GPU).
constexpr Plausibility kFabricBandwidth{"a device's node fabric bandwidth per direction", {10e9, 2e12},
                                        {25e9, 1e12}, "10 GB/s to 2 TB/s", "25 GB/s to 1 TB/s"};
// A torus link (TPU ICI: 50–100 GB/s per link and direction).
constexpr Plausibility kTorusLink{"a torus link's bandwidth", {1e9, 2e12}, {10e9, 400e9}, "1 GB/s to 2 TB/s",
                                  "10 GB/s to 400 GB/s"};
// End-to-end and per-hop latencies: zero (an ideal network) to a millisecond; usually 50 ns–50 us.
constexpr Plausibility kLatencyFigure{"a latency", {0, 1e-3}, {50e-9, 50e-6}, "0 to 1 ms", "50 ns to 50 us"};
constexpr NumberRange kLatency{0, 1.0};                      // up to a second
constexpr NumberRange kEfficiency{0, 1.0, true};
// Defaults for figures a topology may leave out; each assumption is reported as a warning.
constexpr double kDefaultEfficiency = 0.8;
constexpr double kDefaultSwitchLatencyS = 300e-9;  // an InfiniBand/Ethernet switch crossing

double efficiency_or_default(Reader& r, std::string_view where, std::vector<std::string>& warnings) {
  if (!r.has("efficiency")) {
    warnings.push_back(fmt::format("{}.efficiency not given: assumed {}", where, kDefaultEfficiency));
    return kDefaultEfficiency;
  }
  return r.number("efficiency", kEfficiency);
}

FabricSpec read_fabric(Reader r, std::vector<std::string>& warnings) {
  FabricSpec f;
  f.kind = r.choice<FabricKind>("kind", kFabricKinds);
  f.bandwidth = {r.plausible_quantity("bandwidth", QuantityKind::Bandwidth, kFabricBandwidth, warnings)};
  f.latency = Duration::from_seconds(r.plausible_quantity("latency", QuantityKind::Duration, kLatencyFigure, warnings));
  f.efficiency = efficiency_or_default(r, "node.fabric", warnings);
  f.in_network_reduction = r.boolean_or("in_network_reduction", false);
  r.finish();
  return f;
}

NodeSpec read_node(Reader r, std::vector<std::string>& warnings) {
  NodeSpec n;
  n.devices = static_cast<int>(r.integer("devices", {1, 64}));
  if (auto fabric = r.optional_object("fabric")) {
    n.fabric = read_fabric(*fabric, warnings);
  } else if (n.devices > 1) {
    r.error_at("fabric",
               "missing; a node of several devices needs a fabric such as "
               "{\"kind\": \"nvswitch\", \"bandwidth\": \"300 GB/s\", \"latency\": \"3 us\"}");
  }
  r.finish();
  return n;
}

// Endpoints a fat tree of `tiers` levels of radix-k switches connects at full bisection (k^2/2, k^3/4),
// scaled by the leaf's oversubscription (more ports down than up).
double fat_tree_capacity(int radix, int tiers, double oversubscription) {
  const double k = radix;
  const double leaf_down = k * oversubscription / (1.0 + oversubscription);
  return tiers == 2 ? leaf_down * k : leaf_down * k * k / 2.0;
}

LeafSpineNetwork read_leaf_spine(Reader r, std::int64_t nodes, std::vector<std::string>& warnings) {
  LeafSpineNetwork n;
  n.nics_per_node = static_cast<int>(r.integer("nics_per_node", {1, 64}));
  n.nic_bandwidth = {r.plausible_quantity("nic_bandwidth", QuantityKind::Bandwidth, kNicBandwidth, warnings)};
  n.leaf_radix = static_cast<int>(r.integer("leaf_radix", {2, 4096}));
  n.spine_radix = static_cast<int>(r.integer_or("spine_radix", n.leaf_radix, {2, 4096}));
  n.oversubscription = r.number_or("oversubscription", 1.0, {1.0, 64.0});
  n.rail_optimized = r.boolean_or("rail_optimized", false);
  n.latency = Duration::from_seconds(r.plausible_quantity("latency", QuantityKind::Duration, kLatencyFigure, warnings));
  if (!r.has("switch_latency"))
    warnings.push_back(fmt::format("network.switch_latency not given: assumed {} ns", kDefaultSwitchLatencyS * 1e9));
  n.switch_latency = Duration::from_seconds(
      r.optional_quantity("switch_latency", QuantityKind::Duration, kLatency).value_or(kDefaultSwitchLatencyS));
  n.efficiency = efficiency_or_default(r, "network", warnings);
  n.in_network_reduction = r.boolean_or("in_network_reduction", false);
  const double endpoints = static_cast<double>(nodes) * n.nics_per_node;
  if (const auto tiers = r.optional_integer("tiers", {2, 3})) {
    n.tiers = static_cast<int>(*tiers);
    const double capacity = fat_tree_capacity(n.leaf_radix, n.tiers, n.oversubscription);
    if (capacity < endpoints)
      r.error_at("tiers",
                 fmt::format("{} tiers of radix-{} switches connect at most {:.0f} NICs; the cluster has {:.0f}",
                             n.tiers, n.leaf_radix, capacity, endpoints));
  } else {
    n.tiers = fat_tree_capacity(n.leaf_radix, 2, n.oversubscription) >= endpoints ? 2 : 3;
    if (fat_tree_capacity(n.leaf_radix, 3, n.oversubscription) < endpoints)
      r.error_at("leaf_radix",
                 fmt::format("three tiers of radix-{} switches cannot connect {:.0f} NICs", n.leaf_radix, endpoints));
  }
  if (auto pods = r.optional_object("pods")) {
    PodSpec p;
    p.devices = pods->integer("devices", {1, kMaxDevices});
    p.oversubscription = pods->number_or("oversubscription", 1.0, {1.0, 1024.0});
    pods->finish();
    n.pods = p;
  }
  r.finish();
  return n;
}

TorusNetwork read_torus(Reader r, std::vector<std::string>& warnings) {
  TorusNetwork t;
  for (const auto d : r.integer_list("dims", {1, 4096}, 1, 3)) t.dims.push_back(static_cast<int>(d));
  t.link_bandwidth = {r.plausible_quantity("link_bandwidth", QuantityKind::Bandwidth, kTorusLink, warnings)};
  t.wraparound = r.boolean_or("wraparound", true);
  t.latency = Duration::from_seconds(r.plausible_quantity("latency", QuantityKind::Duration, kLatencyFigure, warnings));
  t.efficiency = efficiency_or_default(r, "network", warnings);
  r.finish();
  return t;
}

void check_cross_fields(ClusterSpec& c, Reader& root, Diagnostics& diagnostics) {
  if (!diagnostics.empty()) return;
  if (c.num_devices() > kMaxDevices) {
    root.error_at("nodes", fmt::format("{} nodes of {} devices exceed the supported maximum of {} devices", c.nodes,
                                       c.node.devices, kMaxDevices));
    return;
  }
  if (const auto* ls = std::get_if<LeafSpineNetwork>(&c.network)) {
    const int d = c.node.devices;
    const int nics = ls->nics_per_node;
    if (d % nics != 0 && nics % d != 0)
      root.error_at("network/nics_per_node",
                    fmt::format("{} NICs cannot be shared evenly by {} devices per node", nics, d));
    if (ls->pods && (ls->pods->devices % d != 0 || ls->pods->devices > c.num_devices()))
      diagnostics.add("/network/pods/devices",
                      fmt::format("{} must be a multiple of node.devices ({}) and at most the cluster's {} devices",
                                  ls->pods->devices, d, c.num_devices()));
  }
}

}  // namespace

ClusterSpec read_cluster_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  ClusterSpec c;
  c.name = root.string("name");
  root.sources();
  c.device = read_device_value(root, source, c.warnings);

  Reader network = root.object("network");
  std::optional<NetworkKind> kind;
  if (root.has("network") && json.at("network").is_object()) {
    if (!network.has("kind")) network.error_at("kind", "missing; expected one of: leaf_spine, torus, none");
    kind = network.optional_choice<NetworkKind>("kind", kNetworkKinds);
  }
  if (!kind) {
    for (const auto* key : {"nodes", "node"}) root.value(key);  // known, but unread without a network kind
    root.finish();
    diagnostics.throw_if_any(source);
  }
  if (kind == NetworkKind::Torus) {
    for (const auto* key : {"nodes", "node"})
      if (root.has(key)) root.error_at(key, "not used with a torus network: its dims give the devices");
    c.network = read_torus(network, c.warnings);
    c.nodes = 1;
    for (const int d : std::get<TorusNetwork>(c.network).dims) c.nodes *= d;
    c.node = NodeSpec{.devices = 1, .fabric = {}};
  } else {
    c.nodes = kind == NetworkKind::None ? root.integer_or("nodes", 1, {1, 1}) : root.integer("nodes", {1, kMaxDevices});
    if (auto node = root.optional_object("node"))
      c.node = read_node(*node, c.warnings);
    else
      root.error_at("node", "missing; expected an object such as {\"devices\": 8, \"fabric\": {...}}");
    if (kind == NetworkKind::LeafSpine) {
      c.network = read_leaf_spine(network, c.nodes, c.warnings);
    } else {
      c.network = NoNetwork{};
      network.finish();
    }
  }
  root.finish();
  check_cross_fields(c, root, diagnostics);
  diagnostics.throw_if_any(source);
  return c;
}

ClusterSpec load_cluster_spec(const std::string& path) {
  return read_cluster_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
