#include "trainsim/spec/cluster_spec.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/spec/link_catalogue.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

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

// A topology's own figure, else its link kind's, else a diagnostic (or, for an efficiency, the
// default with a warning): the figures a topology gives override the link catalogue's.
struct LinkFigures {
  Reader& r;
  const std::optional<LinkKind>& kind;
  std::string_view where;  // "node.fabric", "network"
  std::vector<std::string>& warnings;

  // a link named but not found is reported once, at the link, not again at every figure it left out
  bool unresolved(std::string_view key) { return !kind && r.has("link") && !r.has(key); }

  double efficiency() {
    if (r.has("efficiency")) return r.number("efficiency", kEfficiency);
    if (kind) return kind->efficiency;
    if (unresolved("efficiency")) return kDefaultEfficiency;
    warnings.push_back(fmt::format("{}.efficiency not given: assumed {} (name a link kind of the catalogue to take "
                                   "its measured figure)",
                                   where, kDefaultEfficiency));
    return kDefaultEfficiency;
  }
  Duration latency(const Plausibility& p) {
    if (unresolved("latency")) return {};
    if (r.has("latency") || !kind)
      return Duration::from_seconds(r.plausible_quantity("latency", QuantityKind::Duration, p, warnings));
    return kind->latency;
  }
  Bandwidth rate(std::string_view key, const Plausibility& p) {
    if (unresolved(key)) return {};
    if (r.has(key) || !kind) return {r.plausible_quantity(key, QuantityKind::Bandwidth, p, warnings)};
    return kind->bandwidth;
  }
};

constexpr std::array<Choice<FabricKind>, 3> kFabricKinds{
    {{"nvswitch", FabricKind::NvSwitch}, {"pcie", FabricKind::Pcie}, {"full_mesh", FabricKind::FullMesh}}};

FabricSpec read_fabric(Reader r, int devices, const std::string& source, std::vector<std::string>& warnings) {
  FabricSpec f;
  f.kind = r.choice<FabricKind>("kind", kFabricKinds);
  const auto kind = read_link_value(r, LinkScope::Fabric, source);
  if (kind) f.link = kind->catalogue;
  LinkFigures figures{r, kind, "node.fabric", warnings};
  const bool mesh = f.kind == FabricKind::FullMesh;
  if (const auto links = r.optional_integer("links", {1, 1024}))
    f.links = static_cast<int>(*links);
  else if (mesh)
    f.links = devices - 1;
  else if (kind && kind->links_per_device)
    f.links = *kind->links_per_device;
  if (mesh && f.links != devices - 1)
    r.error_at("links", fmt::format("a full mesh of {} devices has {} links per device, not {}", devices,
                                    devices - 1, f.links));
  if (r.has("bandwidth") || !kind)
    f.bandwidth = figures.rate("bandwidth", kFabricBandwidth);
  else if (f.links > 0)
    f.bandwidth = kind->bandwidth * f.links;
  else
    r.error_at("bandwidth", fmt::format("missing; link \"{}\" gives a link's rate, so give the links per device "
                                        "(\"links\") or the device's bandwidth",
                                        kind->catalogue));
  f.latency = figures.latency(kLatencyFigure);
  f.efficiency = figures.efficiency();
  f.in_network_reduction = r.boolean_or("in_network_reduction", false);
  if (f.in_network_reduction && f.kind != FabricKind::NvSwitch)
    r.error_at("in_network_reduction", "only an NVSwitch fabric reduces in the switch (NVLS)");
  // Switch chips join the domain: each device's links spread over them, one port per link.
  if (const auto switches = r.optional_integer("switches", {1, 4096})) {
    const auto ports = r.integer("switch_ports", {1, 4096});
    if (f.kind != FabricKind::NvSwitch) r.error_at("switches", "only an NVSwitch fabric has switch chips");
    if (f.links == 0) {
      r.error_at("switches", "needs the links per device (\"links\", or a link kind that states them)");
    } else if (static_cast<std::int64_t>(devices) * f.links > *switches * ports) {
      r.error_at("switches", fmt::format("{} devices of {} links need {} switch ports; {} switches of {} ports have {}",
                                         devices, f.links, static_cast<std::int64_t>(devices) * f.links, *switches,
                                         ports, *switches * ports));
    }
  }
  r.finish();
  return f;
}

