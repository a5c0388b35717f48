#include "trainsim/sim/engine.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "sim/event_queue.hpp"
#include "sim/flow_solver.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::sim {
namespace {

// A transfer on a link and its share of the link's capacity.
struct OnLink {
  std::uint32_t task;
  std::uint32_t load_index;  // the link's position in the transfer's load
  double share;
};

// Shares summed in fixed point (2^-40 of a link's capacity): exact and independent of the order
// transfers begin and end in, so no rounding accumulates over a long run.
using FixedShare = std::int64_t;
constexpr FixedShare kWholeLink = FixedShare{1} << 40;
FixedShare fixed_share(double share) {  // shares are in (0, 1]: rounded half up
  return static_cast<FixedShare>(share * static_cast<double>(kWholeLink) + 0.5);
}

// The transfers on a link. While their shares sum to at most the link's capacity the link cannot
// fill up (every rate is at most 1), so it cannot slow any of them: only congested links couple
// transfers into one max-min problem.
struct LinkState {
  std::vector<OnLink> flows;
  FixedShare demand = 0;  // sum of the shares
  bool congested = false;
  bool dirty = false;         // in Engine::dirty_links_
  std::uint32_t visited = 0;  // the component search that last reached it
};

// The progress of a running task whose speed can change: a transfer, or compute beside
// communication kernels that hold some of its compute units. Only running tasks hold one (slots
// are reused), so a simulation of tens of millions of tasks keeps a few thousand.
struct Flow {
  double remaining_ps = 0;  // work left at full speed
  double rate = 1.0;
  Duration updated;
  std::uint32_t version = 0;           // finish events of other versions are stale
  std::uint32_t visited = 0;           // the component search that last reached it
  bool active = false;                 // a transfer on its links
  bool scheduled = false;              // its finish event is pushed
  bool dirty = false;                  // in Engine::dirty_
  std::vector<LinkShare> shared;       // a transfer's congested links (the only ones that can slow it)
  std::vector<std::uint32_t> on_link;  // per link of its load: its position in LinkState::flows
};

class Engine {
 public:
  static constexpr std::uint32_t kNoSlot = 0xffffffffu;

  explicit Engine(const TaskGraph& g) : g_(g) {
    const std::size_t n = g.num_tasks();
    timeline_.tasks.resize(n);
    timeline_.transfer_starts.resize(g.num_transfers());
    timeline_.pools.resize(g.num_pools());
    state_.assign(n, 0);
    started_.assign(n, false);
    finished_.assign(n, false);
    // successors in compressed rows: counted, then filled in task order, each row's begin serving
    // as its cursor (it ends at the next row's begin) and shifted back after: no cursor array
    successor_begin_.assign(n + 1, 0);
    for (std::uint32_t t = 0; t < n; ++t) {
      g.for_each_dependency(TaskId{t}, [&](TaskId d) {
        ++waiting(t);
        ++successor_begin_[d.index() + 1];
      });
    }
    for (std::size_t t = 0; t < n; ++t) successor_begin_[t + 1] += successor_begin_[t];
    successors_.resize(successor_begin_[n]);
    for (std::uint32_t t = 0; t < n; ++t)
      g.for_each_dependency(TaskId{t}, [&](TaskId d) { successors_[successor_begin_[d.index()]++] = t; });
    for (std::size_t t = n; t > 0; --t) successor_begin_[t] = successor_begin_[t - 1];
    if (n > 0) successor_begin_[0] = 0;
    std::uint32_t processes = 0;
    for (std::size_t s = 0; s < g.num_streams(); ++s)
      processes = std::max(processes, g.stream(StreamId{static_cast<std::uint32_t>(s)}).process + 1);
    for (std::uint32_t t = 0; t < n && !contention_; ++t)
      if (g.is_transfer(TaskId{t})) contention_ = std::get<CommWork>(g.work(TaskId{t})).compute_share > 0;
    for (std::size_t s = 0; s < g.num_streams() && !contention_; ++s)
      contention_ = g.stream(StreamId{static_cast<std::uint32_t>(s)}).shares_compute;
    if (contention_) {
      held_share_.assign(processes, 0.0);
      holders_.assign(processes, 0);
      sharing_.assign(processes, 0);
      computing_.resize(processes);
    }
    position_.assign(g.num_streams(), 0);
    busy_.assign(g.num_streams(), false);
    pool_bytes_.resize(g.num_pools());
    pool_kinds_.resize(g.num_pools());
    for (std::size_t p = 0; p < g.num_pools(); ++p) {
      pool_bytes_[p] = g.pool(PoolId{static_cast<std::uint32_t>(p)}).baseline;
      pool_kinds_[p][0] = pool_bytes_[p];
      timeline_.pools[p].peak = pool_bytes_[p];
      timeline_.pools[p].at_peak = pool_kinds_[p];
    }
  }

