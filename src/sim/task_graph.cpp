#include "trainsim/sim/task_graph.hpp"

#include "trainsim/util/error.hpp"

namespace trainsim::sim {

StreamId TaskGraph::add_stream(StreamInfo info) {
  streams_.push_back(std::move(info));
  stream_last_.push_back(kNone);
  stream_rows_tasks_ = ~std::size_t{0};
  return {static_cast<std::uint32_t>(streams_.size() - 1)};
}

PoolId TaskGraph::add_pool(PoolInfo info) {
  SIM_ASSERT(pools_.size() + 1 < kPoolLimit, "more than {} memory pools", kPoolLimit);
  pools_.push_back(info);
  return {static_cast<std::uint32_t>(pools_.size() - 1)};
}

LoadId TaskGraph::add_load(std::vector<LinkShare> shares) {
  for (const auto& s : shares) SIM_ASSERT(s.share > 0 && s.share <= 1 + 1e-9, "link share {} outside (0, 1]", s.share);
  loads_.push_back(std::move(shares));
  return {static_cast<std::uint32_t>(loads_.size() - 1)};
}

std::uint32_t TaskGraph::intern(std::string_view name) {
  if (const auto it = name_index_.find(name); it != name_index_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  SIM_ASSERT(id < kLabelLimit, "more than {} distinct task labels", kLabelLimit);
  name_index_.emplace(std::string(name), id);
  names_.emplace_back(name);
  return id;
}

std::string TaskGraph::name(TaskId t) const {
  const auto& task = tasks_[t.index()];
  std::string out = names_[task.label];
  if (const auto hash = out.find('#'); task.number >= 0 && hash != std::string::npos)
    out.replace(hash, 1, std::to_string(task.number));
  return out;
}

TaskId TaskGraph::add_task(TaskName name, std::span<const StreamId> streams, Work work, std::span<const TaskId> deps,
                           std::uint16_t category) {
  // (an interned name's label, for the messages below)
  if (name.interned != TaskName::kNotInterned && name.interned < names_.size()) name.label = names_[name.interned];
  SIM_ASSERT(!streams.empty(), "task {} on no stream", name.label);
  SIM_ASSERT(category < kCategoryLimit, "task {}: category {} out of range", name.label, category);
  SIM_ASSERT(tasks_.size() < kNone - 1 && task_streams_.size() + streams.size() < kNone &&
                 deps_.size() + deps.size() < kNone,
             "more tasks than a task graph holds");
  const TaskId id{static_cast<std::uint32_t>(tasks_.size())};
  for (const auto d : deps) SIM_ASSERT(d < id, "task {} depends on a later task", name.label);
  SIM_ASSERT(name.interned == TaskName::kNotInterned || name.interned < names_.size(), "task label {} not interned",
             name.interned);
  Record r{.label = name.interned != TaskName::kNotInterned ? name.interned : intern(name.label),
           .category = category,
           .number = name.number};
  if (const auto* comm = std::get_if<CommWork>(&work)) {
    SIM_ASSERT(comm->load.index() < loads_.size(), "unknown load");
    r.duration = comm->transfer;
    r.comm = static_cast<std::uint32_t>(comms_.size());
    comms_.push_back({comm->latency, comm->bytes, comm->compute_share, comm->load});
  } else {
    r.duration = std::get<ComputeWork>(work).duration;
  }
  for (const auto s : streams) {
    SIM_ASSERT(s.index() < streams_.size(), "unknown stream");
    SIM_ASSERT(stream_last_[s.index()] != id.value, "task {} twice on one stream", name.label);
    stream_last_[s.index()] = id.value;
  }
  task_streams_.insert(task_streams_.end(), streams.begin(), streams.end());
  stream_begin_.push_back(static_cast<std::uint32_t>(task_streams_.size()));
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  dep_begin_.push_back(static_cast<std::uint32_t>(deps_.size()));
  tasks_.push_back(r);
  return id;
}

void TaskGraph::index_streams() const {
  stream_row_begin_.assign(streams_.size() + 1, 0);
  for (const auto s : task_streams_) ++stream_row_begin_[s.index() + 1];
  for (std::size_t s = 0; s < streams_.size(); ++s) stream_row_begin_[s + 1] += stream_row_begin_[s];
  stream_rows_.resize(task_streams_.size());
  std::vector<std::uint32_t> next(stream_row_begin_.begin(), stream_row_begin_.end() - 1);
  for (std::uint32_t t = 0; t < tasks_.size(); ++t)
    for (auto i = stream_begin_[t]; i < stream_begin_[t + 1]; ++i)
      stream_rows_[next[task_streams_[i].index()]++] = TaskId{t};
  stream_rows_tasks_ = tasks_.size();
}

Work TaskGraph::work(TaskId t) const {
  const auto& r = tasks_[t.index()];
  if (r.comm == kCompute) return ComputeWork{r.duration};
  const auto& c = comms_[r.comm];
  return CommWork{.latency = c.latency, .transfer = r.duration, .load = c.load, .bytes = c.bytes,
                  .compute_share = c.compute_share};
}

void TaskGraph::add_dependency(TaskId task, TaskId on) {
  SIM_ASSERT(task.index() < tasks_.size() && on.index() < tasks_.size() && on != task,
             "dependency on an unknown task or on itself");
  if (task.index() + 1 == tasks_.size()) {
    deps_.push_back(on);  // still the last task: its range in deps_ grows
    dep_begin_.back() = static_cast<std::uint32_t>(deps_.size());
  } else {
    late_deps_[task.value].push_back(on);
  }
}

void TaskGraph::add_memory(TaskId task, MemoryEffect effect) {
  SIM_ASSERT(task.index() < tasks_.size() && effect.pool.index() < pools_.size() && effect.kind < kMemoryKinds,
             "unknown task, pool or memory kind");
  SIM_ASSERT(memory_.size() < kNone, "more memory effects than a task graph holds");
  const auto added = static_cast<std::uint32_t>(memory_.size());
  memory_.push_back({.bytes = effect.bytes, .pool = effect.pool.value, .kind = effect.kind, .at_end = effect.at_end});
  auto* link = &tasks_[task.index()].memory;
  while (*link != kNone) link = &memory_[*link].next;
  *link = added;
}

}  // namespace trainsim::sim
