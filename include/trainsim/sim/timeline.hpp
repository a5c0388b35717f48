#pragma once
// What a run of the engine produced: when each task ran, and each memory pool's peak. Recorded
// traces are read into the same structure (trace/), so reports compare like with like.
#include <array>
#include <cstdint>
#include <vector>

#include "trainsim/sim/task_graph.hpp"

namespace trainsim::sim {

struct TaskSpan {
  Duration start;
  Duration end;
};

struct PoolUsage {
  std::int64_t peak = 0;
  Duration peak_time;
  std::int64_t final = 0;
  std::array<std::int64_t, kMemoryKinds> at_peak{};  // bytes of each kind when the peak was reached
  TaskId peak_task{0};                               // whose allocation reached it (peak > baseline)
};

struct Timeline {
  std::vector<TaskSpan> tasks;  // by TaskId
  // for transfers, by TaskGraph::transfer_index: when the latency ended and bytes began to move
  std::vector<Duration> transfer_starts;
  std::vector<PoolUsage> pools;  // by PoolId
  Duration makespan;
  std::uint64_t events = 0;
  std::uint64_t rate_updates = 0;  // times the shared-link solver ran
};

}  // namespace trainsim::sim