  Timeline run() {
    for (std::uint32_t t = 0; t < g_.num_tasks(); ++t) try_start(t);
    while (!events_.empty() || !dirty_.empty() || !dirty_links_.empty()) {
      // every change at this instant is in: new rates for the transfers they touched, once
      if ((!dirty_.empty() || !dirty_links_.empty()) && (events_.empty() || events_.top_time() > now_)) {
        solve_dirty();
        continue;
      }
      const Event e = events_.top();
      events_.pop();
      // the next event's task starts loading while this one is handled: the tasks of an
      // every-rank step are tens of millions, each one's records far from the last one's
      if (!events_.empty()) prefetch(events_.top().task);
      ++timeline_.events;
      now_ = e.time;
      if (e.kind == EventKind::LatencyDone) {
        begin_transfer(e.task);
      } else if (!finished_[e.task] && (slot(e.task) == kNoSlot || e.version == flows_[slot(e.task)].version)) {
        finish(e.task);
      }
    }
    check_all_finished();

    timeline_.makespan = now_;
    for (std::size_t p = 0; p < pool_bytes_.size(); ++p) timeline_.pools[p].final = pool_bytes_[p];
    return std::move(timeline_);
  }

 private:
  void push(Duration at, std::uint32_t task, EventKind kind, std::uint32_t version = 0) {
    events_.push(Event{at, task, version, kind});
  }

  void prefetch(std::uint32_t task) const {
    g_.prefetch(TaskId{task});
    __builtin_prefetch(&state_[task]);
    __builtin_prefetch(&timeline_.tasks[task]);
  }

  bool at_head_of_streams(std::uint32_t task) const {
    for (const auto s : g_.streams(TaskId{task})) {
      const auto& order = g_.stream_tasks(s);
      if (busy_[s.index()] || position_[s.index()] >= order.size() || order[position_[s.index()]].value != task)
        return false;
    }
    return true;
  }

  Flow& flow(std::uint32_t task) { return flows_[slot(task)]; }

  // A slot for a task whose speed can change, kept until it finishes.
  Flow& take_slot(std::uint32_t task) {
    if (free_slots_.empty()) {
      free_slots_.push_back(static_cast<std::uint32_t>(flows_.size()));
      flows_.emplace_back();
    }
    slot(task) = free_slots_.back();
    free_slots_.pop_back();
    auto& f = flows_[slot(task)];
    ++f.version;  // events of the slot's earlier tasks never match
    f.scheduled = false;
    f.dirty = false;
    return f;
  }

  void release_slot(std::uint32_t task) {
    if (slot(task) == kNoSlot) return;
    flows_[slot(task)].shared.clear();
    free_slots_.push_back(slot(task));
    slot(task) = kNoSlot;
  }

  void try_start(std::uint32_t task) {
    if (started_[task] || waiting(task) > 0 || !at_head_of_streams(task)) return;
    started_[task] = true;
    slot(task) = kNoSlot;
    const TaskId id{task};
    for (const auto s : g_.streams(id)) busy_[s.index()] = true;
    timeline_.tasks[task].start = now_;
    apply_memory(id, false);
    if (!g_.is_transfer(id)) {
      start_compute(task, g_.duration(id));
      return;
    }
    if (const double share = g_.compute_share(id); contention_ && share > 0) hold(id, share);
    if (const auto latency = g_.latency(id); latency > Duration::zero())
      push(now_ + latency, task, EventKind::LatencyDone);
    else
      begin_transfer(task);
  }

