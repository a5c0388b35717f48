// Hierarchical all-reduce (as Horovod and NCCL's CollNet chain do it): reduce-scatter inside each
// node, all-reduce of each 1/ppn shard across nodes among the devices at the same position (one
// ring per position, each on its own rail), all-gather inside each node:
// time ≈ 2·(ppn−1)/ppn · S / B_node + 2·(N−1)/N · (S/ppn) / B_rail + latencies.
#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {

namespace {

class HierarchicalAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "hier"; }
  std::string_view description() const override {
    return "intra-node reduce-scatter, inter-node all-reduce per rail, intra-node all-gather";
  }
  // NCCL runs this shape only as CollNet, with a network-reduction plugin (the `sharp` algorithm);
  // without one it chooses among its rings and trees, so `auto` does too.
  bool chosen_by_auto() const override { return false; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    if (kind != CollectiveKind::AllReduce) return std::nullopt;
    const auto slices = slices_by_node(group, topo);
    if (slices.size() < 2 || !same_size_slices(slices) || slices.front().devices.size() < 2) return std::nullopt;
    const int channels = tuning.channels;
    const std::size_t m = slices.front().devices.size();
    const double nodes = static_cast<double>(slices.size());

    LoadAccumulator inter_acc(topo);
    Duration lap = Duration::zero();
    for (std::size_t p = 0; p < m; ++p) {
      std::vector<topo::DeviceId> ring;
      for (const auto& s : slices) ring.push_back(s.devices[p]);
      lap = std::max(lap, add_ring(inter_acc, ring, 2 * (nodes - 1) / nodes / static_cast<double>(m)));
    }
    Phase inter{.description = fmt::format("all-reduce of 1/{} shards across {} nodes", m, slices.size()),
                .bus_bytes_per_byte = 2 * (nodes - 1) / nodes / static_cast<double>(m),
                .latency = Duration::from_seconds(lap.seconds() * 2 * (nodes - 1) / nodes),
                .pipeline_steps = 2 * (static_cast<int>(nodes) - 1),
                .chunk_divisor = nodes * static_cast<double>(m) * channels,
                .net_steps = 2 * (static_cast<int>(nodes) - 1)};
    finish_phase(inter, inter_acc, topo);
    return CollectivePlan{.algorithm = "hier",
                          .kind = kind,
                          .ranks = group.size(),
                          .channels = channels,
                          .phases = {intra_node_ring_phase(slices, topo, channels, "reduce-scatter inside nodes"),
                                     inter, intra_node_ring_phase(slices, topo, channels, "all-gather inside nodes")}};
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_hierarchical_algorithm() {
  return std::make_unique<HierarchicalAlgorithm>();
}

}  // namespace trainsim::cost
