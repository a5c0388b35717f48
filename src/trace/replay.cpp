// Replaying recorded traces on the engine (docs/traces.md, after Lumos, MLSys
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
#include "trace/replay_state.hpp"
#include "trainsim/cost/cost_model.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

using sim::TaskId;

// Task categories of the replayed graph (CPU threads' tasks are on streams of kind 0).
constexpr std::uint16_t kComputeCategory = 0;
constexpr std::uint16_t kCommCategory = 1;
constexpr std::uint16_t kWaitCategory = 2;

// A CPU thread's events in time order: runtime calls and profiler-step markers.
struct CpuEvent {
  std::int64_t start = 0;
  std::int64_t end = 0;
  const RuntimeCall* call = nullptr;  // null: a step marker
  std::size_t step = 0;
  bool step_end = false;
};

// The k-th NCCL kernel of a process group on every rank given, when all ranks have the same
// number of them: one collective.
// Clocks of two hosts under NTP agree to about a millisecond; a larger offset between ranks is noted.
constexpr std::int64_t kClockOffsetNoteNs = 1'000'000;

std::string rank_name(const RankTrace& t) {
  return t.rank >= 0 ? fmt::format("rank {}", t.rank) : t.path;
}

struct Match {
  std::vector<std::pair<std::size_t, std::size_t>> members;  // (rank index, GPU op index)
};

class ReplayBuilder {
 public:
  ReplayBuilder(const std::vector<RankTrace>& traces, const ReplayOptions& options) : options_(options) {
    for (std::size_t r = 0; r < traces.size(); ++r) states_.emplace_back(r, traces[r]);
  }

  std::vector<RankState>& build() {
    for (auto& s : states_) {
      find_awaited(s);
      build_cpu(s);
    }
    match_collectives();
    for (auto& s : states_) analyse_starts(s);
    build_gpu();
    for (auto& s : states_) {
      add_inferred_waits(s, graph_, counts_);
      add_copy_waits(s, graph_);
      add_synchronisation_and_stream_waits(s, graph_, counts_);
    }
    return states_;
  }

  sim::TaskGraph& graph() { return graph_; }
  std::vector<std::string> notes();
  std::vector<std::string> uncosted() const;

 private:
  void build_cpu(RankState& s);
  void cpu_thread(RankState& s, std::int64_t thread, std::vector<CpuEvent>& events);
  void match_collectives();
  void note_clock_offsets();
  void build_gpu();
  std::vector<TaskId> launch_dependency(RankState& s, std::size_t i);
  void issue(RankState& s, std::size_t i);
  void issue_collective(const Match& match);
  sim::StreamId gpu_stream(RankState& s, std::int64_t stream);
  Duration nccl_duration(const GpuOp& g, Duration recorded);

  const ReplayOptions& options_;
  std::vector<RankState> states_;
  sim::TaskGraph graph_;
  std::vector<Match> matches_;
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> match_of_;  // (rank, op) -> match
  ReplayCounts counts_;
  std::vector<std::string> notes_;
};

// The CPU threads: runtime calls and step markers in time order, separated by the recorded gaps;
// the main thread first, since the others' bursts of calls follow its progress.
void ReplayBuilder::build_cpu(RankState& s) {
  const auto& t = *s.trace;
  std::map<std::int64_t, std::vector<CpuEvent>> threads;
  for (const auto& c : t.runtime) threads[c.thread].push_back({c.start_ns, c.end_ns(), &c});
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    const auto& st = t.steps[i];
    threads[st.thread].push_back({st.start_ns, st.start_ns, nullptr, i, false});
    threads[st.thread].push_back({st.end_ns(), st.end_ns(), nullptr, i, true});
  }
  s.steps.assign(t.steps.size(), {TaskId{0}, TaskId{0}});
  const auto main = s.index.main_thread;
  if (threads.contains(main)) cpu_thread(s, main, threads.at(main));
  for (auto& [thread, events] : threads)
    if (thread != main) cpu_thread(s, thread, events);
}