  void begin_transfer(std::uint32_t task) {
    const TaskId id{task};
    const auto transfer = g_.duration(id);
    timeline_.transfer_starts[g_.transfer_index(id)] = now_;
    const auto& load = g_.load(g_.load_of(id));
    if (transfer <= Duration::zero() || load.empty()) {
      push(now_ + transfer, task, EventKind::Finish);
      return;
    }
    auto& f = take_slot(task);
    f.remaining_ps = static_cast<double>(transfer.ps);
    f.updated = now_;
    f.rate = 1.0;
    f.active = true;
    bool congested = false;
    f.on_link.clear();
    for (std::uint32_t k = 0; k < load.size(); ++k) {
      const auto& s = load[k];
      auto& link = on_link(s.link);
      const bool was = link.congested;
      f.on_link.push_back(static_cast<std::uint32_t>(link.flows.size()));
      link.flows.push_back({task, k, s.share});
      link.demand += fixed_share(s.share);
      if (was) {
        f.shared.push_back(s);
      } else if (link.demand > kFull) {
        // The link can now run short of capacity: every transfer on it depends on the others.
        link.congested = true;
        for (const auto& o : link.flows) flow(o.task).shared.push_back({s.link, o.share});
      }
      congested = congested || link.congested;
    }
    // No link it crosses can fill up (the common case): full speed, nothing else changes.
    if (congested)
      mark_dirty(task);
    else
      schedule_finish(task);
  }

  // A compute task runs at full rate, or, while communication kernels hold some of its process's
  // compute units, at the rest; its finish moves whenever that changes.
  void start_compute(std::uint32_t task, Duration duration) {
    if (!contention_ || !on_device(task)) {
      push(now_ + duration, task, EventKind::Finish);
      return;
    }
    const auto process = process_of(task);
    auto& f = take_slot(task);
    f.remaining_ps = static_cast<double>(duration.ps);
    f.updated = now_;
    f.active = false;
    computing_[process].push_back(task);
    if (shares_compute(task)) {
      ++sharing_[process];
      rerate(process);  // this one included
      return;
    }
    f.rate = compute_rate(process);
    schedule_finish(task);
  }

  // A flow's work done since its last update, at its rate.
  void advance(Flow& f) {
    f.remaining_ps = std::max(0.0, f.remaining_ps - f.rate * static_cast<double>((now_ - f.updated).ps));
    f.updated = now_;
  }

  // The flow's finish at its current rate (earlier events of older versions are ignored).
  void schedule_finish(std::uint32_t task) {
    auto& f = flow(task);
    f.scheduled = true;
    push(now_ + Duration{static_cast<std::int64_t>(std::ceil(f.remaining_ps / f.rate))}, task, EventKind::Finish,
         f.version);
  }

  std::uint32_t process_of(std::uint32_t task) const { return g_.stream(g_.streams(TaskId{task}).front()).process; }
  bool on_device(std::uint32_t task) const { return g_.stream(g_.streams(TaskId{task}).front()).device; }

  bool shares_compute(std::uint32_t task) const { return g_.stream(g_.streams(TaskId{task}).front()).shares_compute; }

  double compute_rate(std::uint32_t process) const { return std::max(kMinComputeRate, 1.0 - held_share_[process]); }

  // A running compute task's rate: what communication leaves of the compute units, split evenly
  // among the tasks of the process's sharing streams when it is on one.
  double rate_of(std::uint32_t task, std::uint32_t process) const {
    const double rate = compute_rate(process);
    return shares_compute(task) ? rate / std::max(1, sharing_[process]) : rate;
  }

  // The process's running compute tasks at their new rates, their finishes moved.
  void rerate(std::uint32_t process) {
    for (const auto c : computing_[process]) {
      auto& f = flow(c);
      advance(f);
      f.rate = rate_of(c, process);
      ++f.version;
      schedule_finish(c);
    }
  }

  // A communication task takes (share > 0) or gives back (< 0) compute units on each participant.
  void hold(TaskId t, double share) {
    processes_.clear();
    for (const auto s : g_.streams(t)) processes_.push_back(g_.stream(s).process);
    std::sort(processes_.begin(), processes_.end());
    processes_.erase(std::unique(processes_.begin(), processes_.end()), processes_.end());
    for (const auto p : processes_) {
      holders_[p] += share > 0 ? 1 : -1;
      // exactly zero once nothing holds any: no residue of rounding
      held_share_[p] = holders_[p] == 0 ? 0.0 : held_share_[p] + share;
      rerate(p);
    }
  }

