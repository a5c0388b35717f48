#pragma once
// Pipeline schedules as data: for every stage, the order in which its compute stream runs the
// forward (F), backward (B) and — for zero-bubble schedules — weight-gradient (W) passes of each
// micro-batch and model chunk. The engine then finds when each can run.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/spec/job.hpp"
#include "trainsim/spec/strategy_spec.hpp"

namespace trainsim::lower {

enum class PassKind { Forward, Backward, WeightGrad };

struct Action {
  PassKind kind = PassKind::Forward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this stage (interleaved schedules hold vpp of them)
  friend bool operator==(const Action&, const Action&) = default;
};

using StageSchedule = std::vector<Action>;

// Whether B of a schedule leaves the weight gradients to a W pass of their own (zero-bubble
// schedules; DualPipeV, which runs a B's W at once or defers it).
bool splits_weight_grad(spec::Schedule schedule);

// GPipe: all forwards, then all backwards. 1F1B (PipeDream-flush): p − s − 1 warm-up forwards,
// then one forward and one backward in turn, then the remaining backwards. Interleaved (Megatron):
// micro-batches in groups of p through the vpp chunks, (p − s − 1)·2 + (vpp − 1)·p warm-up
// forwards. ZB-H1 (Qi et al. 2023): B split into B and W; stage s defers its first s W's into the
// cool-down, so every stage holds at most p micro-batches and the bubble is (p − 1)(F + B − W).
// DualPipeV (DeepSeek's DualPipe cut in half, deepseek-ai/DualPipe dualpipev.py): two chunks per
// stage in a V, 2(p − s − 1) warm-up forwards of chunk 0, then forwards of both chunks, then
// forward-backward pairs of the two chunks (which combined 1F1B overlaps), some W's deferred into
// the cool-down; m ≥ 2p, bubble (p − 1)(F&B + B − 3W) per chunk's F, full B and W.
std::vector<StageSchedule> make_schedule(spec::Schedule schedule, int pp, int vpp, std::int64_t microbatches);

// The stage and chunk before and after a stage's chunk in the model's order (spec::virtual_stage):
// where its forward's input comes from, and its backward's.
std::optional<spec::StageChunk> previous_virtual(spec::Schedule schedule, int stage, int chunk, int pp);
std::optional<spec::StageChunk> next_virtual(spec::Schedule schedule, int stage, int chunk, int pp, int vpp);

// "F0.0 B0.0 ..." for tests and debugging.
std::string describe(const StageSchedule& s);

}  // namespace trainsim::lower
