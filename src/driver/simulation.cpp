#include "trainsim/driver/simulation.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "trainsim/util/intervals.hpp"

namespace trainsim::driver {
namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

std::int64_t length(const std::vector<Interval>& v) {
  std::int64_t total = 0;
  for (const auto& i : v) total += i.second - i.first;
  return total;
}

// |a \ b| for merged interval lists
std::int64_t minus(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t total = 0;
  std::size_t j = 0;
  for (const auto& [start, end] : a) {
    std::int64_t cursor = start;
    while (j < b.size() && b[j].second <= cursor) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < end; ++k) {
      if (b[k].first > cursor) total += b[k].first - cursor;
      cursor = std::max(cursor, b[k].second);
    }
    if (cursor < end) total += end - cursor;
  }
  return total;
}

// Each rank weighs as many ranks as it stands for, relative to the fewest any stands for: 1 each
// when all stand for as many (folded or every rank), so the means are plain means.
std::vector<double> rank_weights(const std::vector<lower::SimulatedRank>& ranks) {
  std::int64_t fewest = std::numeric_limits<std::int64_t>::max();
  for (const auto& rank : ranks) fewest = std::min(fewest, rank.stands_for);
  std::vector<double> weight(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) weight[r] = static_cast<double>(ranks[r].stands_for / fewest);
  return weight;
}

// One rank's task intervals: compute, non-pipeline communication, and per category (by index;
// empty when the rank has none of it) all of them and the non-pipeline communication. Kept from
// rank to rank for its space.
// Of a rank's compute stream, the time its tasks waited for the host's launch alone: from when
// the stream and every other dependency had let a task start to when its launch ended.
std::int64_t host_bound_ps(const sim::TaskGraph& g, const sim::Timeline& timeline, const lower::SimulatedRank& rank) {
  const auto host = rank.streams[static_cast<std::size_t>(lower::StreamKind::Host)];
  std::int64_t total = 0;
  // each compute stream (both lanes of combined 1F1B) in its own order
  lower::for_each_stream(rank, [&](lower::StreamKind kind, sim::StreamId stream) {
    if (kind != lower::StreamKind::Compute) return;
    std::int64_t previous = 0;
    for (const auto t : g.stream_tasks(stream)) {
      std::int64_t launched = -1;
      std::int64_t ready = previous;
      g.for_each_dependency(t, [&](sim::TaskId d) {
        const auto end = timeline.tasks[d.index()].end.ps;
        if (g.streams(d).front() == host)
          launched = std::max(launched, end);
        else
          ready = std::max(ready, end);
      });
      const auto& span = timeline.tasks[t.index()];
      if (launched > ready) total += std::min(launched, span.start.ps) - ready;
      previous = span.end.ps;
    }
  });
  return total;
}

struct RankIntervals {
  std::vector<Interval> compute;
  std::vector<Interval> comm;
  std::vector<std::vector<Interval>> per_category;
  std::vector<std::vector<Interval>> exposable;

  void collect(const sim::TaskGraph& g, const sim::Timeline& timeline, const lower::SimulatedRank& rank) {
    compute.clear();
    comm.clear();
    for (auto& v : per_category) v.clear();
    for (auto& v : exposable) v.clear();
    lower::for_each_stream(rank, [&](lower::StreamKind kind, sim::StreamId stream) {
      for (const auto t : g.stream_tasks(stream)) {
        const auto& span = timeline.tasks[t.index()];
        const Interval i{span.start.ps, span.end.ps};
        const auto category = g.category(t);
        if (category >= per_category.size()) {
          per_category.resize(category + 1u);
          exposable.resize(category + 1u);
        }
        per_category[category].push_back(i);
        if (kind == lower::StreamKind::Compute) {
          compute.push_back(i);
        } else if (kind < lower::StreamKind::PpSendNext || kind > lower::StreamKind::Host) {
          // not pipeline communication, nor the host: collectives and offload copies
          comm.push_back(i);
          exposable[category].push_back(i);
        }
      }
    });
  }
};

// A stage's figures from its ranks' busy and exposed times (each rank weighed as it stands for).
StageFigures stage_figures(const lower::Lowered& lowered, const sim::Timeline& timeline, int stage,
                           const std::vector<std::size_t>& ranks, const std::vector<double>& weight,
                           const std::vector<double>& busy_s, const std::vector<std::int64_t>& exposed_ps) {
  const double step = timeline.makespan.seconds();
  StageFigures f{.stage = stage};
  double idle = 0;
  double stage_weight = 0;
  for (const auto r : ranks) stage_weight += weight[r];
  for (const auto r : ranks) {
    f.busy_s += busy_s[r] * weight[r] / stage_weight;
    idle += (step - busy_s[r] - static_cast<double>(exposed_ps[r]) * 1e-12) * weight[r] / stage_weight;
    const auto& pool = timeline.pools[lowered.ranks[r].pool.index()];
    if (pool.peak > f.peak_memory) {
      f.peak_memory = pool.peak;
      f.memory_at_peak = pool.at_peak;
      const auto& loss = lowered.ranks[r].first_loss;
      f.peak_after_loss = loss && pool.peak_time >= timeline.tasks[loss->index()].start;
    }
  }
  f.idle_s = std::max(0.0, idle);
  f.bubble_fraction = step > 0 ? f.idle_s / step : 0;
  return f;
}

}  // namespace