NodeSpec read_node(Reader r, const std::string& source, std::vector<std::string>& warnings) {
  NodeSpec n;
  n.devices = static_cast<int>(r.integer("devices", {1, kMaxDomainDevices}));
  n.host_devices = n.devices;
  if (auto host = r.optional_object("host")) {
    n.host_devices = static_cast<int>(host->integer("devices", {1, kMaxDomainDevices}));
    if (n.devices % n.host_devices != 0)
      host->error_at("devices", fmt::format("{} devices per host do not divide the node's {}", n.host_devices,
                                            n.devices));
    host->finish();
  }
  if (auto fabric = r.optional_object("fabric")) {
    n.fabric = read_fabric(*fabric, n.devices, source, warnings);
  } else if (n.devices > 1) {
    r.error_at("fabric",
               "missing; a node of several devices needs a fabric such as "
               "{\"kind\": \"nvswitch\", \"link\": \"nvlink4\"}");
  }
  r.finish();
  if (n.host_devices < 1 || n.devices % n.host_devices != 0) n.host_devices = n.devices;
  return n;
}

// Endpoints a fat tree of `tiers` levels of radix-k switches connects at full bisection (k^2/2, k^3/4),
// scaled by the leaf's oversubscription (more ports down than up).
double fat_tree_capacity(int radix, int tiers, double oversubscription) {
  const double k = radix;
  const double leaf_down = k * oversubscription / (1.0 + oversubscription);
  return tiers == 2 ? leaf_down * k : leaf_down * k * k / 2.0;
}

