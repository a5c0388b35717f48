// Replaying recorded traces on the engine (DESIGN.md "Replaying real traces", after Lumos, MLSys
// 2025): the GPU is busy a fraction of each step, so the CPU threads that launch the kernels are
// replayed as resources too.
//
// Per rank: every CPU thread is a stream of its CUDA runtime calls with the recorded gaps between
// them (operator dispatch, Python, data loading); every GPU stream runs its ops in recorded order,
// each after the runtime call that launched it (correlation ids). A synchronisation call (or a
// copy to pageable memory) waits for the GPU op that finished while it blocked and keeps only the
// time it spent after; cudaStreamWaitEvent makes the next op launched wait for the op before the
// matching cudaEventRecord, unless the recording shows the two overlapping. An op that started
// later than its launch and stream allowed waited for an op of another stream that ended just
// before (inferred), or for something unrecorded (the delay is kept, as launch latency is).
// Ops whose launch the trace lost follow the main thread's last call before their start. Profiler steps are marker
// tasks on their thread. With several rank files, the k-th NCCL kernel of a process group on each
// rank is one collective across their streams, lasting the shortest recorded instance (the others
// include waiting for peers).
//
// Unchanged, a replay reproduces the recording; the what-ifs change kernel and collective
// durations and let the dependencies above decide what moves.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "trace/intervals.hpp"
#include "trainsim/cost/cost_model.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

using sim::TaskId;

constexpr std::int64_t kCallCostNs = 5'000;   // what a blocking call costs the CPU besides waiting
constexpr std::int64_t kBurstGapNs = 50'000;  // idle time that separates bursts of calls on a thread

// Recorded nanoseconds as a Duration (the reader keeps them below a day).
Duration ns(std::int64_t v) {
  return v <= 0 ? Duration::zero() : v >= Duration::max().ps / 1000 ? Duration::max() : nanoseconds(v);
}

bool is_sync(std::string_view name) {
  return name == "cudaStreamSynchronize" || name == "cudaDeviceSynchronize" || name == "cudaEventSynchronize" ||
         name == "cudaMemcpy" || name == "cuStreamSynchronize" || name == "cuCtxSynchronize";
}

// A copy call that returned only after its copy finished (to pageable memory) waited for it.
bool blocking_copy(const RankTrace& t, const RuntimeCall& call, const GpuOp& op) {
  return t.names.at(call.name).find("Memcpy") != std::string::npos && op.end_ns() <= call.end_ns() + 1'000;
}

// Lookups over one rank's trace that several passes of the replay share, built once.
struct RankIndex {
  explicit RankIndex(const RankTrace& t) {
    by_end.resize(t.gpu.size());
    for (std::size_t i = 0; i < by_end.size(); ++i) by_end[i] = i;
    std::sort(by_end.begin(), by_end.end(),
              [&](std::size_t a, std::size_t b) { return t.gpu[a].end_ns() < t.gpu[b].end_ns(); });
    for (const auto& c : t.runtime)
      if (c.correlation >= 0) launch_of.emplace(c.correlation, &c);
    for (std::size_t i = 0; i < t.gpu.size(); ++i)
      if (t.gpu[i].correlation >= 0) op_of.emplace(t.gpu[i].correlation, i);
    // the thread that drives the rank: the one annotating profiler steps, else the busiest
    if (!t.steps.empty()) {
      main_thread = t.steps.front().thread;
    } else {
      std::map<std::int64_t, std::int64_t> calls;
      for (const auto& c : t.runtime) ++calls[c.thread];
      std::int64_t most = -1;
      for (const auto& [thread, n] : calls)
        if (n > most) main_thread = thread, most = n;
    }
    for (const auto& c : t.runtime)  // in start order
      if (c.thread == main_thread) main_calls.push_back(&c);
  }

  // The last call of the main thread that had returned by `time`, if any.
  const RuntimeCall* returned_by(std::int64_t time) const {
    auto after = std::lower_bound(main_calls.begin(), main_calls.end(), time,
                                  [](const RuntimeCall* c, std::int64_t v) { return c->start_ns < v; });
    while (after != main_calls.begin() && (*std::prev(after))->end_ns() > time) --after;
    return after == main_calls.begin() ? nullptr : *std::prev(after);
  }

