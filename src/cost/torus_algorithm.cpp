// Dimension-ordered rings on a torus (TPU-style): all-reduce = reduce-scatter along every dimension
// in turn, each on bidirectional rings (half the data each way), then all-gather in reverse order.
// Over k dimensions the payload goes in k parts, each taking the dimensions in its own rotated
// order, so every step keeps all k dimensions' links busy. On a cube of side n: reduce-scatter
// ≈ (n−1)/n · (1 + 1/n + ...) · S / (2kB) + latencies. The group must span whole dimensions (or
// one coordinate of the others).
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

// Every ring of the group along dimension `dim` (one per set of the other coordinates), both
// directions carrying `per_hop` bytes per payload byte; returns the slowest hop's latency.
Duration add_dimension_rings(LoadAccumulator& acc, const Group& group, const std::vector<int>& dims, int dim,
                             double per_hop) {
  const auto k = static_cast<std::size_t>(dim);
  const int n = dims[k];
  Duration hop = Duration::zero();
  for (const auto d : group.devices) {
    auto c = coords(d.value, dims);
    if (c[k] != 0) continue;  // one line per set of other coordinates
    for (int i = 0; i < n; ++i) {
      auto here = c;
      auto next = c;
      here[k] = i;
      next[k] = (i + 1) % n;
      const topo::DeviceId a{device_id(here, dims)};
      const topo::DeviceId b{device_id(next, dims)};
      hop = std::max(hop, acc.add_flow(a, b, per_hop));
      acc.add_flow(b, a, per_hop);
    }
  }
  return hop;
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
    // The payload in as many parts as the group spans dimensions, part j taking them in the order
    // active[j], active[j+1], ...: at every step each dimension's rings carry one part, so all the
    // links work at once and the bandwidth grows with the dimensions spanned, as XLA runs a
    // collective over several torus axes (docs/model.md "Collectives").
    const std::size_t k = shape->active.size();
    std::vector<double> share(k, 1.0 / static_cast<double>(k));  // of the payload part j works on next
    std::vector<Phase> reduce_scatter;
    for (std::size_t step = 0; step < k; ++step) {
      LoadAccumulator acc(topo);
      Phase phase{.description =
                      fmt::format("step {} of {}: rings both ways along every spanned dimension at once", step + 1, k)};
      Duration latency = Duration::zero();
      for (std::size_t j = 0; j < k; ++j) {
        const int dim = shape->active[(j + step) % k];
        const int n = shape->dims[static_cast<std::size_t>(dim)];
        const Duration hop = add_dimension_rings(acc, group, shape->dims, dim, (n - 1.0) / n * share[j] / 2);
        latency = std::max(latency, hop * (n - 1));
        phase.bus_bytes_per_byte += (n - 1.0) / n * share[j];
        phase.pipeline_steps = std::max(phase.pipeline_steps, n - 1);
        if (j == 0) phase.chunk_divisor = 2.0 * n / share[j];
        share[j] /= n;
      }
      phase.latency = latency;
      finish_phase(phase, acc, topo);
      reduce_scatter.push_back(phase);
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
