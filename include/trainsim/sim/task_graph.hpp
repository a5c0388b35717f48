#pragma once
// What the engine runs: tasks on streams (serial FIFO resources, like CUDA streams), with
// dependencies, durations, shared-link demands and memory effects. Generic: the engine knows
// nothing of pipelines, ZeRO or tensor parallelism (docs/architecture.md); lower/ builds these graphs.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "trainsim/util/strong_id.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::sim {

using TaskId = StrongId<struct TaskTag>;
using StreamId = StrongId<struct StreamTag>;
using PoolId = StrongId<struct PoolTag>;
using LoadId = StrongId<struct LoadTag>;

// Runs for a fixed time, longer while communication kernels of its process hold some of its
// compute units (CommWork::compute_share).
struct ComputeWork {
  Duration duration;
};

// A transfer: a fixed latency, then `transfer` of bandwidth-bound time when alone on its links.
// While several transfers share a link they share its capacity (flow-level max-min fairness).
struct CommWork {
  Duration latency;
  Duration transfer;
  LoadId load;             // the share of each link's capacity the transfer uses when alone
  std::int64_t bytes = 0;  // payload, for reports (the engine does not need it)
  // Share of each participant's compute units its kernels hold while the task runs (NCCL's
  // channels are thread blocks): compute tasks of the same process run that much slower meanwhile.
  double compute_share = 0;
};

using Work = std::variant<ComputeWork, CommWork>;

// One link's share: the fraction of its capacity a transfer uses when it runs alone (≤ 1; 1 on
// its bottleneck).
struct LinkShare {
  std::uint32_t link = 0;
  double share = 0;
};

inline constexpr std::size_t kMemoryKinds = 4;  // labels for breakdowns at the peak; 0 is the baseline's

struct MemoryEffect {
  PoolId pool;
  std::int64_t bytes = 0;  // allocated (> 0) or freed (< 0)
  bool at_end = false;     // when the task ends rather than when it starts
  std::uint8_t kind = 1;   // < kMemoryKinds
};

// Stream kinds are labels for reports and timelines; the engine treats all streams alike.
struct StreamInfo {
  std::string name;           // "compute", "tp-comm", ...
  std::uint32_t process = 0;  // the rank it belongs to
  std::uint16_t kind = 0;
  // Its compute tasks run on the device's compute units, which communication kernels of the same
  // process share (false: a host thread, which they do not slow).
  bool device = true;
  // One of a rank's compute streams that run at once (two micro-batches' passes overlapped): its
  // running compute tasks split the compute units evenly with the others' (processor sharing).
  bool shares_compute = false;
};

struct PoolInfo {
  std::uint32_t process = 0;
  std::int64_t baseline = 0;  // bytes held before the first task (weights, optimizer state, runtime)
};

// A task's name: a label, interned, and a number that replaces the label's '#' ("F# L3" with 12 is
// "F12 L3"). Labels repeat across micro-batches; the numbers keep names cheap to store.
struct TaskName {
  static constexpr std::uint32_t kNotInterned = ~std::uint32_t{0};
  std::string_view label;
  std::int32_t number = -1;
  std::uint32_t interned = kNotInterned;  // TaskGraph::intern(label), when the caller kept it
  TaskName(std::string_view l, std::int32_t n = -1) : label(l), number(n) {}  // NOLINT: implicit on purpose
  TaskName(const char* l) : label(l) {}                                       // NOLINT
  // A label already interned in the graph the task goes to.
  static TaskName interned_label(std::uint32_t id, std::int32_t n) {
    TaskName t{std::string_view{}, n};
    t.interned = id;
    return t;
  }
};

// Stored compactly (a simulation of every rank of a 1,024-GPU job holds tens of millions of
// tasks): fixed-size records, with streams, dependencies and memory effects in shared arrays.
class TaskGraph {
 public:
  StreamId add_stream(StreamInfo info);
  PoolId add_pool(PoolInfo info);
  LoadId add_load(std::vector<LinkShare> shares);

  // A task on one or more streams (a collective occupies the stream of every participant). Tasks
  // start in the order they were added on each of their streams, once every dependency has ended.
  // `category` (below kCategoryLimit) labels the task for reports; the engine does not read it.
  TaskId add_task(TaskName name, std::span<const StreamId> streams, Work work, std::span<const TaskId> deps = {},
                  std::uint16_t category = 0);
  TaskId add_task(TaskName name, StreamId stream, Work work, std::span<const TaskId> deps = {},
                  std::uint16_t category = 0) {
    return add_task(name, std::span<const StreamId>(&stream, 1), work, deps, category);
  }
  static constexpr std::uint16_t kCategoryLimit = 256;
  void add_dependency(TaskId task, TaskId on);  // before the graph runs
  void add_memory(TaskId task, MemoryEffect effect);

  std::size_t num_tasks() const { return tasks_.size(); }
  std::size_t num_streams() const { return streams_.size(); }
  std::size_t num_pools() const { return pools_.size(); }
  const StreamInfo& stream(StreamId s) const { return streams_[s.index()]; }
  const PoolInfo& pool(PoolId p) const { return pools_[p.index()]; }
  const std::vector<LinkShare>& load(LoadId l) const { return loads_[l.index()]; }