  void finish(std::uint32_t task) {
    finished_[task] = true;
    const TaskId id{task};
    timeline_.tasks[task].end = now_;
    apply_memory(id, true);
    const bool transfer = g_.is_transfer(id);
    if (contention_) {
      if (!transfer) {
        if (on_device(task)) {
          const auto process = process_of(task);
          auto& mine = computing_[process];
          mine.erase(std::find(mine.begin(), mine.end(), task));
          if (shares_compute(task)) {
            --sharing_[process];
            rerate(process);
          }
        }
      } else if (const auto share = g_.compute_share(id); share > 0) {
        hold(id, -share);
      }
    }
    if (slot(task) != kNoSlot && flow(task).active) {
      auto& mine = flow(task);
      mine.active = false;
      const auto& load = g_.load(g_.load_of(id));
      for (std::uint32_t k = 0; k < load.size(); ++k) {
        const auto& s = load[k];
        auto& link = flows_on_link_[s.link];
        // out of the link's list: the last entry takes its place
        const auto at = mine.on_link[k];
        if (at + 1 != link.flows.size()) {
          link.flows[at] = link.flows.back();
          flow(link.flows[at].task).on_link[link.flows[at].load_index] = at;
        }
        link.flows.pop_back();
        link.demand -= fixed_share(s.share);
        if (!link.congested) continue;
        if (!link.dirty) {  // the rates of its transfers change
          link.dirty = true;
          dirty_links_.push_back(s.link);
        }
        if (link.demand <= kFull) {  // the link can no longer fill up
          link.congested = false;
          for (const auto& o : link.flows) {
            auto& other = flow(o.task).shared;
            other.erase(std::find_if(other.begin(), other.end(), [&](const LinkShare& x) { return x.link == s.link; }));
          }
        }
      }
    }
    release_slot(task);
    for (const auto s : g_.streams(id)) {
      busy_[s.index()] = false;
      ++position_[s.index()];
    }
    for (const auto s : g_.streams(id)) {
      const auto& order = g_.stream_tasks(s);
      if (position_[s.index()] < order.size()) try_start(order[position_[s.index()]].value);
    }
    for (auto i = successor_begin_[task]; i < successor_begin_[task + 1]; ++i) {
      const auto next = successors_[i];
      --waiting(next);
      try_start(next);
    }
  }

  LinkState& on_link(std::uint32_t link) {
    if (link >= flows_on_link_.size()) flows_on_link_.resize(link + 1);
    return flows_on_link_[link];
  }

  // The transfers whose links changed at this instant (began, ended, filled up or freed), with
  // every transfer connected to them through congested links, get their max-min rates: one solve
  // per connected set and instant, however many transfers began or ended at it.
  void solve_dirty() {
    for (const auto l : dirty_links_) {
      auto& link = flows_on_link_[l];
      link.dirty = false;
      for (const auto& o : link.flows) mark_dirty(o.task);
    }
    dirty_links_.clear();
    std::sort(dirty_.begin(), dirty_.end());
    ++visit_;
    for (const auto t : dirty_) {
      if (slot(t) == kNoSlot) continue;  // ended since
      flow(t).dirty = false;
      if (!flow(t).active || flow(t).visited == visit_) continue;
      component_of(t);
      reschedule(component_);
    }
    dirty_.clear();
  }

  void mark_dirty(std::uint32_t task) {
    auto& f = flow(task);
    if (f.dirty) return;
    f.dirty = true;
    dirty_.push_back(task);
  }

  // Active transfers connected to `task` through congested links, sorted, into component_ (the
  // search's marks are those of the current visit_).
  void component_of(std::uint32_t task) {
    auto& seen = component_;
    seen.assign(1, task);
    flow(task).visited = visit_;
    for (std::size_t next = 0; next < seen.size(); ++next) {
      for (const auto& s : flow(seen[next]).shared) {
        auto& link = flows_on_link_[s.link];
        if (link.visited == visit_) continue;  // its transfers are all seen already
        link.visited = visit_;
        for (const auto& o : link.flows) {
          auto& f = flow(o.task);
          if (f.visited == visit_) continue;
          f.visited = visit_;
          seen.push_back(o.task);
        }
      }
    }
    std::sort(seen.begin(), seen.end());
  }

