#include "trainsim/sim/task_graph.hpp"

#include "trainsim/util/error.hpp"

namespace trainsim::sim {

StreamId TaskGraph::add_stream(StreamInfo info) {
  streams_.push_back(std::move(info));
  stream_tasks_.emplace_back();
  return {static_cast<std::uint32_t>(streams_.size() - 1)};
}

PoolId TaskGraph::add_pool(PoolInfo info) {
  pools_.push_back(info);
  return {static_cast<std::uint32_t>(pools_.size() - 1)};
}

LoadId TaskGraph::add_load(std::vector<LinkShare> shares) {
  for (const auto& s : shares) SIM_ASSERT(s.share > 0 && s.share <= 1 + 1e-9, "link share {} outside (0, 1]", s.share);
  loads_.push_back(std::move(shares));
  return {static_cast<std::uint32_t>(loads_.size() - 1)};
}

std::uint32_t TaskGraph::intern(std::string_view name) {
  const auto [it, inserted] = name_index_.try_emplace(std::string(name), static_cast<std::uint32_t>(names_.size()));
  if (inserted) names_.emplace_back(name);
  return it->second;
}

std::string TaskGraph::name(TaskId t) const {
  const auto& task = tasks_[t.index()];
  std::string out = names_[task.label];
  if (const auto hash = out.find('#'); task.number >= 0 && hash != std::string::npos)
    out.replace(hash, 1, std::to_string(task.number));
  return out;
}

TaskId TaskGraph::add_task(TaskName name, std::span<const StreamId> streams, Work work, std::span<const TaskId> deps,
                           std::uint16_t category, std::int32_t priority) {
  SIM_ASSERT(!streams.empty(), "task {} on no stream", name.label);
  const TaskId id{static_cast<std::uint32_t>(tasks_.size())};
  for (const auto d : deps) SIM_ASSERT(d < id, "task {} depends on a later task", name.label);
  if (const auto* comm = std::get_if<CommWork>(&work)) SIM_ASSERT(comm->load.index() < loads_.size(), "unknown load");
  Task t{.label = intern(name.label),
         .number = name.number,
         .work = work,
         .streams = {streams.begin(), streams.end()},
         .deps = {deps.begin(), deps.end()},
         .memory = {},
         .category = category,
         .priority = priority};
  for (const auto s : streams) {
    SIM_ASSERT(s.index() < streams_.size(), "unknown stream");
    stream_tasks_[s.index()].push_back(id);
  }
  tasks_.push_back(std::move(t));
  return id;
}

void TaskGraph::add_dependency(TaskId task, TaskId on) {
  SIM_ASSERT(on.index() < tasks_.size() && on != task, "dependency on an unknown task or on itself");
  tasks_[task.index()].deps.push_back(on);
}

void TaskGraph::add_memory(TaskId task, MemoryEffect effect) {
  SIM_ASSERT(effect.pool.index() < pools_.size() && effect.kind < kMemoryKinds, "unknown pool or memory kind");
  tasks_[task.index()].memory.push_back(effect);
}

}  // namespace trainsim::sim