  Work work(TaskId t) const;
  // Parts of work(t) without building it (the engine reads them per event): a compute task's
  // duration or a transfer's bandwidth-bound time; a transfer's latency, load and compute share.
  Duration duration(TaskId t) const { return tasks_[t.index()].duration; }
  Duration latency(TaskId t) const { return comms_[tasks_[t.index()].comm].latency; }
  LoadId load_of(TaskId t) const { return comms_[tasks_[t.index()].comm].load; }
  double compute_share(TaskId t) const { return comms_[tasks_[t.index()].comm].compute_share; }
  bool is_transfer(TaskId t) const { return tasks_[t.index()].comm != kCompute; }
  // A transfer's position among the graph's transfers (in the order they were added).
  std::uint32_t transfer_index(TaskId t) const { return tasks_[t.index()].comm; }
  std::size_t num_transfers() const { return comms_.size(); }
  std::span<const StreamId> streams(TaskId t) const {
    return {task_streams_.data() + stream_begin_[t.index()], task_streams_.data() + stream_begin_[t.index() + 1]};
  }
  std::uint16_t category(TaskId t) const { return tasks_[t.index()].category; }
  // A hint that `t` is about to be read: its record and its streams' range start loading.
  void prefetch(TaskId t) const {
    __builtin_prefetch(&tasks_[t.index()]);
    __builtin_prefetch(&stream_begin_[t.index()]);
  }
  // The tasks `t` waits for, in the order they were given (add_task's, then add_dependency's).
  template <class F>
  void for_each_dependency(TaskId t, F&& f) const {
    for (auto i = dep_begin_[t.index()]; i < dep_begin_[t.index() + 1]; ++i) f(deps_[i]);
    if (late_deps_.empty()) return;
    if (const auto it = late_deps_.find(t.value); it != late_deps_.end())
      for (const auto d : it->second) f(d);
  }
  // The task's memory effects, in the order they were added.
  template <class F>
  void for_each_memory(TaskId t, F&& f) const {
    for (auto i = tasks_[t.index()].memory; i != kNone; i = memory_[i].next) f(memory_[i].effect());
  }
  std::string name(TaskId t) const;
  // The task's label, before its number replaces the '#'.
  std::string_view label(TaskId t) const { return names_[tasks_[t.index()].label]; }
  // A label's interned number (added once): a caller that issues the same label many times keeps
  // it and names its tasks by TaskName::interned_label.
  std::uint32_t intern(std::string_view name);
  // The label's interned number: tasks with equal labels have equal numbers.
  std::uint32_t label_id(TaskId t) const { return tasks_[t.index()].label; }
  // The number that replaces the label's '#' (a micro-batch), -1 without one.
  std::int32_t number(TaskId t) const { return tasks_[t.index()].number; }
  // Tasks of a stream in issue order. Indexed from task_streams_ on the first call after tasks were
  // added (rows built once, not a vector per stream grown task by task): not to be called from two
  // threads at once while the graph is still growing.
  std::span<const TaskId> stream_tasks(StreamId s) const {
    if (stream_rows_tasks_ != tasks_.size()) index_streams();
    return {stream_rows_.data() + stream_row_begin_[s.index()], stream_rows_.data() + stream_row_begin_[s.index() + 1]};
  }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  static constexpr std::uint32_t kCompute = kNone;  // Record::comm of a compute task
  // 24 bytes a task (an every-rank step holds tens of millions); a transfer's other fields are in
  // comms_.
  static constexpr std::uint32_t kLabelLimit = 1u << 24;
  struct Record {
    Duration duration;             // a compute task's duration, a transfer's bandwidth-bound time
    std::uint32_t label : 24 = 0;  // interned
    std::uint32_t category : 8 = 0;
    std::int32_t number = -1;
    std::uint32_t comm = kCompute;  // index in comms_
    std::uint32_t memory = kNone;   // first memory effect in memory_
  };
  static_assert(sizeof(Record) == 24);
  struct Comm {
    Duration latency;
    std::int64_t bytes = 0;
    double compute_share = 0;
    LoadId load;
  };
  // A memory effect packed into 16 bytes (the pool's index in 24 bits).
  static constexpr std::uint32_t kPoolLimit = 1u << 24;
  struct Memory {
    std::int64_t bytes = 0;
    std::uint32_t pool : 24 = 0;
    std::uint32_t kind : 7 = 0;
    std::uint32_t at_end : 1 = 0;
    std::uint32_t next = kNone;  // the task's next effect
    MemoryEffect effect() const { return {PoolId{pool}, bytes, at_end != 0, static_cast<std::uint8_t>(kind)}; }
  };
  static_assert(sizeof(Memory) == 16);
  std::vector<Record> tasks_;
  std::vector<Comm> comms_;
  std::vector<std::uint32_t> stream_begin_{0};  // per task and one past: its range in task_streams_
  std::vector<StreamId> task_streams_;
  std::vector<std::uint32_t> dep_begin_{0};  // the same for deps_
  std::vector<TaskId> deps_;
  // Dependencies added after the task (trace replay's): looked up only, never iterated whole.
  std::unordered_map<std::uint32_t, std::vector<TaskId>> late_deps_;
  std::vector<Memory> memory_;
  std::vector<StreamInfo> streams_;
  std::vector<std::uint32_t> stream_last_;  // per stream: the last task issued on it, kNone before one
  void index_streams() const;
  mutable std::vector<std::uint32_t> stream_row_begin_;  // per stream and one past: its range in stream_rows_
  mutable std::vector<TaskId> stream_rows_;
  mutable std::size_t stream_rows_tasks_ = ~std::size_t{0};  // the tasks the rows were built for
  std::vector<PoolInfo> pools_;
  std::vector<std::vector<LinkShare>> loads_;
  std::vector<std::string> names_;
  // Looked up only, never iterated: hash order cannot reach any output. Transparent, so that a
  // label is looked up without building a string.
  struct LabelHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::uint32_t, LabelHash, std::equal_to<>> name_index_;
};

}  // namespace trainsim::sim