  void reschedule(const std::vector<std::uint32_t>& ids) {
    loads_.clear();
    for (const auto t : ids) loads_.push_back(&flow(t).shared);  // links it cannot fill never limit it
    const auto& rates = solver_.solve(loads_);
    ++timeline_.rate_updates;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto& f = flow(ids[i]);
      // at an unchanged rate its finish stands (a transfer that just began has none yet)
      if (f.scheduled && rates[i] == f.rate) continue;
      advance(f);
      f.rate = rates[i];
      ++f.version;
      schedule_finish(ids[i]);
    }
  }

  void apply_memory(TaskId t, bool at_end) {
    g_.for_each_memory(t, [&](const MemoryEffect& m) {
      if (m.at_end != at_end) return;
      auto& bytes = pool_bytes_[m.pool.index()];
      bytes += m.bytes;
      pool_kinds_[m.pool.index()][m.kind] += m.bytes;
      auto& usage = timeline_.pools[m.pool.index()];
      if (bytes > usage.peak) {
        usage.peak = bytes;
        usage.peak_time = now_;
        usage.at_peak = pool_kinds_[m.pool.index()];
        usage.peak_task = t;
      }
    });
  }

  void check_all_finished() const {
    std::vector<std::string> stuck;
    for (std::uint32_t t = 0; t < finished_.size() && stuck.size() < 5; ++t)
      if (!finished_[t]) stuck.push_back(g_.name(TaskId{t}));
    SIM_ASSERT(stuck.empty(), "tasks that can never run (a cycle, or streams waiting on each other), e.g. {}",
               fmt::join(stuck, ", "));
  }

  const TaskGraph& g_;
  Timeline timeline_;
  EventQueue events_;
  Duration now_ = Duration::zero();
  // Per task: until it starts, how many of its dependencies have not ended; from then on, its flow
  // (slots reused) while it runs, or kNoSlot. One array for both: an every-rank step has tens of
  // millions of tasks.
  std::vector<std::uint32_t> state_;
  std::uint32_t& waiting(std::uint32_t task) { return state_[task]; }
  std::uint32_t& slot(std::uint32_t task) { return state_[task]; }
  std::vector<std::uint32_t> successor_begin_;  // per task and one past: its range in successors_
  std::vector<std::uint32_t> successors_;
  std::vector<bool> started_;
  std::vector<bool> finished_;
  std::vector<std::size_t> position_;
  std::vector<bool> busy_;
  std::vector<std::int64_t> pool_bytes_;
  std::vector<std::array<std::int64_t, kMemoryKinds>> pool_kinds_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<LinkState> flows_on_link_;  // per link id
  std::uint32_t visit_ = 0;
  MaxMinSolver solver_;
  // scratch space
  std::vector<std::uint32_t> dirty_;        // transfers whose rates are due at this instant
  std::vector<std::uint32_t> dirty_links_;  // congested links a transfer left at this instant
  std::vector<std::uint32_t> component_;
  std::vector<std::uint32_t> processes_;
  std::vector<const std::vector<LinkShare>*> loads_;
  // Compute slowed by communication kernels (only when some task holds compute units).
  static constexpr double kMinComputeRate = 0.05;
  // A link is congested above this sum of shares (a margin for the shares' rounding).
  static constexpr FixedShare kFull = kWholeLink + (kWholeLink >> 30);
  bool contention_ = false;
  std::vector<double> held_share_;                     // per process
  std::vector<int> holders_;                           // per process: communication tasks holding units
  std::vector<int> sharing_;                           // per process: running tasks of sharing streams
  std::vector<std::vector<std::uint32_t>> computing_;  // per process: running compute tasks
};

}  // namespace

Timeline run(const TaskGraph& graph) {
  return Engine(graph).run();
}

std::optional<TaskId> last_predecessor(const TaskGraph& graph, const Timeline& timeline, TaskId task) {
  std::optional<TaskId> last;
  const auto consider = [&](TaskId p) {
    if (!last || timeline.tasks[p.index()].end > timeline.tasks[last->index()].end) last = p;
  };
  graph.for_each_dependency(task, consider);
  for (const auto s : graph.streams(task)) {
    // a stream's tasks are in increasing id order: the one before `task`
    const auto& order = graph.stream_tasks(s);
    const auto at = std::lower_bound(order.begin(), order.end(), task);
    if (at != order.begin()) consider(*(at - 1));
  }
  return last;
}

}  // namespace trainsim::sim
