#pragma once
// The state a replay builds its task graph in: per rank, the lookups over its trace and what the
// passes have decided so far; for the whole replay, the graph, the options and the counts the
// notes report. Each dependency rule is a pass over one rank's state (replay_rules.cpp). Private
// to trace/.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainsim/sim/task_graph.hpp"
#include "trainsim/trace/analysis.hpp"

namespace trainsim::trace {

// What a blocking call costs the CPU besides waiting.
inline constexpr std::int64_t kCallCostNs = 5'000;
// Idle time that separates bursts of calls on a thread.
inline constexpr std::int64_t kBurstGapNs = 50'000;
// How late an op may start after its launch and its stream allowed before the delay needs an
// explanation (launch latency and queueing); also what counts as a long unexplained delay.
inline constexpr std::int64_t kSlackNs = 10'000;
// Clock jitter between the CPU and GPU timelines of one trace: an op ending this soon after a call
// returned ended during it.
inline constexpr std::int64_t kToleranceNs = 1'000;

// Recorded nanoseconds as a Duration (the reader keeps them below a day).
Duration ns(std::int64_t v);
bool is_sync(std::string_view name);
// A copy call that returned only after its copy finished (to pageable memory) waited for it.
bool blocking_copy(const RankTrace& t, const RuntimeCall& call, const GpuOp& op);

// Lookups over one rank's trace that several passes share, built once.
struct RankIndex {
  explicit RankIndex(const RankTrace& t);
  // The last call of the main thread that had returned by `time`, if any.
  const RuntimeCall* returned_by(std::int64_t time) const;

  std::vector<std::size_t> by_end;                       // GPU ops by end time
  std::map<std::int64_t, const RuntimeCall*> launch_of;  // correlation -> runtime call
  std::map<std::int64_t, std::size_t> op_of;             // correlation -> GPU op
  std::int64_t main_thread = 0;                          // the thread annotating profiler steps, else the busiest
  std::vector<const RuntimeCall*> main_calls;
};

// Why a GPU op started when it did. An op that started well after both its launch and its
// stream's previous op waited for something: when an op of another stream ended just before, that
// op (an event wait the trace does not show); otherwise something the trace does not record at all
// (a host callback, a peer's proxy), and the recorded delay is kept.
struct LateStart {
  std::optional<std::size_t> waited_for;  // op of another stream
  std::int64_t delay_ns = 0;              // unexplained
  const RuntimeCall* anchor = nullptr;    // stands in for a launch the trace lost
};

// A blocking copy's wait for its copy, on the CPU thread after the call.
struct CopyWait {
  std::size_t op;
  sim::TaskId wait;
};

struct RankState {
  RankState(std::size_t rank_index, const RankTrace& t) : rank(rank_index), trace(&t), index(t) {}

  std::size_t rank;
  const RankTrace* trace;
  RankIndex index;
  std::map<const RuntimeCall*, std::size_t> awaited;  // synchronisation call -> the GPU op it waited for
  std::vector<LateStart> late;                        // per GPU op
  std::map<const RuntimeCall*, sim::TaskId> call_task;
  std::map<std::int64_t, sim::StreamId> gpu_streams;
  std::map<std::size_t, const RuntimeCall*> launch;  // GPU op -> its launch, as replayed
  std::vector<CopyWait> copy_waits;
  // per GPU stream: the stream holding its unexplained waits, and its last op
  std::map<std::int64_t, std::pair<std::optional<sim::StreamId>, std::optional<sim::TaskId>>> delay_streams;
  // results: the task of every GPU op, and the markers of every profiler step
  std::vector<sim::TaskId> gpu_task;
  std::vector<std::pair<sim::TaskId, sim::TaskId>> steps;
};

// What the notes count.
struct ReplayCounts {
  std::int64_t delayed = 0;
  std::int64_t long_delays = 0;
  std::int64_t anchored_bursts = 0;
  std::int64_t unlaunched = 0;
  std::int64_t syncs = 0;
  std::int64_t waits = 0;
  std::int64_t contradicted = 0;
  std::int64_t inferred = 0;
  std::int64_t costed = 0;
  // NCCL kernels the cost model or the fits could not cost: no size or group size recorded, a
  // group beyond the topology's devices, no fit for the operation and group size
  std::int64_t unsized = 0;
  std::int64_t outside = 0;
  std::int64_t unfitted = 0;
};

// The analyses: which GPU op each synchronisation call waited for, and why each op started late.
void find_awaited(RankState& s);
void analyse_starts(RankState& s);

// The dependency rules applied once every task exists.
void add_inferred_waits(RankState& s, sim::TaskGraph& graph, ReplayCounts& counts);
void add_copy_waits(RankState& s, sim::TaskGraph& graph);
void add_synchronisation_and_stream_waits(RankState& s, sim::TaskGraph& graph, ReplayCounts& counts);

}  // namespace trainsim::trace