Simulation summarize(const lower::Lowered& lowered, const sim::Timeline& timeline) {
  Simulation out;
  const auto& g = lowered.graph;
  const double step = timeline.makespan.seconds();
  out.step_time_s = step;
  out.tasks = g.num_tasks();
  out.events = timeline.events;
  out.simulated_ranks = lowered.ranks.size();
  out.fold = lowered.fold;
  std::map<int, std::vector<std::size_t>> by_stage;
  std::map<std::string, double> comm_busy;
  std::map<std::string, double> exposed_by_category;
  const auto weight = rank_weights(lowered.ranks);
  double n = 0;
  for (const double w : weight) n += w;
  // per rank: seconds of compute, and of non-pipeline communication no compute hides
  std::vector<double> busy_s(lowered.ranks.size());
  std::vector<std::int64_t> exposed_ps(lowered.ranks.size());
  RankIntervals in;
  std::vector<std::vector<Interval>> merged;  // per category, a rank's spans merged
  for (std::size_t r = 0; r < lowered.ranks.size(); ++r) {
    const auto& rank = lowered.ranks[r];
    by_stage[rank.stage].push_back(r);
    in.collect(g, timeline, rank);
    const auto& [compute, comm, per_category, exposable] = in;
    const auto busy = merged_spans(compute);
    // each category's spans merged once; its exposable ones are the same list when every task of
    // the category is on an exposable stream (collected in the same order)
    merged.resize(per_category.size());
    for (std::size_t cat = 0; cat < per_category.size(); ++cat) merged[cat] = merged_spans(per_category[cat]);
    for (std::size_t cat = 0; cat < exposable.size(); ++cat)
      if (!exposable[cat].empty())
        exposed_by_category[std::string(lower::category_name(static_cast<lower::Category>(cat)))] +=
            static_cast<double>(minus(
                exposable[cat].size() == per_category[cat].size() ? merged[cat] : merged_spans(exposable[cat]), busy)) *
            1e-12 * weight[r] / n;
    exposed_ps[r] = minus(merged_spans(comm), busy);
    const auto host_bound = host_bound_ps(g, timeline, rank);
    out.breakdown.host_bound_s += static_cast<double>(host_bound) * 1e-12 * weight[r] / n;
    busy_s[r] = length(busy) * 1e-12;
    out.breakdown.compute_s += length(busy) * 1e-12 * weight[r] / n;
    out.breakdown.exposed_comm_s += exposed_ps[r] * 1e-12 * weight[r] / n;
    exposed_ps[r] += host_bound;  // not idle either (per stage, below)
    for (std::size_t cat = 0; cat < per_category.size(); ++cat)
      if (!per_category[cat].empty())
        comm_busy[std::string(lower::category_name(static_cast<lower::Category>(cat)))] +=
            length(merged[cat]) * 1e-12 * weight[r] / n;
    // launches the lowering left out (they could never hold the device back) still keep the host busy
    if (const auto s = static_cast<std::size_t>(rank.stage); s < lowered.unissued_host.size())
      comm_busy[std::string(lower::category_name(lower::Category::Host))] +=
          lowered.unissued_host[s].seconds() * weight[r] / n;
    const auto& pool = timeline.pools[rank.pool.index()];
    if (pool.peak > out.peak_memory) {
      out.peak_memory = pool.peak;
      out.peak_rank = r;
    }
  }
  out.breakdown.bubble_s =
      std::max(0.0, step - out.breakdown.compute_s - out.breakdown.exposed_comm_s - out.breakdown.host_bound_s);
  for (const auto& [category, seconds] : comm_busy) out.comm_busy_s.emplace_back(category, seconds);
  for (const auto& [category, seconds] : exposed_by_category) out.exposed_s.emplace_back(category, seconds);

  for (const auto& [stage, ranks] : by_stage) {
    auto f = stage_figures(lowered, timeline, stage, ranks, weight, busy_s, exposed_ps);
    out.bubble_fraction += f.bubble_fraction / static_cast<double>(by_stage.size());
    out.per_stage.push_back(std::move(f));
  }
  return out;
}

}  // namespace trainsim::driver
