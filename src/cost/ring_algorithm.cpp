// Ring algorithms (Patarasuk & Yuan 2009; NCCL): `channels` rings, each moving 1/channels of the
// data. All-reduce: 2(n−1) steps of S/n per rank, time = 2(n−1)/n · S / B + 2(n−1)·α;
// reduce-scatter and all-gather: (n−1) steps, (n−1)/n · S / B + (n−1)·α. Broadcast and reduce run
// as a pipelined chain from the root: S / B + (n−1)·α. B is the ring's slowest link. Once a ring
// leaves the node every step waits on the network proxy's progress: its hops inside a node cost at
// least the proxy's step latency (NCCL src/graph/tuning.cc: max(intraLat, netOverhead) per intra-node
// step when nNodes > 1), so a ring's latency grows with its ranks, not its nodes.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {
namespace {

class RingAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "ring"; }
  std::string_view description() const override { return "rings over the group, one per channel, rail-aligned"; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    const bool chain = kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce;
    if (kind == CollectiveKind::AllToAll || kind == CollectiveKind::SendRecv) return std::nullopt;
    const int n = group.size();
    const int channels = tuning.channels;
    const auto slices = slices_by_node(group, topo);
    const double n_d = n;
    const int steps = kind == CollectiveKind::AllReduce ? 2 * (n - 1) : n - 1;
    const double per_hop = (chain ? 1.0 : steps / n_d) / channels;

    LoadAccumulator acc(topo);
    Duration lap = Duration::zero();
    int network_hops = 0;  // per lap (or along the chain)
    const Duration floor = slices.size() > 1 ? tuning.proxy_step_latency : Duration::zero();
    for (int c = 0; c < channels; ++c) {
      auto order = ring_order(slices, c);
      if (chain) {
        // the root (the group's first device) starts the chain; the hop back into it is unused
        std::rotate(order.begin(), std::find(order.begin(), order.end(), group.devices.front()), order.end());
        Duration path = Duration::zero();
        for (std::size_t i = 0; i + 1 < order.size(); ++i) {
          path += acc.add_flow(order[i], order[i + 1], per_hop);
          if (c == 0 && topo.node_of(order[i]) != topo.node_of(order[i + 1])) ++network_hops;
        }
        if (c == 0) lap = path;
      } else {
        const Duration l = add_ring(acc, order, per_hop, floor, c == 0 ? &network_hops : nullptr);
        if (c == 0) lap = l;
      }
    }
    Phase phase{.description = fmt::format("{} over {} ranks", chain ? "pipelined chain" : "ring", n),
                .bus_bytes_per_byte = bus_factor(kind, n),
                .pipeline_steps = steps,
                .chunk_divisor = chain ? channels : n_d * channels};
    // a chunk travels `steps` hops, crossing the ring's links in turn: steps/n laps
    phase.latency = chain ? lap : Duration::from_seconds(lap.seconds() * steps / n_d);
    phase.net_steps = chain ? network_hops : static_cast<int>(std::lround(network_hops * steps / n_d));
    finish_phase(phase, acc, topo);
    return CollectivePlan{.algorithm = "ring", .kind = kind, .ranks = n, .channels = channels, .phases = {phase}};
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_ring_algorithm() {
  return std::make_unique<RingAlgorithm>();
}

}  // namespace trainsim::cost