LeafSpineNetwork read_leaf_spine(Reader r, std::int64_t nodes, const std::string& source,
                                 std::vector<std::string>& warnings) {
  LeafSpineNetwork n;
  const auto kind = read_link_value(r, LinkScope::Network, source);
  if (kind) n.link = kind->catalogue;
  LinkFigures figures{r, kind, "network", warnings};
  n.nics_per_node = static_cast<int>(r.integer("nics_per_node", {1, kMaxNicsPerNode}));
  n.nic_bandwidth = figures.rate("nic_bandwidth", kNicBandwidth);
  // ports per switch: the largest switch ASICs have 512 (Broadcom Tomahawk 6 at 200G); twice that
  // leaves room for what-ifs, and bounds the graph a job's reachable part builds (topo::reachable_part)
  n.leaf_radix = static_cast<int>(r.integer("leaf_radix", {2, kMaxSwitchRadix}));
  n.spine_radix = static_cast<int>(r.integer_or("spine_radix", n.leaf_radix, {2, kMaxSwitchRadix}));
  n.oversubscription = r.number_or("oversubscription", 1.0, {1.0, 64.0});
  n.rail_optimized = r.boolean_or("rail_optimized", false);
  n.planes = static_cast<int>(r.integer_or("planes", 1, {1, kMaxNicsPerNode}));
  if (n.nics_per_node % n.planes != 0) {
    r.error_at("planes", fmt::format("{} planes do not divide the node's {} NICs", n.planes, n.nics_per_node));
    n.planes = 1;
  }
  n.latency = figures.latency(kLatencyFigure);
  if (r.has("switch_latency")) {
    n.switch_latency = Duration::from_seconds(r.quantity("switch_latency", QuantityKind::Duration, kLatency));
  } else if (kind && kind->switch_latency) {
    n.switch_latency = *kind->switch_latency;
  } else {
    warnings.push_back(fmt::format("network.switch_latency not given: assumed {} ns", kDefaultSwitchLatencyS * 1e9));
    n.switch_latency = Duration::from_seconds(kDefaultSwitchLatencyS);
  }
  n.efficiency = figures.efficiency();
  n.in_network_reduction = r.boolean_or("in_network_reduction", false);
  // each plane is a fat tree of its own, of the nodes' NICs on it
  const double endpoints = static_cast<double>(nodes) * (n.nics_per_node / n.planes);
  // a radix refused above stands at its range's minimum: no capacity error follows from it
  const auto* radix = r.value("leaf_radix");
  const bool radix_read = radix != nullptr && radix->is_number() && radix->get<double>() == n.leaf_radix;
  const auto tiers = r.optional_integer("tiers", {2, 3});
  if (!radix_read) {
    n.tiers = static_cast<int>(tiers.value_or(3));
  } else if (tiers) {
    n.tiers = static_cast<int>(*tiers);
    const double capacity = fat_tree_capacity(n.leaf_radix, n.tiers, n.oversubscription);
    if (capacity < endpoints)
      r.error_at("tiers",
                 fmt::format("{} tiers of radix-{} switches connect at most {:.0f} NICs; the cluster has {:.0f}{}",
                             n.tiers, n.leaf_radix, capacity, endpoints, n.planes > 1 ? " per plane" : ""));
  } else {
    n.tiers = fat_tree_capacity(n.leaf_radix, 2, n.oversubscription) >= endpoints ? 2 : 3;
    if (fat_tree_capacity(n.leaf_radix, 3, n.oversubscription) < endpoints)
      r.error_at("leaf_radix", fmt::format("three tiers of radix-{} switches cannot connect {:.0f} NICs{}",
                                           n.leaf_radix, endpoints, n.planes > 1 ? " per plane" : ""));
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

// The hosts' NICs into the data-centre network of a multislice job; a network link kind.
DcnNetwork read_dcn(Reader r, std::int64_t slice_devices, const std::string& source,
                    std::vector<std::string>& warnings) {
  DcnNetwork d;
  const auto kind = read_link_value(r, LinkScope::Network, source);
  if (kind) d.link = kind->catalogue;
  LinkFigures figures{r, kind, "network.dcn", warnings};
  d.chips_per_host = static_cast<int>(r.integer("chips_per_host", {1, 64}));
  d.nics_per_host = static_cast<int>(r.integer("nics_per_host", {1, kMaxNicsPerNode}));
  d.nic_bandwidth = figures.rate("nic_bandwidth", kNicBandwidth);
  d.latency = figures.latency(kLatencyFigure);
  d.efficiency = figures.efficiency();
  if (d.chips_per_host > 0 && slice_devices > 0 && slice_devices % d.chips_per_host != 0)
    r.error_at("chips_per_host",
               fmt::format("hosts of {} chips do not divide a slice of {} chips", d.chips_per_host, slice_devices));
  r.finish();
  return d;
}

std::string shape_text(const std::vector<int>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

// The slices the link kind's pod can form (spec::LinkKind::max_slice, cube_side, full_axis): an
// error at /network/dims for a shape it cannot, and which dimensions wrap around.
std::vector<bool> slice_wraparound(Reader& r, const LinkKind& kind, const std::vector<int>& dims) {
  std::vector<bool> wraps(dims.size(), true);
  if (!kind.max_slice.empty()) {
    auto want = dims;
    auto have = kind.max_slice;
    std::sort(want.rbegin(), want.rend());
    std::sort(have.rbegin(), have.rend());
    have.resize(std::max(have.size(), want.size()), 1);
    for (std::size_t k = 0; k < want.size(); ++k)
      if (want[k] > have[k]) {
        r.error_at("dims", fmt::format("on {}, a pod forms slices of at most {}: {} cannot be formed", kind.catalogue,
                                       shape_text(kind.max_slice), shape_text(dims)));
        break;
      }
  }
  if (kind.cube_side > 0) {
    const int c = kind.cube_side;
    const bool whole = std::all_of(dims.begin(), dims.end(), [c](int d) { return d % c == 0; });
    std::int64_t chips = 1;
    for (const int d : dims) chips *= d;
    if (!whole && chips > std::int64_t{c} * c * c)
      r.error_at("dims", fmt::format("on {}, a slice larger than one {}x{}x{} cube is whole cubes: {} is not",
                                     kind.catalogue, c, c, c, shape_text(dims)));
    wraps.assign(dims.size(), whole && dims.size() == 3);
  } else if (kind.full_axis > 0) {
    for (std::size_t k = 0; k < dims.size(); ++k) wraps[k] = dims[k] == kind.full_axis;
  }
  return wraps;
}

// `wraparound`: one boolean for every dimension or one per dimension; by default (and at most) what
// the link kind's pod can do.
std::vector<bool> read_wraparound(Reader& r, const std::optional<LinkKind>& kind, const std::vector<int>& dims) {
  const auto possible = kind ? slice_wraparound(r, *kind, dims) : std::vector<bool>(dims.size(), true);
  const auto* value = r.value("wraparound");
  if (value == nullptr) return possible;
  std::vector<bool> wraps;
  if (value->is_boolean()) {
    wraps.assign(dims.size(), value->get<bool>());
  } else if (value->is_array() && value->size() == dims.size() &&
             std::all_of(value->begin(), value->end(), [](const auto& v) { return v.is_boolean(); })) {
    for (const auto& v : *value) wraps.push_back(v.get<bool>());
  } else {
    r.error_at("wraparound", fmt::format("expected true, false or one boolean per dimension ({}), got {}", dims.size(),
                                         describe(*value)));
    return possible;
  }
  for (std::size_t k = 0; k < dims.size(); ++k)
    if (wraps[k] && !possible[k]) {
      r.error_at("wraparound",
                 fmt::format("on {}, a {} slice has no wraparound links along dimension {} ({} chips){}",
                             kind->catalogue, shape_text(dims), k, dims[k],
                             kind->full_axis > 0 ? fmt::format(": only a full axis of {} wraps", kind->full_axis)
                                                 : std::string(": only slices of whole cubes wrap")));
      break;
    }
  return wraps;
}

TorusNetwork read_torus(Reader r, const std::string& source, std::vector<std::string>& warnings) {
  TorusNetwork t;
  const auto kind = read_link_value(r, LinkScope::Torus, source);
  if (kind) t.link = kind->catalogue;
  LinkFigures figures{r, kind, "network", warnings};
  for (const auto d : r.integer_list("dims", {1, 4096}, 1, 3)) t.dims.push_back(static_cast<int>(d));
  t.link_bandwidth = figures.rate("link_bandwidth", kTorusLink);
  t.wraparound = read_wraparound(r, kind, t.dims);
  t.latency = figures.latency(kLatencyFigure);
  t.efficiency = figures.efficiency();
  t.slices = static_cast<int>(r.integer_or("slices", 1, {1, 4096}));
  if (auto dcn = r.optional_object("dcn"))
    t.dcn = read_dcn(*dcn, t.dims.empty() ? 0 : t.slice_devices(), source, warnings);
  else if (t.slices > 1)
    r.error_at("dcn", fmt::format("missing; {} slices are joined by the data-centre network: give its NICs, such as "
                                  "{{\"link\": \"dcn-200\", \"chips_per_host\": 8, \"nics_per_host\": 4}}",
                                  t.slices));
  r.finish();
  return t;
}

void check_cross_fields(ClusterSpec& c, Reader& root, Diagnostics& diagnostics) {
  if (!diagnostics.empty()) return;
  if (const auto* t = std::get_if<TorusNetwork>(&c.network); t && c.num_devices() > kMaxDevices) {
    diagnostics.add(t->slices > 1 ? "/network/slices" : "/network/dims",
                    fmt::format("{} slices of {} chips exceed the supported maximum of {} devices", t->slices,
                                t->slice_devices(), kMaxDevices));
    return;
  }
  if (c.num_devices() > kMaxDevices) {
    root.error_at("nodes", fmt::format("{} nodes of {} devices exceed the supported maximum of {} devices", c.nodes,
                                       c.node.devices, kMaxDevices));
    return;
  }
  if (const auto* ls = std::get_if<LeafSpineNetwork>(&c.network)) {
    const int d = c.node.devices;
    const int nics = ls->nics_per_node;
    const int hosts = c.node.hosts();
    if (d % nics != 0 && nics % d != 0)
      diagnostics.add("/network/nics_per_node",
                      fmt::format("{} NICs cannot be shared evenly by {} devices per node", nics, d));
    else if (nics % hosts != 0)
      diagnostics.add("/network/nics_per_node",
                    fmt::format("{} NICs cannot be shared evenly by the node's {} hosts of {} devices", nics, hosts,
                                c.node.host_devices));
    if (ls->pods && (ls->pods->devices % d != 0 || ls->pods->devices > c.num_devices()))
      diagnostics.add("/network/pods/devices",
                      fmt::format("{} must be a multiple of node.devices ({}) and at most the cluster's {} devices",
                                  ls->pods->devices, d, c.num_devices()));
    if (ls->planes > 1 && d > 1 && c.node.fabric.kind == FabricKind::None)
      diagnostics.add("/network/planes",
                      "traffic between planes is forwarded inside the node, which needs a node.fabric");
  }
}

}  // namespace

ClusterSpec read_cluster_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  ClusterSpec c;
  // first: it decides how every figure after it is judged
  diagnostics.what_if = root.boolean_or("what_if", false);
  if (diagnostics.what_if)
    c.warnings.push_back(fmt::format("{}: a what-if topology (\"what_if\": true): figures beyond what hardware can be "
                                     "are kept as given",
                                     source));
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
    c.network = read_torus(network, source, c.warnings);
    const auto& torus = std::get<TorusNetwork>(c.network);
    c.nodes = torus.dims.empty() ? 1 : torus.slice_devices() * torus.slices;
    c.node = NodeSpec{.devices = 1, .fabric = {}};
  } else {
    c.nodes = kind == NetworkKind::None ? root.integer_or("nodes", 1, {1, 1}) : root.integer("nodes", {1, kMaxDevices});
    if (auto node = root.optional_object("node"))
      c.node = read_node(*node, source, c.warnings);
    else
      root.error_at("node", "missing; expected an object such as {\"devices\": 8, \"fabric\": {...}}");
    if (kind == NetworkKind::LeafSpine) {
      c.network = read_leaf_spine(network, c.nodes, source, c.warnings);
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
