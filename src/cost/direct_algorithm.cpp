// Point-to-point patterns. All-to-all: every rank sends S/n to every other rank at once, each
// over its own route (a GPU's inter-node traffic leaves through its own NIC: NCCL cannot stripe
// one GPU's all-to-all over several NICs); time = max over links of load / B + one message
// latency. Send/recv: one flow. On a full mesh of links (AMD Infinity Fabric) the reductions run
// direct too, as RCCL's all-pairs kernels do: reduce-scatter sends every rank's S/n shard for peer
// j straight to j, all-gather the reduced shards back, all-reduce is the two in turn; every link of
// the mesh carries S/n per phase, so the bus bandwidth is all n−1 links' and not one ring link's.
#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {
namespace {

// Pairwise flows grow as n²; beyond this an all-to-all is outside what the model lays out (expert
// parallel groups are tens to hundreds of ranks).
constexpr int kMaxAllToAllRanks = 1024;

class DirectAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "direct"; }
  std::string_view description() const override { return "direct sends between every pair (all-to-all, send/recv)"; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& /*tuning*/) const override {
    const int n = group.size();
    if (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
        kind == CollectiveKind::AllGather)
      return mesh_plan(kind, group, topo);
    if (kind == CollectiveKind::SendRecv && n != 2) return std::nullopt;
    if (kind != CollectiveKind::SendRecv && (kind != CollectiveKind::AllToAll || n > kMaxAllToAllRanks))
      return std::nullopt;
    LoadAccumulator acc(topo);
    Duration latency = Duration::zero();
    const double per_pair = kind == CollectiveKind::SendRecv ? 1.0 : 1.0 / n;
    for (const auto a : group.devices)
      for (const auto b : group.devices)
        if (a != b && (kind != CollectiveKind::SendRecv || a == group.devices.front()))
          latency = std::max(latency, acc.add_flow(a, b, per_pair));
    Phase phase{.description = kind == CollectiveKind::SendRecv ? std::string("one flow")
                                                                : fmt::format("{} × {} direct flows", n, n - 1),
                .bus_bytes_per_byte = bus_factor(kind, n),
                .latency = latency};
    finish_phase(phase, acc, topo);
    return CollectivePlan{.algorithm = "direct", .kind = kind, .ranks = n, .channels = 1, .phases = {phase}};
  }

 private:
  static std::optional<CollectivePlan> mesh_plan(CollectiveKind kind, const Group& group, const topo::Topology& topo) {
    if (topo.spec().node.fabric.kind != spec::FabricKind::FullMesh || slices_by_node(group, topo).size() != 1)
      return std::nullopt;
    const int n = group.size();
    const double share = 1.0 / n;
    const auto exchange = [&](std::string description) {
      LoadAccumulator acc(topo);
      Duration latency = Duration::zero();
      for (const auto a : group.devices)
        for (const auto b : group.devices)
          if (a != b) latency = std::max(latency, acc.add_flow(a, b, share));
      Phase phase{.description = std::move(description),
                  .bus_bytes_per_byte = (n - 1) * share,
                  .latency = latency};
      finish_phase(phase, acc, topo);
      return phase;
    };
    CollectivePlan plan{.algorithm = "direct", .kind = kind, .ranks = n, .channels = 1};
    if (kind != CollectiveKind::AllGather)
      plan.phases.push_back(exchange(fmt::format("reduce-scatter: {} × {} direct shards", n, n - 1)));
    if (kind != CollectiveKind::ReduceScatter)
      plan.phases.push_back(exchange(fmt::format("all-gather: {} × {} direct shards", n, n - 1)));
    return plan;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_direct_algorithm() {
  return std::make_unique<DirectAlgorithm>();
}

}  // namespace trainsim::cost
