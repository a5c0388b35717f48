// In-network reduction. NVLS (NVLink SHARP, H100 NVSwitch): every device writes its buffer to the
// switch once, the switch reduces and multicasts the result: each link carries S each way, time ≈
// S / (B·e_nvls). SHARP on InfiniBand: the switches reduce the inter-node part: reduce-scatter
// inside nodes, each device sends its S/ppn shard up once and receives the result once, all-gather
// inside nodes.
#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {

namespace {

class NvlsAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "nvls"; }
  std::string_view description() const override { return "NVLink SHARP: reduction in the NVSwitch"; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    if (kind != CollectiveKind::AllReduce || !topo.intra_node_reduction()) return std::nullopt;
    const auto slices = slices_by_node(group, topo);
    if (slices.size() != 1) return std::nullopt;
    LoadAccumulator acc(topo);
    // every device's up link and down link carry the whole buffer once
    const auto& d = group.devices;
    Duration latency = Duration::zero();
    for (std::size_t i = 0; i < d.size(); ++i)
      latency = std::max(latency, acc.add_flow(d[i], d[(i + 1) % d.size()], 1.0));
    // NCCL splits the buffer over its NVLS channels, each streaming chunks through the switch: a
    // chunk is reduced on its way up and multicast on its way down, a two-step pipeline whose fill
    // costs one chunk-time of a channel (src/transport/nvls.cc: 16 channels on sm90)
    Phase phase{.description = fmt::format("in-switch reduction over {} devices", d.size()),
                .bus_bytes_per_byte = 1.0,
                .latency = latency + tuning.in_switch_latency,
                .pipeline_steps = 2,
                .chunk_divisor = static_cast<double>(d.size() * static_cast<std::size_t>(tuning.in_switch_channels)),
                .simple_only = true};
    finish_phase(phase, acc, topo, tuning.in_switch_efficiency);
    return CollectivePlan{.algorithm = "nvls",
                          .kind = kind,
                          .ranks = group.size(),
                          .channels = static_cast<int>(tuning.in_switch_channels),
                          .phases = {phase}};
  }
};

class SharpAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "sharp"; }
  std::string_view description() const override { return "SHARP: inter-node reduction in the network switches"; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    if (kind != CollectiveKind::AllReduce || !topo.network_reduction()) return std::nullopt;
    const auto slices = slices_by_node(group, topo);
    if (slices.size() < 2 || !same_size_slices(slices)) return std::nullopt;
    const std::size_t m = slices.front().devices.size();
    LoadAccumulator acc(topo);
    Duration latency = Duration::zero();
    for (std::size_t p = 0; p < m; ++p) {
      // each device's shard goes up once and comes back once: a ring of flows loads every NIC once each way
      for (std::size_t k = 0; k < slices.size(); ++k)
        latency = std::max(latency, acc.add_flow(slices[k].devices[p], slices[(k + 1) % slices.size()].devices[p],
                                                 1.0 / static_cast<double>(m)));
    }
    Phase inter{.description = fmt::format("in-network all-reduce of 1/{} shards across {} nodes", m, slices.size()),
                .bus_bytes_per_byte = 1.0 / static_cast<double>(m),
                .latency = latency * 2,
                .simple_only = true};
    finish_phase(inter, acc, topo);
    CollectivePlan plan{.algorithm = "sharp", .kind = kind, .ranks = group.size(), .channels = tuning.channels};
    if (m > 1)
      plan.phases.push_back(intra_node_ring_phase(slices, topo, tuning.channels, "reduce-scatter inside nodes"));
    plan.phases.push_back(inter);
    if (m > 1) plan.phases.push_back(intra_node_ring_phase(slices, topo, tuning.channels, "all-gather inside nodes"));
    return plan;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_nvls_algorithm() {
  return std::make_unique<NvlsAlgorithm>();
}
std::unique_ptr<CollectiveAlgorithm> make_sharp_algorithm() {
  return std::make_unique<SharpAlgorithm>();
}

}  // namespace trainsim::cost
