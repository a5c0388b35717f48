#include "trainsim/driver/memory_timeline.hpp"

#include <algorithm>
#include <map>

#include "trainsim/util/error.hpp"

namespace trainsim::driver {

std::vector<MemoryCurve> memory_curves(const RunReport& r, std::size_t points) {
  std::vector<MemoryCurve> out;
  if (!r.step || points == 0) return out;
  const auto& lowered = r.step->lowered;
  const auto& g = lowered.graph;
  const auto& tl = r.step->timeline;
  const double end = std::max(tl.makespan.seconds(), 1e-30);
  // each stage's first simulated rank
  std::map<int, const lower::SimulatedRank*> firsts;
  for (const auto& rank : lowered.ranks) firsts.try_emplace(rank.stage, &rank);
  std::map<std::uint32_t, std::vector<std::pair<double, double>>> events;  // pool -> (time, delta)
  for (const auto& [stage, rank] : firsts) events[rank->pool.value];
  for (std::size_t t = 0; t < g.num_tasks(); ++t) {
    const sim::TaskId id{static_cast<std::uint32_t>(t)};
    g.for_each_memory(id, [&](const sim::MemoryEffect& m) {
      const auto it = events.find(m.pool.value);
      if (it == events.end()) return;
      const auto& span = tl.tasks[t];
      it->second.emplace_back((m.at_end ? span.end : span.start).seconds(), static_cast<double>(m.bytes));
    });
  }
  for (const auto& [stage, rank] : firsts) {
    auto& e = events[rank->pool.value];
    std::stable_sort(e.begin(), e.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<double> top(points, 0);
    double live = static_cast<double>(g.pool(rank->pool).baseline);
    std::size_t slot = 0;
    top[0] = live;
    for (const auto& [time, delta] : e) {
      const auto at = std::min(points - 1, static_cast<std::size_t>(time / end * static_cast<double>(points)));
      while (slot < at) top[++slot] = live;  // a slice starts with what is live when it begins
      live += delta;
      top[slot] = std::max(top[slot], live);
    }
    while (slot + 1 < points) top[++slot] = live;
    MemoryCurve c{.stage = stage, .rank = rank->rank, .points = {}};
    for (std::size_t k = 0; k < points; ++k)
      c.points.emplace_back(end * static_cast<double>(k) / static_cast<double>(points), top[k]);
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

std::string phase_of(const sim::TaskGraph& g, sim::TaskId t) {
  switch (static_cast<lower::Category>(g.category(t))) {
    case lower::Category::Compute: {
      const auto label = g.label(t);
      if (label.starts_with("F")) return "forward";
      if (label.starts_with("B")) return "backward";
      if (label.starts_with("W")) return "weight gradient";
      return "compute";
    }
    case lower::Category::Recompute:
      return "recompute";
    case lower::Category::Optimizer:
      return "optimizer";
    default:
      return "communication";
  }
}

}  // namespace

std::optional<MemoryPeak> memory_peak(const RunReport& r) {
  if (!r.step || !r.simulation) return std::nullopt;
  const auto& lowered = r.step->lowered;
  const auto& g = lowered.graph;
  // the stage whose peak the report gives (fragmentation included), then its rank with the highest pool
  const auto& stages = r.simulation->per_stage;
  const auto worst = std::max_element(stages.begin(), stages.end(),
                                      [](const auto& a, const auto& b) { return a.peak_memory < b.peak_memory; });
  SIM_ASSERT(worst != stages.end(), "a simulated step without stages");
  const lower::SimulatedRank* chosen = nullptr;
  for (const auto& rank : lowered.ranks)
    if (rank.stage == worst->stage &&
        (chosen == nullptr ||
         r.step->timeline.pools[rank.pool.index()].peak > r.step->timeline.pools[chosen->pool.index()].peak))
      chosen = &rank;
  SIM_ASSERT(chosen != nullptr, "stage {} has no simulated rank", worst->stage);
  const auto& rank = *chosen;
  const auto& pool = r.step->timeline.pools.at(rank.pool.index());
  MemoryPeak p{.stage = rank.stage, .rank = rank.rank, .time_s = pool.peak_time.seconds()};
  if (pool.peak > g.pool(rank.pool).baseline) {
    p.task = g.name(pool.peak_task);
    p.microbatch = g.number(pool.peak_task);
    p.phase = phase_of(g, pool.peak_task);
  }
  const auto kind = [&](lower::MemoryKind k) { return pool.at_peak[static_cast<std::size_t>(k)]; };
  p.live_static = Bytes{kind(lower::MemoryKind::Static)};  // the pool's baseline
  p.live_activations = Bytes{kind(lower::MemoryKind::Activations)};
  p.live_buffers = Bytes{kind(lower::MemoryKind::Buffers)};
  return p;
}

}  // namespace trainsim::driver
