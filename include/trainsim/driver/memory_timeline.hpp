#pragma once
// Memory over the simulated step (docs/cli.md "Memory over the step"): each stage's live bytes as
// the engine's pools saw them, sampled for a chart, and where the peak happened: which rank, task
// (stage, micro-batch, phase) and what was live then.
#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/driver/run.hpp"

namespace trainsim::driver {

struct MemoryCurve {
  int stage = 0;
  int rank = 0;  // the stage's first simulated rank
  // (seconds into the step, the most bytes live in the slice that starts there)
  std::vector<std::pair<double, double>> points;
};

// `points` slices of the step for each stage; each point the maximum live in its slice (without the
// allocator's fragmentation, which the report's peak adds).
std::vector<MemoryCurve> memory_curves(const RunReport& report, std::size_t points);

struct MemoryPeak {
  int stage = 0;
  int rank = 0;
  double time_s = 0;    // into the step
  std::string task;     // the task whose allocation reached the peak ("B12 L3 norm1..fc2")
  int microbatch = -1;  // -1: not a micro-batch's task
  std::string phase;    // forward, backward, weight gradient, recompute, optimizer, communication
  Bytes live_static;       // weights, gradients, optimizer state, the runtime, FP8 weight copies
  Bytes live_activations;  // saved for the backward at that instant
  Bytes live_buffers;      // gathered parameters, gradient buckets
};

// The highest pool peak of the simulated step (absent without a simulation).
std::optional<MemoryPeak> memory_peak(const RunReport& report);

}  // namespace trainsim::driver
