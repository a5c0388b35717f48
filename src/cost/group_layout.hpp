#pragma once
// Shared by the algorithms: a group split by node, ring orders that keep inter-node hops on one
// rail, and accumulation of routed flows into per-link loads. Private to cost/.
#include <unordered_map>
#include <vector>

#include "trainsim/cost/collective.hpp"
#include "trainsim/cost/plan.hpp"
#include "trainsim/topo/topology.hpp"

namespace trainsim::cost {

struct NodeSlice {
  std::int64_t node = 0;
  std::vector<topo::DeviceId> devices;  // ascending
};

// The group's devices by node, nodes ascending.
std::vector<NodeSlice> slices_by_node(const Group& group, const topo::Topology& topo);
bool same_size_slices(const std::vector<NodeSlice>& slices);

// Channel `c`'s ring. On one node the devices rotate by c. Across nodes each node is entered and
// left on the rails c and c+1 in turn (node k enters where node k−1 left), so every inter-node hop
// stays on one rail and every NIC carries one channel each way, as NCCL's rail-aware rings do.
std::vector<topo::DeviceId> ring_order(const std::vector<NodeSlice>& slices, int channel);

// Adds routed flows into per-link loads.
class LoadAccumulator {
 public:
  explicit LoadAccumulator(const topo::Topology& topo) : topo_(&topo) {}
  // A flow of `scale` bytes per payload byte from `src` to `dst`; returns its route's latency.
  Duration add_flow(topo::DeviceId src, topo::DeviceId dst, double scale);
  std::vector<LinkLoad> finish() const;  // sorted by link
  const topo::Topology& topology() const { return *topo_; }

 private:
  const topo::Topology* topo_;
  std::unordered_map<std::uint32_t, double> loads_;
};

// A ring over `order` moving `scale` bytes per payload byte along every hop; returns the sum of the
// hop latencies (one lap), a hop inside a node costing at least `intra_floor`; `network_hops` (when
// given) counts the hops between nodes (Phase::net_steps).
Duration add_ring(LoadAccumulator& acc, const std::vector<topo::DeviceId>& order, double scale,
                  Duration intra_floor = Duration::zero(), int* network_hops = nullptr);

// Fills a phase's bottleneck from its loads.
void finish_phase(Phase& phase, const LoadAccumulator& acc, const topo::Topology& topo, double efficiency = 0);

// Reduce-scatter or all-gather inside every node of `slices` at once (rings of the node's
// devices, one per channel): (m−1)/m of the payload per rank.
Phase intra_node_ring_phase(const std::vector<NodeSlice>& slices, const topo::Topology& topo, int channels,
                            std::string description);

}  // namespace trainsim::cost
