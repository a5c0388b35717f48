#include "lower/offload.hpp"

#include <algorithm>

namespace trainsim::lower {

std::vector<int> offload_windows(int groups, int layers) {
  std::vector<int> windows(static_cast<std::size_t>(groups));
  int carried = 0;  // the layers of the remainder handed out so far
  for (int i = 0; i < groups; ++i) {
    auto& w = windows[static_cast<std::size_t>(i)];
    w = layers / groups * (i + 1) - 1;
    if (i < layers % groups) carried = i + 1;
    w += carried;
  }
  return windows;
}

ActivationOffload::ActivationOffload(Context& ctx) : ctx_(ctx) {
  const auto& job = ctx.job();
  if (job.strategy.offload_layers > 0)
    windows_ = offload_windows(job.strategy.offload_layers, job.workload.model.layers);
}

TaskList ActivationOffload::copy(int stage, StreamKind stream, int group, int microbatch) {
  const auto& mb = microbatches_.at(microbatch);
  const double bytes = static_cast<double>(mb.bytes.at(static_cast<std::size_t>(group)));
  const auto duration = Duration::from_seconds(bytes / ctx_.job().cluster.device.host_bandwidth->bytes_per_s);
  label_ = (stream == StreamKind::OffloadOut ? "F# offload L" : "B# reload L") + std::to_string(group);
  return ctx_.kernel(stage, stream, {label_, microbatch}, duration, Category::Offload);
}

void ActivationOffload::forward_done(int stage, int index, const TaskList& last, std::int64_t bytes, int microbatch) {
  const int groups = static_cast<int>(windows_.size());
  auto& mb = microbatches_[microbatch];
  if (index < groups) mb.bytes.push_back(bytes);
  if (index == 0) {
    ctx_.wait(stage, StreamKind::OffloadOut, last);
    mb.out.push_back(copy(stage, StreamKind::OffloadOut, 0, microbatch));
  }
  if (mb.offloaded >= groups || windows_[static_cast<std::size_t>(mb.offloaded)] != index) return;
  // both streams wait for each other; the group's tensors are freed on the host's word
  const int k = mb.offloaded;
  ctx_.wait(stage, StreamKind::Compute, mb.out.at(static_cast<std::size_t>(k)));
  const auto synced = ctx_.compute(stage, {"F# offload wait", microbatch}, Duration::zero(), Category::Offload);
  ctx_.memory(stage, synced, -mb.bytes.at(static_cast<std::size_t>(k)), MemoryKind::Activations, true);
  if (k + 1 < groups) {
    ctx_.wait(stage, StreamKind::OffloadOut, synced);
    mb.out.push_back(copy(stage, StreamKind::OffloadOut, k + 1, microbatch));
  }
  ++mb.offloaded;
}

void ActivationOffload::backward_next(int stage, int index, const TaskList& issued, int microbatch) {
  auto& mb = microbatches_.at(microbatch);
  if (mb.offloaded >= 1 && windows_[static_cast<std::size_t>(mb.offloaded - 1)] == index) {
    const int k = mb.offloaded - 1;
    if (!mb.last_in.empty()) ctx_.wait(stage, StreamKind::Compute, mb.last_in);
    if (!issued.empty()) ctx_.wait(stage, StreamKind::OffloadIn, issued);
    mb.last_in = copy(stage, StreamKind::OffloadIn, k, microbatch);
    // the buffer it copies into is allocated when the copy is issued
    ctx_.memory(stage, mb.last_in, mb.bytes.at(static_cast<std::size_t>(k)), MemoryKind::Activations, false);
    mb.offloaded = std::max(1, k);
  }
  if (index == 0) {
    ctx_.wait(stage, StreamKind::Compute, mb.last_in);
    microbatches_.erase(microbatch);
  }
}

}  // namespace trainsim::lower