  std::vector<std::size_t> by_end;                       // GPU ops by end time
  std::map<std::int64_t, const RuntimeCall*> launch_of;  // correlation -> runtime call
  std::map<std::int64_t, std::size_t> op_of;             // correlation -> GPU op
  std::int64_t main_thread = 0;
  std::vector<const RuntimeCall*> main_calls;
};

// What one rank's replay keeps to read its results.
struct RankGraph {
  std::vector<TaskId> gpu_task;                  // per GPU op
  std::vector<std::pair<TaskId, TaskId>> steps;  // start and end markers per profiler step
};

class Builder {
 public:
  Builder(const std::vector<RankTrace>& traces, const ReplayOptions& options)
      : traces_(traces), options_(options), costs_(options.costs) {}

  std::vector<RankGraph> build() {
    std::vector<RankGraph> out(traces_.size());
    for (const auto& t : traces_) index_.emplace_back(t);
    for (std::size_t r = 0; r < traces_.size(); ++r) {
      find_awaited(r);
      build_cpu(r, out[r]);
    }
    const auto matched = match_collectives();
    build_gpu(out, matched);
    for (std::size_t r = 0; r < traces_.size(); ++r) add_synchronisation(r, out[r]);
    return out;
  }

  sim::TaskGraph& graph() { return graph_; }
  std::vector<std::string>& notes() { return notes_; }

 private:
  struct CpuEvent {
    std::int64_t start = 0;
    std::int64_t end = 0;
    const RuntimeCall* call = nullptr;  // null: a step marker
    std::size_t step = 0;
    bool step_end = false;
  };

  // The GPU op each synchronisation call waited for: the last to finish during the call, not
  // launched by its own thread after it began. A call during which nothing finished did not wait.
  void find_awaited(std::size_t r) {
    const auto& t = traces_[r];
    const auto& by_end = index_[r].by_end;
    const auto& launch_of = index_[r].launch_of;
    auto& awaited = awaited_[r];
    for (const auto& c : t.runtime) {
      if (!is_sync(t.names.at(c.name))) continue;
      const auto it = std::upper_bound(by_end.begin(), by_end.end(), c.end_ns() + 1000,
                                       [&](std::int64_t v, std::size_t i) { return v < t.gpu[i].end_ns(); });
      if (it == by_end.begin()) continue;
      const auto op = *std::prev(it);
      if (t.gpu[op].end_ns() < c.start_ns) continue;  // nothing was pending: no wait
      const auto l = launch_of.find(t.gpu[op].correlation);
      if (l != launch_of.end() && l->second->thread == c.thread && l->second->start_ns > c.start_ns) continue;
      awaited.emplace(&c, op);
    }
  }