void ReplayBuilder::cpu_thread(RankState& s, std::int64_t thread, std::vector<CpuEvent>& events) {
  const auto& t = *s.trace;
  const auto r = s.rank;
  const bool main = thread == s.index.main_thread;
  std::stable_sort(events.begin(), events.end(),
                   [](const CpuEvent& a, const CpuEvent& b) { return a.start < b.start; });
  const auto stream = graph_.add_stream({fmt::format("cpu {}", thread), static_cast<std::uint32_t>(r), 0});
  std::int64_t now = 0;
  for (const auto& e : events) {
    if (!main && e.start - now > kBurstGapNs) {
      // a burst on another thread (autograd's backward thread, a data-loader's copies) starts what
      // the main thread set off: the last call it had returned from, plus the recorded gap
      if (const auto* anchor = s.index.returned_by(e.start)) {
        const TaskId dep[] = {s.call_task.at(anchor)};
        graph_.add_task("cpu", stream, sim::ComputeWork{ns(e.start - std::max(now, anchor->end_ns()))}, dep);
        now = e.start;
        ++counts_.anchored_bursts;
      }
    }
    if (e.start > now) graph_.add_task("cpu", stream, sim::ComputeWork{ns(e.start - now)});
    if (e.call == nullptr) {
      const auto marker =
          graph_.add_task(e.step_end ? "step end" : "step start", stream, sim::ComputeWork{Duration::zero()});
      (e.step_end ? s.steps[e.step].second : s.steps[e.step].first) = marker;
      now = std::max(now, e.start);
      continue;
    }
    // a call that waited for the GPU keeps what it spent after the op finished; the wait itself is
    // its dependency (add_synchronisation_and_stream_waits)
    std::optional<std::size_t> copy;
    if (const auto op = s.index.op_of.find(e.call->correlation);
        op != s.index.op_of.end() && blocking_copy(t, *e.call, t.gpu[op->second]))
      copy = op->second;
    const auto awaited = s.awaited.find(e.call);
    const auto after = [&](std::size_t op) {
      return std::clamp<std::int64_t>(e.call->end_ns() - t.gpu[op].end_ns(), 0, e.call->dur_ns);
    };
    const auto cost = awaited != s.awaited.end() ? after(awaited->second)
                      : copy                     ? std::min<std::int64_t>(e.call->dur_ns, kCallCostNs)
                                                 : e.call->dur_ns;
    s.call_task[e.call] = graph_.add_task(sim::TaskName(t.names.at(e.call->name)), stream, sim::ComputeWork{ns(cost)});
    if (copy && awaited == s.awaited.end())
      s.copy_waits.push_back({*copy, graph_.add_task("wait for copy", stream, sim::ComputeWork{ns(after(*copy))})});
    now = std::max(now, e.end);
  }
}

void ReplayBuilder::match_collectives() {
  if (states_.size() < 2) return;
  // per rank: NCCL ops by process group (its ranks, or the stream when not recorded)
  std::vector<std::map<std::string, std::vector<std::size_t>>> groups(states_.size());
  for (const auto& s : states_) {
    const auto& t = *s.trace;
    for (std::size_t i = 0; i < t.gpu.size(); ++i) {
      const auto& g = t.gpu[i];
      if (!g.collective) continue;
      const auto key = g.collective->ranks.empty() ? fmt::format("stream {}", g.stream)
                                                   : fmt::format("{}", fmt::join(g.collective->ranks, ","));
      groups[s.rank][key].push_back(i);
    }
  }
  for (const auto& [key, ops] : groups.front()) {
    bool everywhere = true;
    for (std::size_t r = 1; r < states_.size(); ++r) {
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
      for (std::size_t r = 0; r < states_.size(); ++r) m.members.emplace_back(r, groups[r].at(key)[k]);
      for (const auto& member : m.members) match_of_[member] = matches_.size();
      matches_.push_back(std::move(m));
    }
  }
  if (!matches_.empty())
    notes_.push_back(fmt::format("{} collectives matched across {} ranks", matches_.size(), states_.size()));
  note_clock_offsets();
}

// A collective's kernels end together on all its ranks (each waits for the last to arrive), so the
// median difference of their recorded ends is the offset between two ranks' clocks. Each rank is
// replayed on its own clock: an offset changes nothing here, but recorded timelines put side by
// side are off by as much.
void ReplayBuilder::note_clock_offsets() {
  if (matches_.empty()) return;
  const auto end_of = [&](const std::pair<std::size_t, std::size_t>& member) {
    const auto& t = *states_[member.first].trace;
    return t.base_ns + t.gpu[member.second].end_ns();
  };
  for (std::size_t r = 1; r < states_.size(); ++r) {
    std::vector<std::int64_t> offsets;
    for (const auto& m : matches_) offsets.push_back(end_of(m.members[r]) - end_of(m.members[0]));
    std::nth_element(offsets.begin(), offsets.begin() + static_cast<std::ptrdiff_t>(offsets.size() / 2), offsets.end());
    const auto offset = offsets[offsets.size() / 2];
    if (std::abs(offset) < kClockOffsetNoteNs) continue;
    const auto size = static_cast<double>(std::abs(offset));
    notes_.push_back(
        fmt::format("{}'s clock reads {} {} {}'s (the median over {} matched collectives' ends): "
                    "each rank is replayed on its own clock",
                    rank_name(*states_[r].trace),
                    size >= 1e9 ? fmt::format("{:.3f} s", size / 1e9) : fmt::format("{:.3f} ms", size / 1e6),
                    offset > 0 ? "ahead of" : "behind", rank_name(*states_[0].trace), offsets.size()));
  }
}

