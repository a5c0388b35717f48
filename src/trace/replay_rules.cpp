// The rules by which a replayed op or call waits for another, each a pass over one rank.
#include <algorithm>

#include "trace/replay_state.hpp"

namespace trainsim::trace {

using sim::TaskId;

Duration ns(std::int64_t v) {
  return v <= 0 ? Duration::zero() : v >= Duration::max().ps / 1000 ? Duration::max() : nanoseconds(v);
}

bool is_sync(std::string_view name) {
  return name == "cudaStreamSynchronize" || name == "cudaDeviceSynchronize" || name == "cudaEventSynchronize" ||
         name == "cudaMemcpy" || name == "cuStreamSynchronize" || name == "cuCtxSynchronize";
}

bool blocking_copy(const RankTrace& t, const RuntimeCall& call, const GpuOp& op) {
  return t.names.at(call.name).find("Memcpy") != std::string::npos && op.end_ns() <= call.end_ns() + kToleranceNs;
}

RankIndex::RankIndex(const RankTrace& t) {
  by_end.resize(t.gpu.size());
  for (std::size_t i = 0; i < by_end.size(); ++i) by_end[i] = i;
  std::sort(by_end.begin(), by_end.end(),
            [&](std::size_t a, std::size_t b) { return t.gpu[a].end_ns() < t.gpu[b].end_ns(); });
  for (const auto& c : t.runtime)
    if (c.correlation >= 0) launch_of.emplace(c.correlation, &c);
  for (std::size_t i = 0; i < t.gpu.size(); ++i)
    if (t.gpu[i].correlation >= 0) op_of.emplace(t.gpu[i].correlation, i);
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

const RuntimeCall* RankIndex::returned_by(std::int64_t time) const {
  auto after = std::lower_bound(main_calls.begin(), main_calls.end(), time,
                                [](const RuntimeCall* c, std::int64_t v) { return c->start_ns < v; });
  while (after != main_calls.begin() && (*std::prev(after))->end_ns() > time) --after;
  return after == main_calls.begin() ? nullptr : *std::prev(after);
}

// The GPU op each synchronisation call waited for: the last to finish during the call, not
// launched by its own thread after it began. A call during which nothing finished did not wait.
void find_awaited(RankState& s) {
  const auto& t = *s.trace;
  const auto& by_end = s.index.by_end;
  for (const auto& c : t.runtime) {
    if (!is_sync(t.names.at(c.name))) continue;
    const auto it = std::upper_bound(by_end.begin(), by_end.end(), c.end_ns() + kToleranceNs,
                                     [&](std::int64_t v, std::size_t i) { return v < t.gpu[i].end_ns(); });
    if (it == by_end.begin()) continue;
    const auto op = *std::prev(it);
    if (t.gpu[op].end_ns() < c.start_ns) continue;  // nothing was pending: no wait
    const auto l = s.index.launch_of.find(t.gpu[op].correlation);
    if (l != s.index.launch_of.end() && l->second->thread == c.thread && l->second->start_ns > c.start_ns) continue;
    s.awaited.emplace(&c, op);
  }
}

void analyse_starts(RankState& s) {
  const auto& t = *s.trace;
  const auto& by_end = s.index.by_end;
  auto& out = s.late;
  out.assign(t.gpu.size(), {});
  std::map<std::int64_t, std::int64_t> stream_free;
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    const auto& g = t.gpu[i];
    std::int64_t ready = stream_free[g.stream];
    stream_free[g.stream] = std::max(ready, g.end_ns());
    const auto l = s.index.launch_of.find(g.correlation);
    if (l != s.index.launch_of.end()) {
      // when the replayed launch returns: a blocking copy's call returns before its wait
      const auto& call = *l->second;
      ready = std::max(ready,
                       call.start_ns + (blocking_copy(t, call, g) ? std::min(call.dur_ns, kCallCostNs) : call.dur_ns));
    } else if ((out[i].anchor = s.index.returned_by(g.start_ns))) {
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
}

// An op that started late right after an op of another stream ended waited for it.
void add_inferred_waits(RankState& s, sim::TaskGraph& graph, ReplayCounts& counts) {
  for (std::size_t i = 0; i < s.late.size(); ++i) {
    const auto waited = s.late[i].waited_for;
    if (!waited || s.gpu_task[*waited] == s.gpu_task[i]) continue;
    graph.add_dependency(s.gpu_task[i], s.gpu_task[*waited]);
    ++counts.inferred;
  }
}

// A blocking copy's call waits for its copy.
void add_copy_waits(RankState& s, sim::TaskGraph& graph) {
  for (const auto& w : s.copy_waits) graph.add_dependency(w.wait, s.gpu_task[w.op]);
}

// Synchronisation calls wait for the op they waited for (a device-wide one for the last op
// launched on every stream); cudaStreamWaitEvent orders the next op launched after the op before
// the matching cudaEventRecord, unless the recording contradicts it.
void add_synchronisation_and_stream_waits(RankState& s, sim::TaskGraph& graph, ReplayCounts& counts) {
  const auto& t = *s.trace;
  // launches per thread in order, with the op each launched
  std::map<std::int64_t, std::vector<std::pair<const RuntimeCall*, std::size_t>>> launched;
  for (const auto& [op, call] : s.launch) launched[call->thread].emplace_back(call, op);
  for (auto& [thread, list] : launched)
    std::sort(list.begin(), list.end(),
              [](const auto& a, const auto& b) { return a.first->start_ns < b.first->start_ns; });
  // per GPU stream: (launch time, op) in launch order
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::size_t>>> launched_on;
  for (const auto& [op, call] : s.launch) launched_on[t.gpu[op].stream].emplace_back(call->start_ns, op);
  for (auto& [stream, ops] : launched_on) std::sort(ops.begin(), ops.end());

  const RuntimeCall* last_record = nullptr;
  for (const auto& c : t.runtime) {
    const auto& name = t.names.at(c.name);
    if (name == "cudaEventRecord") last_record = &c;
    if (const auto awaited = s.awaited.find(&c); awaited != s.awaited.end()) {
      graph.add_dependency(s.call_task.at(&c), s.gpu_task[awaited->second]);
      ++counts.syncs;
      // a device-wide synchronisation also waits for what another stream would finish later
      // once durations change
      if (name == "cudaDeviceSynchronize" || name == "cuCtxSynchronize") {
        for (const auto& [stream, ops] : launched_on) {
          const auto last = std::lower_bound(ops.begin(), ops.end(), c.start_ns,
                                             [](const auto& x, std::int64_t v) { return x.first < v; });
          if (last != ops.begin()) graph.add_dependency(s.call_task.at(&c), s.gpu_task[std::prev(last)->second]);
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
        ++counts.contradicted;
        continue;
      }
      graph.add_dependency(s.gpu_task[after->second], s.gpu_task[before->second]);
      ++counts.waits;
    }
  }
}

}  // namespace trainsim::trace
