// Dimension-ordered rings on a torus (TPU-style): all-reduce = reduce-scatter along every dimension
// in turn, each on bidirectional rings (half the data each way), then all-gather in reverse order.
// Dimension i works on S_i = S / (n_1···n_{i−1}) bytes: time ≈ Σ_i 2·(n_i−1)/n_i · S_i / (2B) +
// latencies. The group must span whole dimensions (or one coordinate of the others).
#include <numeric>

#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {
namespace {

struct TorusShape {
  std::vector<int> dims;
  std::vector<int> active;  // dimensions the group spans fully
};

std::vector<int> coords(std::uint32_t id, const std::vector<int>& dims) {
  std::vector<int> c(dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) {
    c[k] = static_cast<int>(id % static_cast<std::uint32_t>(dims[k]));
    id /= static_cast<std::uint32_t>(dims[k]);
  }
  return c;
}

std::uint32_t device_id(const std::vector<int>& c, const std::vector<int>& dims) {
  std::uint32_t id = 0;
  for (std::size_t k = dims.size(); k-- > 0;)
    id = id * static_cast<std::uint32_t>(dims[k]) + static_cast<std::uint32_t>(c[k]);
  return id;
}

// The dimensions `group` spans; nullopt unless it is exactly a product of whole dimensions.
std::optional<TorusShape> torus_shape(const Group& group, const spec::TorusNetwork& net) {
  TorusShape s{.dims = net.dims, .active = {}};
  const auto first = coords(group.devices.front().value, s.dims);
  std::size_t expected = 1;
  for (std::size_t k = 0; k < s.dims.size(); ++k) {
    bool varies = false;
    for (const auto d : group.devices) varies = varies || coords(d.value, s.dims)[k] != first[k];
    if (varies) {
      s.active.push_back(static_cast<int>(k));
      expected *= static_cast<std::size_t>(s.dims[k]);
    }
  }
  if (expected != group.devices.size() || s.active.empty()) return std::nullopt;
  return s;
}

class TorusAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "torus"; }
  std::string_view description() const override { return "bidirectional rings per torus dimension, in order"; }

  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    const auto* net = std::get_if<spec::TorusNetwork>(&topo.spec().network);
    const bool rs = kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllReduce;
    const bool ag = kind == CollectiveKind::AllGather || kind == CollectiveKind::AllReduce;
    if (!net || !net->wraparound || (!rs && !ag)) return std::nullopt;
    const auto shape = torus_shape(group, *net);
    if (!shape) return std::nullopt;

    CollectivePlan plan{.algorithm = "torus", .kind = kind, .ranks = group.size(), .channels = tuning.channels};
    std::vector<Phase> reduce_scatter;
    double share = 1.0;  // of the payload each dimension works on
    for (const int k : shape->active) {
      const int n = shape->dims[static_cast<std::size_t>(k)];
      const double per_hop = (n - 1.0) / n * share / 2;  // each direction carries half
      LoadAccumulator acc(topo);
      Duration hop = Duration::zero();
      for (const auto d : group.devices) {
        auto c = coords(d.value, shape->dims);
        if (c[static_cast<std::size_t>(k)] != 0) continue;  // one line per set of other coordinates
        for (int i = 0; i < n; ++i) {
          auto here = c;
          auto next = c;
          here[static_cast<std::size_t>(k)] = i;
          next[static_cast<std::size_t>(k)] = (i + 1) % n;
          const topo::DeviceId a{device_id(here, shape->dims)};
          const topo::DeviceId b{device_id(next, shape->dims)};
          hop = std::max(hop, acc.add_flow(a, b, per_hop));
          acc.add_flow(b, a, per_hop);
        }
      }
      Phase phase{.description = fmt::format("dimension {}: rings of {} both ways", k, n),
                  .bus_bytes_per_byte = (n - 1.0) / n * share,
                  .latency = hop * (n - 1),
                  .pipeline_steps = n - 1,
                  .chunk_divisor = 2.0 * n / share};
      finish_phase(phase, acc, topo);
      reduce_scatter.push_back(phase);
      share /= n;
    }
    if (rs) plan.phases = reduce_scatter;
    if (ag) plan.phases.insert(plan.phases.end(), reduce_scatter.rbegin(), reduce_scatter.rend());
    return plan;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_torus_algorithm() {
  return std::make_unique<TorusAlgorithm>();
}

}  // namespace trainsim::cost