Duration ReplayBuilder::nccl_duration(const GpuOp& g, Duration recorded) {
  const auto keep = Duration::from_seconds(recorded.seconds() / options_.network_scale);
  if (options_.costs == nullptr && !options_.fits) return keep;
  const auto& c = *g.collective;
  const auto bytes = c.bytes();
  if (bytes <= 0 || c.group_size < 2) {
    ++counts_.unsized;
    return keep;
  }
  if (options_.costs != nullptr) {
    cost::Group group;
    if (!c.ranks.empty() && static_cast<int>(c.ranks.size()) == c.group_size) {
      for (const int rank : c.ranks) group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(rank)});
    } else {
      for (int rank = 0; rank < c.group_size; ++rank)
        group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(rank)});
    }
    std::sort(group.devices.begin(), group.devices.end());
    if (static_cast<std::int64_t>(group.devices.back().value) >= options_.costs->topology().num_devices()) {
      ++counts_.outside;
      return keep;
    }
    ++counts_.costed;
    return options_.costs->cost(cost::make_collective(cost::collective_kind_from_name(c.op), Bytes{bytes}), group)
        .time;
  }
  for (const auto& f : *options_.fits) {
    if (f.op != c.op || f.group_size != c.group_size) continue;
    ++counts_.costed;
    return f.time(Bytes{bytes});
  }
  ++counts_.unfitted;
  return keep;
}

// GPU ops of every rank in each stream's recorded order. A collective occupies the streams of all
// its ranks, so it is issued once every member has issued what precedes it.
void ReplayBuilder::build_gpu() {
  for (auto& s : states_) s.gpu_task.assign(s.trace->gpu.size(), TaskId{0});
  std::vector<std::size_t> next(states_.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& s : states_) {
      const auto r = s.rank;
      while (next[r] < s.trace->gpu.size()) {
        const auto m = match_of_.find({r, next[r]});
        if (m == match_of_.end()) {
          issue(s, next[r]++);
          progress = true;
          continue;
        }
        const auto& members = matches_[m->second].members;
        if (!std::all_of(members.begin(), members.end(),
                         [&](const auto& member) { return next[member.first] == member.second; }))
          break;  // a member still has ops before it
        issue_collective(matches_[m->second]);
        for (const auto& [mr, mi] : members) ++next[mr];
        progress = true;
      }
    }
  }
  for (const auto& s : states_)
    SIM_ASSERT(next[s.rank] == s.trace->gpu.size(), "collectives matched out of order across ranks");
}

// An op waits for the runtime call that launched it. One whose launch the trace lost (sampled or
// filtered traces lose some) follows the last call its rank's main thread had returned from when
// the op started; the recorded gap after that call is kept as its delay (analyse_starts).
std::vector<TaskId> ReplayBuilder::launch_dependency(RankState& s, std::size_t i) {
  const auto& g = s.trace->gpu[i];
  const auto l = s.index.launch_of.find(g.correlation);
  if (l != s.index.launch_of.end() && s.call_task.contains(l->second)) {
    s.launch[i] = l->second;
    return {s.call_task.at(l->second)};
  }
  ++counts_.unlaunched;
  const auto* anchor = s.late[i].anchor;
  if (anchor == nullptr || !s.call_task.contains(anchor)) return {};
  return {s.call_task.at(anchor)};
}

