#pragma once
// The cluster: one device type, nodes of devices joined by an intra-node fabric, and a network
// between nodes (docs/cli.md, topologies/*.json). Plain values, units resolved.
//
// A node is a scale-up domain: the devices one NVSwitch fabric (up to a 576-GPU NVLink domain) or
// one full mesh of links (AMD Infinity Fabric) joins. Its hosts — the trays or servers that carry
// CPUs and NICs and fail as a unit — are `host_devices` devices each (the whole node by default).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/spec/device_spec.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::spec {

enum class FabricKind { None, NvSwitch, Pcie, FullMesh };

struct FabricSpec {
  FabricKind kind = FabricKind::None;
  std::string link;                   // its link catalogue entry ("" for figures given in full)
  Bandwidth bandwidth;                // per device, per direction (a full mesh: all its links)
  int links = 0;                      // links per device, where known (0: not stated)
  Duration latency;                   // one device-to-device message step
  double efficiency = 1.0;            // usable share of the line rate (nccl-tests busbw plateau / line rate)
  bool in_network_reduction = false;  // NVLink SHARP (NVLS)
  friend bool operator==(const FabricSpec&, const FabricSpec&) = default;
};

struct NodeSpec {
  // The scale-up domain, or the part of it a job's segment takes (spec::allocated_part).
  int devices = 1;
  int host_devices = 1;  // devices per host (tray); divides `devices`
  int idle_hosts = 0;    // hosts of the domain a segment leaves idle beside `devices`
  FabricSpec fabric;
  int hosts() const { return devices / host_devices; }
  int domain_devices() const { return devices + idle_hosts * host_devices; }  // the whole domain
  friend bool operator==(const NodeSpec&, const NodeSpec&) = default;
};

// A single node: no network.
struct NoNetwork {
  friend bool operator==(const NoNetwork&, const NoNetwork&) = default;
};

// Full bisection inside a pod of `devices`, `oversubscription`:1 on links between pods.
struct PodSpec {
  std::int64_t devices = 0;
  double oversubscription = 1.0;
  friend bool operator==(const PodSpec&, const PodSpec&) = default;
};

// Two- or three-tier fat tree (leaf/spine[/core]) of NICs.
struct LeafSpineNetwork {
  std::string link;  // its link catalogue entry ("" for figures given in full)
  int nics_per_node = 1;
  Bandwidth nic_bandwidth;  // per NIC, per direction
  int leaf_radix = 0;       // ports per leaf switch (half down, half up at 1:1)
  int spine_radix = 0;
  int tiers = 2;
  double oversubscription = 1.0;  // leaf downlink:uplink ratio
  bool rail_optimized = true;
  // independent fat trees, NIC r of a node on plane r mod planes (DeepSeek's multi-plane fat tree;
  // a rail-only network: as many planes as NICs per node); traffic between planes is forwarded
  // inside the source node to the device whose NIC is on the destination's plane (NCCL's PXN)
  int planes = 1;
  Duration latency;                   // NIC to NIC through one leaf, software included
  Duration switch_latency;            // each further switch crossed
  double efficiency = 1.0;            // usable share of the NIC line rate
  bool in_network_reduction = false;  // SHARP
  std::optional<PodSpec> pods;
  friend bool operator==(const LeafSpineNetwork&, const LeafSpineNetwork&) = default;
};

// The data-centre network (DCN) that joins the slices of a multislice TPU job: each host of
// `chips_per_host` chips sends through its `nics_per_host` NICs into the data centre's fabric,
// taken as non-blocking (Google's Jupiter).
struct DcnNetwork {
  std::string link;  // its link catalogue entry ("" for figures given in full)
  int chips_per_host = 1;
  int nics_per_host = 1;
  Bandwidth nic_bandwidth;  // per NIC, per direction
  Duration latency;         // NIC to NIC, software included
  double efficiency = 1.0;  // usable share of the NIC line rate
  friend bool operator==(const DcnNetwork&, const DcnNetwork&) = default;
};

// TPU-style torus (or mesh without wraparound) of chip-to-chip links; `slices` such tori (slices of
// a pod, or of several pods) joined by the data-centre network. Devices are numbered slice by
// slice, and in a slice by coordinates, the first dimension fastest.
struct TorusNetwork {
  std::string link;  // its link catalogue entry ("" for figures given in full)
  std::vector<int> dims;
  Bandwidth link_bandwidth;  // per link, per direction
  std::vector<bool> wraparound;  // per dimension: links from the last chip back to the first
  Duration latency;              // per hop
  double efficiency = 1.0;
  int slices = 1;
  std::optional<DcnNetwork> dcn;  // required with several slices
  std::int64_t slice_devices() const {
    std::int64_t n = 1;
    for (const int d : dims) n *= d;
    return n;
  }
  friend bool operator==(const TorusNetwork&, const TorusNetwork&) = default;
};

using NetworkSpec = std::variant<NoNetwork, LeafSpineNetwork, TorusNetwork>;

struct ClusterSpec {
  std::string name;
  DeviceSpec device;
  std::int64_t nodes = 1;
  NodeSpec node;
  NetworkSpec network;
  std::vector<std::string> warnings;  // defaults assumed for figures the file left out

  std::int64_t num_devices() const { return nodes * node.devices; }
  // Devices per host, the unit a host failure takes out: a tray of a scale-up domain, or on a torus
  // the chips of one host where the topology gives its DCN (else each chip alone).
  int host_devices() const {
    if (const auto* t = std::get_if<TorusNetwork>(&network); t && t->dcn) return t->dcn->chips_per_host;
    return node.host_devices;
  }
  friend bool operator==(const ClusterSpec&, const ClusterSpec&) = default;
};

// Reads and validates a topology; throws SpecError naming `source` with every problem found.
ClusterSpec read_cluster_spec(const nlohmann::json& json, const std::string& source);
ClusterSpec load_cluster_spec(const std::string& path);

inline constexpr std::int64_t kMaxDevices = std::int64_t{1} << 22;
// The largest scale-up domain (NVIDIA's NVL576) and the most NICs a node's hosts can carry.
inline constexpr int kMaxDomainDevices = 576;
inline constexpr int kMaxNicsPerNode = 8 * kMaxDomainDevices;
inline constexpr int kMaxSwitchRadix = 1024;  // twice the largest switch ASIC's 512 ports

}  // namespace trainsim::spec
