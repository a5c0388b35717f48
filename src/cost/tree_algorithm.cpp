// Double binary tree all-reduce across nodes (Sanders, Speck & Träff 2009; NCCL 2.4): inside each
// node the devices form a chain to the node's head, and the heads form two binary trees in which
// every interior node of one is a leaf of the other. Each tree reduces half of the data up and
// broadcasts it down, pipelined: time ≈ S / B + 2·(log2(nodes)·α_net + (ppn−1)·α_node).
#include <cmath>

#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {
namespace {

// Parent of node i in tree `t` over `n` nodes: a heap for t = 0, its mirror image for t = 1.
std::optional<std::size_t> tree_parent(std::size_t i, std::size_t n, int t) {
  const std::size_t j = t == 0 ? i : n - 1 - i;
  if (j == 0) return std::nullopt;
  const std::size_t p = (j - 1) / 2;
  return t == 0 ? p : n - 1 - p;
}

class TreeAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "tree"; }
  std::string_view description() const override { return "double binary tree across nodes, chains inside them"; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    if (kind != CollectiveKind::AllReduce) return std::nullopt;
    const auto slices = slices_by_node(group, topo);
    if (slices.size() < 2) return std::nullopt;
    const int channels = tuning.channels;
    const double per_channel = 1.0 / channels;  // each channel-tree carries its share up and down
    LoadAccumulator acc(topo);
    Duration intra = Duration::zero();
    Duration inter = Duration::zero();
    std::size_t longest_chain = 1;
    for (int c = 0; c < channels; ++c) {
      const int t = c % 2;
      std::vector<topo::DeviceId> heads;
      for (const auto& s : slices) {
        const std::size_t m = s.devices.size();
        const std::size_t head = static_cast<std::size_t>(c) % m;
        heads.push_back(s.devices[head]);
        longest_chain = std::max(longest_chain, m);
        for (std::size_t i = 1; i < m; ++i) {
          const auto below = s.devices[(head + i) % m];
          const auto above = s.devices[(head + i - 1) % m];
          intra = std::max(intra, acc.add_flow(below, above, per_channel));
          acc.add_flow(above, below, per_channel);
        }
      }
      for (std::size_t i = 0; i < heads.size(); ++i) {
        const auto parent = tree_parent(i, heads.size(), t);
        if (!parent) continue;
        inter = std::max(inter, acc.add_flow(heads[i], heads[*parent], per_channel));
        acc.add_flow(heads[*parent], heads[i], per_channel);
      }
    }
    // a chunk climbs log2(nodes) network steps to the root and comes down as many (NCCL's log2i)
    const int depth = static_cast<int>(std::floor(std::log2(static_cast<double>(slices.size()))));
    const int chain = static_cast<int>(longest_chain) - 1;
    Phase phase{.description = fmt::format("double binary tree over {} nodes", slices.size()),
                .bus_bytes_per_byte = bus_factor(kind, group.size()),
                .latency = (intra * chain + inter * depth) * 2,
                .pipeline_steps = 2 * (chain + depth),
                .chunk_divisor = static_cast<double>(channels),
                .net_steps = 2 * depth,
                .chunked_network = true};
    finish_phase(phase, acc, topo);
    return CollectivePlan{
        .algorithm = "tree", .kind = kind, .ranks = group.size(), .channels = channels, .phases = {phase}};
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_tree_algorithm() {
  return std::make_unique<TreeAlgorithm>();
}

}  // namespace trainsim::cost