void ReplayBuilder::issue(RankState& s, std::size_t i) {
  const auto& t = *s.trace;
  const auto& g = t.gpu[i];
  auto deps = launch_dependency(s, i);
  const auto stream = gpu_stream(s, g.stream);
  if (const auto delay = s.late[i].delay_ns; delay > 0) {
    // the unexplained wait, after the launch and the stream's previous op
    auto& [delays, last] = s.delay_streams[g.stream];
    if (!delays)
      delays = graph_.add_stream({fmt::format("stream {} waits", g.stream), static_cast<std::uint32_t>(s.rank), 1});
    if (last) deps.push_back(*last);
    deps = {graph_.add_task("unrecorded wait", *delays, sim::ComputeWork{ns(delay)}, deps, kWaitCategory)};
    ++counts_.delayed;
    if (delay > kSlackNs) ++counts_.long_delays;
  }
  const Duration recorded = ns(g.dur_ns);
  const Duration duration =
      g.collective ? nccl_duration(g, recorded) : Duration::from_seconds(recorded.seconds() / options_.compute_scale);
  s.gpu_task[i] = graph_.add_task(sim::TaskName(t.names.at(g.name)), stream, sim::ComputeWork{duration}, deps,
                                  g.collective ? kCommCategory : kComputeCategory);
  s.delay_streams[g.stream].second = s.gpu_task[i];
}

// A matched collective: one task on every member's stream, lasting the shortest recorded instance
// (the others include waiting for late peers).
void ReplayBuilder::issue_collective(const Match& match) {
  std::vector<sim::StreamId> streams;
  std::vector<TaskId> deps;
  Duration shortest = Duration::max();
  for (const auto& [r, i] : match.members) {
    auto& s = states_[r];
    const auto& g = s.trace->gpu[i];
    streams.push_back(gpu_stream(s, g.stream));
    const auto d = launch_dependency(s, i);
    deps.insert(deps.end(), d.begin(), d.end());
    shortest = std::min(shortest, ns(g.dur_ns));
  }
  const auto& [r0, i0] = match.members.front();
  const auto& t0 = *states_[r0].trace;
  std::sort(deps.begin(), deps.end());
  const auto task = graph_.add_task(sim::TaskName(t0.names.at(t0.gpu[i0].name)), streams,
                                    sim::ComputeWork{nccl_duration(t0.gpu[i0], shortest)}, deps, kCommCategory);
  for (const auto& [r, i] : match.members) states_[r].gpu_task[i] = task;
}

sim::StreamId ReplayBuilder::gpu_stream(RankState& s, std::int64_t stream) {
  if (!s.gpu_streams.contains(stream))
    s.gpu_streams[stream] =
        graph_.add_stream({fmt::format("stream {}", stream), static_cast<std::uint32_t>(s.rank), 1});
  return s.gpu_streams.at(stream);
}

std::vector<std::string> ReplayBuilder::notes() {
  auto out = std::move(notes_);
  const auto& c = counts_;
  if (c.unlaunched > 0)
    out.push_back(fmt::format("{} GPU op(s) without a recorded launch follow the main thread's last call before them",
                              c.unlaunched));
  out.push_back(fmt::format("{} synchronisation call(s) wait for a GPU op, {} stream wait(s) order two streams",
                            c.syncs, c.waits));
  if (c.anchored_bursts > 0)
    out.push_back(fmt::format("{} burst(s) of calls on other threads follow the main thread", c.anchored_bursts));
  if (c.delayed > 0)
    out.push_back(
        fmt::format("{} GPU op(s) started after their launch and stream allowed (launch latency, or "
                    "a wait the trace does not record): the delay is kept, {} of them over {} us",
                    c.delayed, c.long_delays, kSlackNs / 1000));
  if (c.inferred > 0) out.push_back(fmt::format("{} cross-stream wait(s) inferred from late starts", c.inferred));
  if (c.contradicted > 0)
    out.push_back(fmt::format("{} stream wait(s) ignored: the recording shows the ops overlapping", c.contradicted));
  if (options_.costs != nullptr || options_.fits) {
    const auto* by = options_.costs != nullptr ? "the cost model on the given topology" : "the calibration's fits";
    out.push_back(fmt::format("{} NCCL kernel(s) costed by {}", c.costed, by));
    out.push_back(fmt::format(
        "compute kernels keep their recorded times: {} replaces only the collectives' (--compute-scale speeds "
        "up compute)",
        options_.costs != nullptr ? "-t" : "--calibration"));
  }
  return out;
}