  // The CPU threads: runtime calls and step markers in time order, separated by the recorded gaps.
  void build_cpu(std::size_t r, RankGraph& rg) {
    const auto& t = traces_[r];
    std::map<std::int64_t, std::vector<CpuEvent>> threads;
    for (const auto& c : t.runtime) threads[c.thread].push_back({c.start_ns, c.end_ns(), &c});
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      const auto& st = t.steps[s];
      threads[st.thread].push_back({st.start_ns, st.start_ns, nullptr, s, false});
      threads[st.thread].push_back({st.end_ns(), st.end_ns(), nullptr, s, true});
    }
    rg.steps.assign(t.steps.size(), {TaskId{0}, TaskId{0}});
    // a copy call that returned only after its copy finished (to pageable memory) waited for it
    const auto& op_of = index_[r].op_of;
    const auto blocking = [&](const RuntimeCall& c) -> std::optional<std::size_t> {
      const auto op = op_of.find(c.correlation);
      if (op == op_of.end() || !blocking_copy(t, c, t.gpu[op->second])) return std::nullopt;
      return op->second;
    };
    auto& calls = call_task_[r];
    // the main thread first: the others' bursts of calls follow its progress
    const auto main = index_[r].main_thread;
    std::vector<std::int64_t> order;
    if (threads.contains(main)) order.push_back(main);
    for (const auto& [thread, events] : threads)
      if (thread != main) order.push_back(thread);
    for (const auto thread : order) {
      auto& events = threads.at(thread);
      std::stable_sort(events.begin(), events.end(),
                       [](const CpuEvent& a, const CpuEvent& b) { return a.start < b.start; });
      const auto stream = graph_.add_stream({fmt::format("cpu {}", thread), static_cast<std::uint32_t>(r), 0});
      std::int64_t now = 0;
      for (const auto& e : events) {
        if (thread != main && e.start - now > kBurstGapNs) {
          // a burst on another thread (autograd's backward thread, a data-loader's copies)
          // starts what the main thread set off: the last call it had returned from, plus the
          // recorded gap
          if (const auto* anchor = index_[r].returned_by(e.start)) {
            const TaskId dep[] = {calls.at(anchor)};
            graph_.add_task("cpu", stream, sim::ComputeWork{ns(e.start - std::max(now, anchor->end_ns()))}, dep);
            now = e.start;
            ++anchored_bursts_;
          }
        }
        if (e.start > now) graph_.add_task("cpu", stream, sim::ComputeWork{ns(e.start - now)});
        if (e.call == nullptr) {
          const auto marker =
              graph_.add_task(e.step_end ? "step end" : "step start", stream, sim::ComputeWork{Duration::zero()});
          (e.step_end ? rg.steps[e.step].second : rg.steps[e.step].first) = marker;
          now = std::max(now, e.start);
          continue;
        }
        const auto& name = t.names.at(e.call->name);
        // a synchronisation's wait is replayed by its dependency; only its own cost stays
        // a call that waited for the GPU keeps what it spent after the op finished; the wait
        // itself is its dependency
        const auto copy = blocking(*e.call);
        const auto awaited = awaited_[r].find(e.call);
        const auto after = [&](std::size_t op) {
          return std::clamp<std::int64_t>(e.call->end_ns() - t.gpu[op].end_ns(), 0, e.call->dur_ns);
        };
        const auto cost = awaited != awaited_[r].end() ? after(awaited->second)
                          : copy                       ? std::min<std::int64_t>(e.call->dur_ns, kCallCostNs)
                                                       : e.call->dur_ns;
        calls[e.call] = graph_.add_task(sim::TaskName(name), stream, sim::ComputeWork{ns(cost)});
        if (copy && awaited == awaited_[r].end())
          copy_waits_.push_back(
              {r, *copy, graph_.add_task("wait for copy", stream, sim::ComputeWork{ns(after(*copy))})});
        now = std::max(now, e.end);
      }
    }
  }

  // The k-th NCCL kernel of a process group on every rank given, when all ranks have the same
  // number of them: one collective.
  struct Match {
    std::vector<std::pair<std::size_t, std::size_t>> members;  // (rank index, GPU op index)
  };
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> match_collectives() {
    std::map<std::pair<std::size_t, std::size_t>, std::size_t> of;
    if (traces_.size() < 2) return of;
    // per rank: NCCL ops by process group (its ranks, or the stream when not recorded)
    std::vector<std::map<std::string, std::vector<std::size_t>>> groups(traces_.size());
    for (std::size_t r = 0; r < traces_.size(); ++r) {
      const auto& t = traces_[r];
      for (std::size_t i = 0; i < t.gpu.size(); ++i) {
        const auto& g = t.gpu[i];
        if (!g.collective) continue;
        const auto key = g.collective->ranks.empty() ? fmt::format("stream {}", g.stream)
                                                     : fmt::format("{}", fmt::join(g.collective->ranks, ","));
        groups[r][key].push_back(i);
      }
    }
    for (const auto& [key, ops] : groups.front()) {
      bool everywhere = true;
      for (std::size_t r = 1; r < traces_.size(); ++r) {
        const auto it = groups[r].find(key);
        everywhere = everywhere && it != groups[r].end() && it->second.size() == ops.size();
      }
      if (!everywhere) {
        notes_.push_back(
            fmt::format("NCCL kernels of group {} differ in number across the files: replayed per rank", key));
        continue;
      }
      for (std::size_t k = 0; k < ops.size(); ++k) {
        Match m;
        for (std::size_t r = 0; r < traces_.size(); ++r) m.members.emplace_back(r, groups[r].at(key)[k]);
        for (const auto& member : m.members) of[member] = matches_.size();
        matches_.push_back(std::move(m));
      }
    }
    if (!matches_.empty())
      notes_.push_back(fmt::format("{} collectives matched across {} ranks", matches_.size(), traces_.size()));
    return of;
  }

  Duration nccl_duration(const GpuOp& g, Duration recorded) {
    const auto& c = *g.collective;
    const auto bytes = c.bytes();
    if (bytes > 0 && c.group_size >= 2) {
      if (costs_) {
        cost::Group group;
        if (!c.ranks.empty() && static_cast<int>(c.ranks.size()) == c.group_size) {
          for (const int rank : c.ranks) group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(rank)});
        } else {
          for (int rank = 0; rank < c.group_size; ++rank)
            group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(rank)});
        }
        std::sort(group.devices.begin(), group.devices.end());
        if (static_cast<std::int64_t>(group.devices.back().value) < costs_->topology().num_devices()) {
          ++costed_;
          return costs_->cost(cost::make_collective(cost::collective_kind_from_name(c.op), Bytes{bytes}), group).time;
        }
      } else if (options_.fits) {
        for (const auto& f : *options_.fits) {
          if (f.op != c.op || f.group_size != c.group_size) continue;
          ++costed_;
          return f.time(Bytes{bytes});
        }
      }
    }
    return Duration::from_seconds(recorded.seconds() / options_.network_scale);
  }

  // GPU ops of every rank in each stream's recorded order. A collective occupies the streams of
  // all its ranks, so it is issued once every member has issued what precedes it.
  void build_gpu(std::vector<RankGraph>& out,
                 const std::map<std::pair<std::size_t, std::size_t>, std::size_t>& matched) {
    launch_.resize(traces_.size());
    for (std::size_t r = 0; r < traces_.size(); ++r) {
      out[r].gpu_task.assign(traces_[r].gpu.size(), TaskId{0});
      late_.push_back(analyse_starts(r));
    }
    std::vector<std::size_t> next(traces_.size(), 0);
    const auto match_of = [&](std::size_t r, std::size_t i) -> std::optional<std::size_t> {
      const auto m = matched.find({r, i});
      return m == matched.end() ? std::nullopt : std::optional(m->second);
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t r = 0; r < traces_.size(); ++r) {
        while (next[r] < traces_[r].gpu.size()) {
          const auto i = next[r];
          const auto m = match_of(r, i);
          if (m && !std::all_of(matches_[*m].members.begin(), matches_[*m].members.end(),
                                [&](const auto& member) { return next[member.first] == member.second; }))
            break;  // a member still has ops before it
          if (m) {
            issue_collective(*m, out);
            for (const auto& [mr, mi] : matches_[*m].members) ++next[mr];
          } else {
            issue(r, i, out[r]);
            ++next[r];
          }
          progress = true;
        }
      }
    }
    for (std::size_t r = 0; r < traces_.size(); ++r)
      SIM_ASSERT(next[r] == traces_[r].gpu.size(), "collectives matched out of order across ranks");
  }

  std::vector<TaskId> launch_dependency(std::size_t r, std::size_t i) {
    const auto& g = traces_[r].gpu[i];
    const auto& launch_of = index_[r].launch_of;
    const auto l = launch_of.find(g.correlation);
    if (l == launch_of.end() || !call_task_[r].contains(l->second)) return anchor_unlaunched(r, i);
    launch_[r][i] = l->second;
    return {call_task_[r].at(l->second)};
  }

  // An op whose launch the trace lost (sampled or filtered traces lose some) follows the last
  // call its rank's main thread had returned from when the op started; the recorded gap after
  // that call is kept as its delay (analyse_starts).
  std::vector<TaskId> anchor_unlaunched(std::size_t r, std::size_t i) {
    ++unlaunched_;
    const auto* anchor = late_[r][i].anchor;
    if (anchor == nullptr || !call_task_[r].contains(anchor)) return {};
    return {call_task_[r].at(anchor)};
  }

  void issue(std::size_t r, std::size_t i, RankGraph& rg) {
    const auto& t = traces_[r];
    const auto& g = t.gpu[i];
    auto deps = launch_dependency(r, i);
    const auto stream = gpu_stream(r, g.stream);
    if (const auto delay = late_[r][i].delay_ns; delay > 0) {
      // the unexplained wait, after the launch and the stream's previous op
      auto& [delays, last] = delay_streams_[{r, g.stream}];
      if (!delays)
        delays = graph_.add_stream({fmt::format("stream {} waits", g.stream), static_cast<std::uint32_t>(r), 1});
      if (last) deps.push_back(*last);
      deps = {graph_.add_task("unrecorded wait", *delays, sim::ComputeWork{ns(delay)}, deps)};
      ++delayed_;
      if (delay > 10'000) ++long_delays_;
    }
    const Duration recorded = ns(g.dur_ns);
    const Duration duration =
        g.collective ? nccl_duration(g, recorded) : Duration::from_seconds(recorded.seconds() / options_.compute_scale);
    rg.gpu_task[i] = graph_.add_task(sim::TaskName(t.names.at(g.name)), stream, sim::ComputeWork{duration}, deps,
                                     g.collective ? 1 : 0);
    delay_streams_[{r, g.stream}].second = rg.gpu_task[i];
  }

  void issue_collective(std::size_t match, std::vector<RankGraph>& out) {
    std::vector<sim::StreamId> streams;
    std::vector<TaskId> deps;
    Duration shortest = Duration::max();
    for (const auto& [r, i] : matches_[match].members) {
      const auto& g = traces_[r].gpu[i];
      streams.push_back(gpu_stream(r, g.stream));
      const auto d = launch_dependency(r, i);
      deps.insert(deps.end(), d.begin(), d.end());
      shortest = std::min(shortest, ns(g.dur_ns));
    }
    const auto& [r0, i0] = matches_[match].members.front();
    const auto& g0 = traces_[r0].gpu[i0];
    std::sort(deps.begin(), deps.end());
    const auto task = graph_.add_task(sim::TaskName(traces_[r0].names.at(g0.name)), streams,
                                      sim::ComputeWork{nccl_duration(g0, shortest)}, deps, 1);
    for (const auto& [r, i] : matches_[match].members) out[r].gpu_task[i] = task;
  }

  sim::StreamId gpu_stream(std::size_t r, std::int64_t stream) {
    auto& streams = gpu_streams_[r];
    if (!streams.contains(stream))
      streams[stream] = graph_.add_stream({fmt::format("stream {}", stream), static_cast<std::uint32_t>(r), 1});
    return streams.at(stream);
  }

  // Why each op started when it did. An op that started well after both its launch and its
  // stream's previous op waited for something: when an op of another stream ended just before,
  // that op (an event wait the trace does not show, e.g. a filtered cudaStreamWaitEvent);
  // otherwise something the trace does not record at all (a host callback, a peer's proxy),
  // and the recorded delay is kept.
  struct LateStart {
    std::optional<std::size_t> waited_for;  // op of another stream
    std::int64_t delay_ns = 0;              // unexplained
    const RuntimeCall* anchor = nullptr;    // stands in for a launch the trace lost
  };
  std::vector<LateStart> analyse_starts(std::size_t r) {
    constexpr std::int64_t kSlackNs = 10'000;  // launch latency and queueing
    constexpr std::int64_t kToleranceNs = 1'000;
    const auto& t = traces_[r];
    const auto& by_end = index_[r].by_end;
    const auto& launch_of = index_[r].launch_of;

    std::vector<LateStart> out(t.gpu.size());
    std::map<std::int64_t, std::int64_t> stream_free;
    for (std::size_t i = 0; i < t.gpu.size(); ++i) {
      const auto& g = t.gpu[i];
      std::int64_t ready = stream_free[g.stream];
      stream_free[g.stream] = std::max(ready, g.end_ns());
      const auto l = launch_of.find(g.correlation);
      if (l != launch_of.end()) {
        // when the replayed launch returns: a blocking copy's call returns before its wait
        const auto& call = *l->second;
        ready = std::max(
            ready, call.start_ns + (blocking_copy(t, call, g) ? std::min(call.dur_ns, kCallCostNs) : call.dur_ns));
      } else if ((out[i].anchor = index_[r].returned_by(g.start_ns))) {
        ready = std::max(ready, out[i].anchor->end_ns());  // the last call that had returned
      }
      if (g.start_ns <= ready) continue;
      if (g.start_ns - ready <= kSlackNs) {
        out[i].delay_ns = g.start_ns - ready;  // launch latency
        continue;
      }
      const auto it = std::upper_bound(by_end.begin(), by_end.end(), g.start_ns + kToleranceNs,
                                       [&](std::int64_t v, std::size_t k) { return v < t.gpu[k].end_ns(); });
      for (auto k = it; k != by_end.begin();) {
        const auto& other = t.gpu[*--k];
        if (other.end_ns() < g.start_ns - kSlackNs || other.end_ns() <= ready) break;
        if (other.stream == g.stream) continue;
        out[i].waited_for = *k;
        break;
      }
      if (!out[i].waited_for) out[i].delay_ns = g.start_ns - ready;
    }
    return out;
  }

  void add_synchronisation(std::size_t r, RankGraph& rg) {
    const auto& t = traces_[r];
    // launches per thread in order, with the op each launched
    std::map<std::int64_t, std::vector<std::pair<const RuntimeCall*, std::size_t>>> launched;
    for (const auto& [op, call] : launch_[r]) launched[call->thread].emplace_back(call, op);
    for (auto& [thread, list] : launched)
      std::sort(list.begin(), list.end(),
                [](const auto& a, const auto& b) { return a.first->start_ns < b.first->start_ns; });
    // per GPU stream: (launch time, op) in launch order
    std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::size_t>>> launched_on;
    for (const auto& [op, call] : launch_[r]) launched_on[t.gpu[op].stream].emplace_back(call->start_ns, op);
    for (auto& [stream, ops] : launched_on) std::sort(ops.begin(), ops.end());

    for (std::size_t i = 0; i < late_[r].size(); ++i) {
      const auto waited = late_[r][i].waited_for;
      if (!waited || rg.gpu_task[*waited] == rg.gpu_task[i]) continue;
      graph_.add_dependency(rg.gpu_task[i], rg.gpu_task[*waited]);
      ++inferred_;
    }
    for (const auto& w : copy_waits_)
      if (w.rank == r) graph_.add_dependency(w.wait, rg.gpu_task[w.op]);

    const RuntimeCall* last_record = nullptr;
    for (const auto& c : t.runtime) {
      const auto& name = t.names.at(c.name);
      if (name == "cudaEventRecord") last_record = &c;
      if (const auto awaited = awaited_[r].find(&c); awaited != awaited_[r].end()) {
        graph_.add_dependency(call_task_[r].at(&c), rg.gpu_task[awaited->second]);
        ++syncs_;
        // a device-wide synchronisation also waits for what another stream would finish later
        // once durations change
        if (name == "cudaDeviceSynchronize" || name == "cuCtxSynchronize") {
          for (const auto& [stream, ops] : launched_on) {
            const auto last = std::lower_bound(ops.begin(), ops.end(), c.start_ns,
                                               [](const auto& x, std::int64_t v) { return x.first < v; });
            if (last != ops.begin()) graph_.add_dependency(call_task_[r].at(&c), rg.gpu_task[std::prev(last)->second]);
          }
        }
      } else if (name == "cudaStreamWaitEvent" && last_record != nullptr && last_record->thread == c.thread) {
        const auto& list = launched[c.thread];
        const auto before = std::find_if(list.rbegin(), list.rend(),
                                         [&](const auto& x) { return x.first->start_ns < last_record->start_ns; });
        const auto after =
            std::find_if(list.begin(), list.end(), [&](const auto& x) { return x.first->start_ns > c.start_ns; });
        if (before == list.rend() || after == list.end()) continue;
        if (t.gpu[before->second].stream == t.gpu[after->second].stream) continue;
        // Kineto does not say which stream an event was recorded on; an edge the recording
        // contradicts (the waiting op started before the other ended) is not the one
        if (t.gpu[after->second].start_ns < t.gpu[before->second].end_ns()) {
          ++contradicted_;
          continue;
        }
        graph_.add_dependency(rg.gpu_task[after->second], rg.gpu_task[before->second]);
        ++waits_;
      }
    }
  }

 public:
  void finish_notes() {
    if (unlaunched_ > 0)
      notes_.push_back(fmt::format(
          "{} GPU op(s) without a recorded launch follow the main thread's last call before them", unlaunched_));
    notes_.push_back(fmt::format("{} synchronisation call(s) wait for a GPU op, {} stream wait(s) order two streams",
                                 syncs_, waits_));
    if (anchored_bursts_ > 0)
      notes_.push_back(fmt::format("{} burst(s) of calls on other threads follow the main thread", anchored_bursts_));
    if (delayed_ > 0)
      notes_.push_back(
          fmt::format("{} GPU op(s) started after their launch and stream allowed (launch latency, or "
                      "a wait the trace does not record): the delay is kept, {} of them over 10 us",
                      delayed_, long_delays_));
    if (inferred_ > 0) notes_.push_back(fmt::format("{} cross-stream wait(s) inferred from late starts", inferred_));
    if (contradicted_ > 0)
      notes_.push_back(
          fmt::format("{} stream wait(s) ignored: the recording shows the ops overlapping", contradicted_));
    if (costs_ || options_.fits)
      notes_.push_back(fmt::format("{} NCCL kernel(s) costed by the {}", costed_,
                                   costs_ ? "cost model on the given topology" : "calibration's fits"));
  }

 private:
  const std::vector<RankTrace>& traces_;
  const ReplayOptions& options_;
  sim::TaskGraph graph_;
  std::vector<RankIndex> index_;  // per rank
  std::map<std::size_t, std::map<const RuntimeCall*, TaskId>> call_task_;
  std::map<std::size_t, std::map<const RuntimeCall*, std::size_t>> awaited_;  // sync call -> GPU op
  std::map<std::size_t, std::map<std::int64_t, sim::StreamId>> gpu_streams_;
  std::vector<std::map<std::size_t, const RuntimeCall*>> launch_;  // per rank: op -> its launch
  std::vector<Match> matches_;
  struct CopyWait {
    std::size_t rank;
    std::size_t op;
    TaskId wait;
  };
  std::vector<CopyWait> copy_waits_;
  std::vector<std::vector<LateStart>> late_;  // per rank, per GPU op
  // per (rank, GPU stream): the stream holding its unexplained waits, and its last op
  std::map<std::pair<std::size_t, std::int64_t>, std::pair<std::optional<sim::StreamId>, std::optional<TaskId>>>
      delay_streams_;
  std::int64_t delayed_ = 0;
  std::int64_t anchored_bursts_ = 0;
  std::int64_t long_delays_ = 0;
  cost::CostModel* costs_;
  std::vector<std::string> notes_;
  std::int64_t unlaunched_ = 0;
  std::int64_t syncs_ = 0;
  std::int64_t waits_ = 0;
  std::int64_t contradicted_ = 0;
  std::int64_t inferred_ = 0;
  std::int64_t costed_ = 0;
};

}  // namespace

