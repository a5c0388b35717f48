// Dimension-ordered rings on a torus (TPU-style): all-reduce = reduce-scatter along every dimension
// in turn, each on bidirectional rings (half the data each way), then all-gather in reverse order.
// Over k dimensions the payload goes in k parts, each taking the dimensions in its own rotated
// order, so every step keeps all k dimensions' links busy. On a cube of side n: reduce-scatter
// ≈ (n−1)/n · (1 + 1/n + ...) · S / (2kB) + latencies. The group must be a box of the torus: in
// every dimension either all of it or a run of consecutive coordinates. Along a whole dimension
// with wraparound links the ring closes on them; along a run (or a mesh without wraparound) the
// ring's closing hop goes back along the line, so each link carries both rings' traffic one way
// and the run gets one direction's bandwidth. Across the slices of a multislice topology the group
// must hold the same chips of every slice it spans; the slices join over the data-centre network.
#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "cost/group_layout.hpp"
#include "trainsim/cost/algorithm.hpp"

namespace trainsim::cost {
namespace {

// The group's layout: a box of `extent[k]` consecutive coordinates from `lo[k]` in every dimension,
// the same chips in each of the slices it spans.
struct TorusShape {
  std::vector<int> dims;
  std::uint32_t slice_devices = 1;
  std::vector<int> lo;
  std::vector<int> extent;
  std::vector<int> active;               // dimensions with more than one coordinate
  std::vector<std::uint32_t> slice_ids;  // the slices it spans, ascending
  std::vector<std::uint32_t> positions;  // its chips' indices inside a slice, ascending
};

std::vector<int> coords(std::uint32_t local, const std::vector<int>& dims) {
  std::vector<int> c(dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) {
    c[k] = static_cast<int>(local % static_cast<std::uint32_t>(dims[k]));
    local /= static_cast<std::uint32_t>(dims[k]);
  }
  return c;
}

std::uint32_t local_id(const std::vector<int>& c, const std::vector<int>& dims) {
  std::uint32_t id = 0;
  for (std::size_t k = dims.size(); k-- > 0;)
    id = id * static_cast<std::uint32_t>(dims[k]) + static_cast<std::uint32_t>(c[k]);
  return id;
}

// The box `positions` fill, if they fill one: per dimension the lowest and highest coordinate, and
// as many chips as the box holds (positions are distinct).
bool fill_box(TorusShape& s) {
  const std::size_t nd = s.dims.size();
  std::vector<int> hi(nd, -1);
  s.lo.assign(nd, std::numeric_limits<int>::max());
  for (const auto p : s.positions) {
    const auto c = coords(p, s.dims);
    for (std::size_t k = 0; k < nd; ++k) {
      s.lo[k] = std::min(s.lo[k], c[k]);
      hi[k] = std::max(hi[k], c[k]);
    }
  }
  std::size_t volume = 1;
  s.extent.assign(nd, 1);
  for (std::size_t k = 0; k < nd; ++k) {
    s.extent[k] = hi[k] - s.lo[k] + 1;
    volume *= static_cast<std::size_t>(s.extent[k]);
    if (s.extent[k] > 1) s.active.push_back(static_cast<int>(k));
  }
  return volume == s.positions.size();
}

// The box `group` fills in each slice; nullopt unless it is one box, the same in every slice it
// touches.
std::optional<TorusShape> torus_shape(const Group& group, const spec::TorusNetwork& net) {
  TorusShape s{.dims = net.dims, .slice_devices = static_cast<std::uint32_t>(net.slice_devices())};
  std::vector<std::vector<std::uint32_t>> by_slice;
  for (const auto d : group.devices) {  // ascending, so slice by slice
    const auto slice = d.value / s.slice_devices;
    if (s.slice_ids.empty() || s.slice_ids.back() != slice) {
      s.slice_ids.push_back(slice);
      by_slice.emplace_back();
    }
    by_slice.back().push_back(d.value % s.slice_devices);
  }
  for (const auto& positions : by_slice)
    if (positions != by_slice.front()) return std::nullopt;
  s.positions = by_slice.front();
  if (!fill_box(s)) return std::nullopt;
  if (s.active.empty() && s.slice_ids.size() < 2) return std::nullopt;
  if (s.slice_ids.size() > 1 && !net.dcn) return std::nullopt;
  return s;
}

// Every ring of the box along dimension `dim` in every slice it spans (one per set of the other
// coordinates), both ways, each carrying `per_hop` bytes per payload byte on every hop (a closing
// hop back along a run crosses the run's links); returns the slowest hop's latency.
Duration add_dimension_rings(LoadAccumulator& acc, const TorusShape& shape, int dim, double per_hop) {
  const auto k = static_cast<std::size_t>(dim);
  const int m = shape.extent[k];
  Duration hop = Duration::zero();
  for (const auto slice : shape.slice_ids) {
    const auto base = slice * shape.slice_devices;
    for (const auto p : shape.positions) {
      auto c = coords(p, shape.dims);
      if (c[k] != shape.lo[k]) continue;  // one line per set of other coordinates
      for (int i = 0; i < m; ++i) {
        auto here = c;
        auto next = c;
        here[k] = shape.lo[k] + i;
        next[k] = shape.lo[k] + (i + 1) % m;
        const topo::DeviceId a{base + local_id(here, shape.dims)};
        const topo::DeviceId b{base + local_id(next, shape.dims)};
        hop = std::max(hop, acc.add_flow(a, b, per_hop));
        acc.add_flow(b, a, per_hop);
      }
    }
  }
  return hop;
}

// Reduce-scatter inside the slices: the payload in as many parts as the group spans dimensions,
// part j taking them in the order active[j], active[j+1], ...: at every step each dimension's rings
// carry one part, so all the links work at once and the bandwidth grows with the dimensions
// spanned, as XLA runs a collective over several torus axes (docs/model.md "Collectives").
std::vector<Phase> slice_reduce_scatter(const TorusShape& shape, const topo::Topology& topo) {
  const std::size_t k = shape.active.size();
  std::vector<double> share(k, 1.0 / static_cast<double>(k));  // of the payload part j works on next
  std::vector<Phase> phases;
  for (std::size_t step = 0; step < k; ++step) {
    LoadAccumulator acc(topo);
    Phase phase{.description =
                    fmt::format("step {} of {}: rings both ways along every spanned dimension at once", step + 1, k)};
    Duration latency = Duration::zero();
    for (std::size_t j = 0; j < k; ++j) {
      const int dim = shape.active[(j + step) % k];
      const int n = shape.extent[static_cast<std::size_t>(dim)];
      const Duration hop = add_dimension_rings(acc, shape, dim, (n - 1.0) / n * share[j] / 2);
      latency = std::max(latency, hop * (n - 1));
      phase.bus_bytes_per_byte += (n - 1.0) / n * share[j];
      phase.pipeline_steps = std::max(phase.pipeline_steps, n - 1);
      if (j == 0) phase.chunk_divisor = 2.0 * n / share[j];
      share[j] /= n;
    }
    phase.latency = latency;
    finish_phase(phase, acc, topo);
    phases.push_back(phase);
  }
  return phases;
}

// Across the slices over the data-centre network: one ring of the S slices per position in a slice,
// each on the shard (1/local of the payload) its chip holds after the slice's reduce-scatter.
Phase across_slices(CollectiveKind kind, const TorusShape& shape, const topo::Topology& topo, int channels) {
  const double slices = static_cast<double>(shape.slice_ids.size());
  const double local = static_cast<double>(shape.positions.size());
  const int steps = static_cast<int>(slices) - 1;
  const double factor = (kind == CollectiveKind::AllReduce ? 2.0 : 1.0) * steps / slices / local;
  LoadAccumulator acc(topo);
  Duration lap = Duration::zero();
  for (const auto p : shape.positions) {
    std::vector<topo::DeviceId> ring;
    for (const auto slice : shape.slice_ids) ring.push_back(topo::DeviceId{slice * shape.slice_devices + p});
    lap = std::max(lap, add_ring(acc, ring, factor));
  }
  const int pipeline = kind == CollectiveKind::AllReduce ? 2 * steps : steps;
  Phase phase{.description = fmt::format("{} of 1/{} shards across {} slices over the data-centre network",
                                         collective_name(kind), shape.positions.size(), shape.slice_ids.size()),
              .bus_bytes_per_byte = factor,
              .latency = Duration::from_seconds(lap.seconds() * pipeline / slices),
              .pipeline_steps = pipeline,
              .chunk_divisor = slices * local * channels};
  finish_phase(phase, acc, topo);
  return phase;
}

class TorusAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "torus"; }
  std::string_view description() const override {
    return "bidirectional rings per torus dimension, in order; across slices, rings over the data-centre network";
  }

