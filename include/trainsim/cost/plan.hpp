#pragma once
// A collective on a group, laid out on the topology: sequential phases, each with the bytes it puts
// on every link per payload byte, its bottleneck and its latency. Plans do not depend on the
// message size, so they are computed once per (operation, group, algorithm) and evaluated for any
// size in constant time. The per-link loads are what the engine shares bandwidth with.
#include <string>
#include <vector>

#include "trainsim/cost/collective.hpp"
#include "trainsim/cost/tuning.hpp"
#include "trainsim/topo/topology.hpp"

namespace trainsim::cost {

struct LinkLoad {
  topo::LinkId link;
  double bytes_per_byte = 0;  // bytes crossing the link per payload byte of the collective
  friend bool operator==(const LinkLoad&, const LinkLoad&) = default;
};

struct Phase {
  std::string description;
  std::vector<LinkLoad> loads;
  double seconds_per_byte = 0;    // the bottleneck: max over links of load / usable bandwidth
  double bus_bytes_per_byte = 0;  // bytes one rank sends per payload byte (LL128's per-channel cap)
  Duration latency;               // every step of the phase under the Simple protocol
  int pipeline_steps = 0;         // steps a chunk travels; Simple fills and drains this pipeline
  double chunk_divisor = 1;       // one step's chunk of a channel is payload / chunk_divisor
  bool simple_only = false;       // in-switch reductions run the Simple protocol only
  // Network steps on a chunk's path (NIC to NIC, through both hosts' proxies): each costs the
  // protocol's collectives.*_net_step_overhead on top of its links' latency, which `latency` holds.
  int net_steps = 0;
  // The payload flows through the network steps as a pipeline of whole chunks (a tree, not a ring,
  // whose steps each move a share of the payload): under LL and LL128 too, each network step
  // delays the last chunk by a chunk-time (Simple's fill already counts every step).
  bool chunked_network = false;
};

struct CollectivePlan {
  std::string algorithm;
  CollectiveKind kind = CollectiveKind::AllReduce;
  int ranks = 0;
  int channels = 1;
  std::vector<Phase> phases;
  // Loads of all phases merged, sorted by link.
  std::vector<LinkLoad> total_loads() const;
};

struct CollectiveCost {
  Duration time;
  Duration latency;  // of `time`: launch and step latencies, not shared with other traffic
  std::string algorithm;
  Protocol protocol = Protocol::Simple;
  double algbw_Bps = 0;                  // bytes / time
  double busbw_Bps = 0;                  // algbw × bus_factor (nccl-tests)
  const CollectivePlan* plan = nullptr;  // borrowed from the cost model's cache
};

// Time of the plan for `bytes` under the protocol that is fastest (as NCCL picks it).
CollectiveCost evaluate(const CollectivePlan& plan, Bytes bytes, const CollectiveTuning& tuning);
CollectiveCost evaluate(const CollectivePlan& plan, Bytes bytes, const CollectiveTuning& tuning, Protocol protocol);

// max over links of load / usable bandwidth; `efficiency` replaces the links' own when given.
double bottleneck_seconds_per_byte(const std::vector<LinkLoad>& loads, const topo::Topology& topo,
                                   double efficiency = 0);

}  // namespace trainsim::cost