// What a replay asked to cost and could not: nothing at all is bad input; a part is a warning.
std::vector<std::string> ReplayBuilder::uncosted() const {
  const auto& c = counts_;
  if (options_.costs == nullptr && !options_.fits) return {};
  const auto* option = options_.costs != nullptr ? "-t" : "--calibration";
  const auto missed = c.unsized + c.outside + c.unfitted;
  if (c.costed == 0 && missed == 0)
    throw SpecError(option, "", "the traces hold no NCCL kernels: there is nothing to cost");
  std::vector<std::string> reasons;
  if (c.unsized > 0)
    reasons.push_back(fmt::format("{} record no size or group size (the profiler's \"In msg nelems\" and \"Group "
                                  "size\" arguments)",
                                  c.unsized));
  if (c.outside > 0) reasons.push_back(fmt::format("{} span ranks beyond the topology's devices", c.outside));
  if (c.unfitted > 0) reasons.push_back(fmt::format("{} have no fit for their operation and group size", c.unfitted));
  const auto why = fmt::format("{}", fmt::join(reasons, "; "));
  if (c.costed == 0)
    throw SpecError(option, "", fmt::format("none of the {} NCCL kernel(s) can be costed: {}", missed, why));
  if (missed == 0) return {};
  return {fmt::format("{} of {} NCCL kernel(s) keep their recorded time: {}", missed, missed + c.costed, why)};
}

// The replayed step's critical path from its end marker back to its start: each task's time on it
// (the part after the step's start) goes to its kind, then the walk moves to whichever dependency
// or stream predecessor ended last.
CriticalPath critical_path(const sim::TaskGraph& graph, const sim::Timeline& timeline, TaskId start, TaskId end) {
  CriticalPath out;
  const auto from = timeline.tasks[start.index()].start;
  for (auto current = end;;) {
    const auto& span = timeline.tasks[current.index()];
    if (span.end <= from) break;
    const auto seconds = (span.end - std::max(span.start, from)).seconds();
    const auto category = graph.category(current);
    if (graph.stream(graph.streams(current).front()).kind == 0)
      out.cpu_s += seconds;
    else if (category == kCommCategory)
      out.comm_s += seconds;
    else if (category == kWaitCategory)
      out.wait_s += seconds;
    else
      out.compute_s += seconds;
    const auto next = sim::last_predecessor(graph, timeline, current);
    if (!next) break;
    current = *next;
  }
  return out;
}

}  // namespace

const char* CriticalPath::bound() const {
  const std::pair<double, const char*> kinds[] = {
      {cpu_s, "CPU"}, {compute_s, "GPU"}, {comm_s, "communication"}, {wait_s, "unrecorded wait"}};
  // the first of the largest: ties go to the CPU, then the GPU
  return std::max_element(std::begin(kinds), std::end(kinds),
                          [](const auto& a, const auto& b) { return a.first < b.first; })
      ->second;
}

TraceReport replay(const std::vector<RankTrace>& traces, const ReplayOptions& options) {
  // a day of trace slowed 100× still fits the 106 days a Duration holds
  for (const auto& [name, scale] :
       {std::pair{"--compute-scale", options.compute_scale}, std::pair{"--network-scale", options.network_scale}})
    if (!(scale >= 0.01 && scale <= 1e6))
      throw SpecError(name, "", fmt::format("{} is not a factor in [0.01, 1e6]", scale));
  // a replay needs steps to time and GPU work to move
  for (const auto& t : traces) {
    if (t.events == 0) throw SpecError(t.path, "", "nothing to replay: the trace holds no events");
    if (t.gpu.empty()) throw SpecError(t.path, "", "nothing to replay: no GPU kernels, copies or sets");
    if (t.steps.empty())
      throw SpecError(t.path, "", "nothing to replay: no profiler steps (ProfilerStep#N annotations)");
  }
  ReplayBuilder builder(traces, options);
  const auto& graphs = builder.build();
  TraceReport report;
  report.warnings = builder.uncosted();
  report.notes = builder.notes();
  report.what_if = options.compute_scale != 1 || options.network_scale != 1 || options.costs != nullptr ||
                   options.fits.has_value();
  const auto& graph = builder.graph();
  const auto timeline = sim::run(graph);
  for (std::size_t r = 0; r < traces.size(); ++r) {
    const auto& t = traces[r];
    add_file_and_collectives(t, report);
    const auto& rg = graphs[r];
    const auto steps = ops_by_step(t);
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      auto f = recorded_step(t, s, steps[s]);
      const auto& [start, end] = rg.steps[s];
      f.replayed_s = (timeline.tasks[end.index()].end - timeline.tasks[start.index()].start).seconds();
      f.critical_path = critical_path(graph, timeline, start, end);
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
  return report;
}

}  // namespace trainsim::trace
