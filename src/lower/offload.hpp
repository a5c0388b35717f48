#pragma once
// Activation offloading as Transformer Engine runs it under Megatron-Core's --cpu-offloading
// (transformer_engine/pytorch/cpu_offload.py, AsyncDoubleBufferGroupOffloadHandler; docs/model.md
// "Activation offloading"): the first N layers of the model are offload groups. After layer 0's
// forward its saved tensors start copying to pinned host memory on a device-to-host stream; when
// the forward commits layer w[k] (TE's layer_window_map, the N groups spread over the L layers) the
// compute stream and the copy stream wait for each other, group k's tensors are freed and group
// k+1's copy starts. In the backward, reaching layer w[k] starts group k's copy back on a
// host-to-device stream into a freshly allocated buffer (after the compute stream waits for the
// previous one); layer 0's backward waits for every copy. Private to lower/.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lower/context.hpp"

namespace trainsim::lower {

class ActivationOffload {
 public:
  explicit ActivationOffload(Context& ctx);
  bool active() const { return !windows_.empty(); }

  // Layer `index` of the model has run its forward (its last compute tasks `last`), keeping `bytes`.
  void forward_done(int stage, int index, const TaskList& last, std::int64_t bytes, int microbatch);
  // Layer `index`'s backward is next; the compute stream has issued everything before it.
  void backward_next(int stage, int index, const TaskList& issued, int microbatch);

 private:
  // Group `group`'s saved tensors copied out (OffloadOut) or back (OffloadIn).
  TaskList copy(int stage, StreamKind stream, int group, int microbatch);

  Context& ctx_;
  std::vector<int> windows_;  // per offload group: the layer whose commit ends its copy out
  struct InFlight {
    std::vector<std::int64_t> bytes;  // per group
    std::vector<TaskList> out;        // copies to the host, per group
    int offloaded = 0;                // TE's offloaded_group_count
    TaskList last_in;                 // the last copy back issued
  };
  std::map<int, InFlight> microbatches_;
  std::string label_;  // scratch space for task labels (the graph interns them)
};

// Transformer Engine's layer_window_map: `groups` offload groups over `layers` layers.
std::vector<int> offload_windows(int groups, int layers);

}  // namespace trainsim::lower