  // All-reduce: reduce-scatter in the slices, all-reduce of the shards across them, all-gather in
  // the slices (XLA's hierarchical multislice collective); reduce-scatter and all-gather the halves.
  std::optional<CollectivePlan> plan(CollectiveKind kind, const Group& group, const topo::Topology& topo,
                                     const CollectiveTuning& tuning) const override {
    const auto* net = std::get_if<spec::TorusNetwork>(&topo.spec().network);
    const bool rs = kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllReduce;
    const bool ag = kind == CollectiveKind::AllGather || kind == CollectiveKind::AllReduce;
    if (!net || (!rs && !ag)) return std::nullopt;
    const auto shape = torus_shape(group, *net);
    if (!shape) return std::nullopt;

    CollectivePlan plan{.algorithm = "torus", .kind = kind, .ranks = group.size(), .channels = tuning.channels};
    const auto reduce_scatter = slice_reduce_scatter(*shape, topo);
    if (rs) plan.phases = reduce_scatter;
    if (shape->slice_ids.size() > 1) plan.phases.push_back(across_slices(kind, *shape, topo, tuning.channels));
    if (ag) plan.phases.insert(plan.phases.end(), reduce_scatter.rbegin(), reduce_scatter.rend());
    return plan;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_torus_algorithm() {
  return std::make_unique<TorusAlgorithm>();
}

}  // namespace trainsim::cost
