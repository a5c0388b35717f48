#pragma once
// The cluster: one device type, nodes of devices joined by an intra-node fabric, and a network
// between nodes (docs/cli.md, topologies/*.json). Plain values, units resolved.
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

enum class FabricKind { None, NvSwitch, Pcie };

struct FabricSpec {
  FabricKind kind = FabricKind::None;
  Bandwidth bandwidth;                // per device, per direction
  Duration latency;                   // one device-to-device message step
  double efficiency = 1.0;            // usable share of the line rate (nccl-tests busbw plateau / line rate)
  bool in_network_reduction = false;  // NVLink SHARP (NVLS)
  friend bool operator==(const FabricSpec&, const FabricSpec&) = default;
};

struct NodeSpec {
  int devices = 1;
  FabricSpec fabric;
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
  int nics_per_node = 1;
  Bandwidth nic_bandwidth;  // per NIC, per direction
  int leaf_radix = 0;       // ports per leaf switch (half down, half up at 1:1)
  int spine_radix = 0;
  int tiers = 2;
  double oversubscription = 1.0;  // leaf downlink:uplink ratio
  bool rail_optimized = true;
  Duration latency;                   // NIC to NIC through one leaf, software included
  Duration switch_latency;            // each further switch crossed
  double efficiency = 1.0;            // usable share of the NIC line rate
  bool in_network_reduction = false;  // SHARP
  std::optional<PodSpec> pods;
  friend bool operator==(const LeafSpineNetwork&, const LeafSpineNetwork&) = default;
};

// TPU-style torus (or mesh without wraparound) of chip-to-chip links.
struct TorusNetwork {
  std::vector<int> dims;
  Bandwidth link_bandwidth;  // per link, per direction
  bool wraparound = true;
  Duration latency;  // per hop
  double efficiency = 1.0;
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
  friend bool operator==(const ClusterSpec&, const ClusterSpec&) = default;
};

// Reads and validates a topology; throws SpecError naming `source` with every problem found.
ClusterSpec read_cluster_spec(const nlohmann::json& json, const std::string& source);
ClusterSpec load_cluster_spec(const std::string& path);

inline constexpr std::int64_t kMaxDevices = std::int64_t{1} << 22;

}  // namespace trainsim::spec