TraceReport replay(const std::vector<RankTrace>& traces, const ReplayOptions& options) {
  // a day of trace slowed 100× still fits the 106 days a Duration holds
  for (const auto& [name, scale] :
       {std::pair{"--compute-scale", options.compute_scale}, std::pair{"--network-scale", options.network_scale}})
    if (!(scale >= 0.01 && scale <= 1e6))
      throw SpecError(name, "", fmt::format("{} is not a factor in [0.01, 1e6]", scale));
  Builder builder(traces, options);
  const auto graphs = builder.build();
  builder.finish_notes();
  const auto timeline = sim::run(builder.graph());
  TraceReport report;
  for (std::size_t r = 0; r < traces.size(); ++r) {
    const auto& t = traces[r];
    add_file_and_collectives(t, report);
    const auto& rg = graphs[r];
    const auto steps = ops_by_step(t);
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      auto f = recorded_step(t, s, steps[s]);
      const auto& [start, end] = rg.steps[s];
      f.replayed_s = (timeline.tasks[end.index()].end - timeline.tasks[start.index()].start).seconds();
      // what the replayed GPU did for the step
      Intervals all, compute, comm;
      for (const auto i : steps[s]) {
        const auto& task = timeline.tasks[rg.gpu_task[i].index()];
        all.add(task.start.ps, task.end.ps);
        (t.gpu[i].collective ? comm : compute).add(task.start.ps, task.end.ps);
      }
      f.gpu_busy_s = all.length() * 1e-12;
      f.compute_s = compute.length() * 1e-12;
      f.comm_s = comm.length() * 1e-12;
      f.overlap_s = overlap(compute, comm) * 1e-12;
      f.exposed_comm_s = f.comm_s - f.overlap_s;
      report.steps.push_back(f);
    }
  }
  report.notes = std::move(builder.notes());
  return report;
}

}  // namespace trainsim::trace
