#pragma once
// The lowering's working state: the simulated ranks of every stage, their streams, and helpers
// that issue compute, collective and transfer tasks on all ranks of a stage at once. Streams
// behave like CUDA streams: tasks run in issue order, and wait(...) adds dependencies to the next
// task issued on a stream (as cudaStreamWaitEvent does). Private to lower/.
#include <map>
#include <set>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "trainsim/lower/lowering.hpp"
#include "trainsim/lower/schedule.hpp"
#include "trainsim/topo/placement.hpp"

namespace trainsim::lower {

inline constexpr sim::TaskId kNoTask{0xffffffffu};
// The dimension lists collectives run over.
inline constexpr spec::ParallelDim kTp[] = {spec::ParallelDim::Tp};
inline constexpr spec::ParallelDim kCp[] = {spec::ParallelDim::Cp};
inline constexpr spec::ParallelDim kEp[] = {spec::ParallelDim::Ep};
// One task per simulated rank of a stage, in the order of Context::stage_ranks(stage). A folded
// run simulates one rank per stage: the list lives inline (the lowering makes one per task).
using TaskList = boost::container::small_vector<sim::TaskId, 2>;

// Part of a group along some dims (HSDP: ZeRO sharding within blocks of the data-parallel group,
// replication across them): the block of `size` consecutive members holding a rank, or with
// `across` the members at the same position of every block. size 0: the whole group.
struct Subgroup {
  int size = 0;
  bool across = false;
};

class Context {
 public:
  Context(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options, Lowered& out);

  const spec::Job& job() const { return *job_; }
  const LoweringOptions& options() const { return *options_; }
  const topo::Placement& placement() const { return placement_; }
  const model::KernelContext& kernels() const { return kernels_; }
  const model::LayerShape& shape() const { return shape_; }
  cost::CostModel& costs() { return *costs_; }
  sim::TaskGraph& graph() { return out_->graph; }
  int stages() const { return static_cast<int>(stage_ranks_.size()); }
  const std::vector<std::size_t>& stage_ranks(int stage) const { return stage_ranks_[static_cast<std::size_t>(stage)]; }
  const SimulatedRank& rank(std::size_t index) const { return out_->ranks[index]; }

  // The lane the next tasks go to (0, or 1: the second micro-batch of a combined-1F1B pair, on the
  // ranks' second compute and layer-collective streams).
  void set_lane(int lane) { lane_ = lane; }
  // The last compute task issued on `lane` of every rank of `stage` (kNoTask where none).
  TaskList last_compute(int stage, int lane) const;
  // Dependencies for the next task on `stream` of every rank of `stage` (kNoTask entries ignored).
  void wait(int stage, StreamKind stream, const TaskList& tasks);

  // `work`: the FLOPs and bytes of its kernels, kept when the options ask (Lowered::work).
  TaskList compute(int stage, sim::TaskName name, Duration duration, Category category, TaskWork work = {});
  // A kernel on another of the ranks' streams (FSDP's copies on its reduce-scatter stream).
  TaskList kernel(int stage, StreamKind stream, sim::TaskName name, Duration duration, Category category,
                  TaskWork work = {});
  // The host launching the next pass on every rank of `stage`: a task on its host thread (after
  // the waits pending there), which the stage's next compute and data-parallel tasks wait for.
  TaskList launch(int stage, sim::TaskName name, Duration duration);
  // A launch the host spends `duration` on that is not a task (it can never delay the device).
  void unissued_launch(int stage, Duration duration);
  // One collective per group along `dims` among the stage's ranks, on their `stream`; costed on the
  // whole group the placement gives (all its ranks, simulated or not).
  // `fraction` of the collective under `algorithm` ("auto": NCCL's choice) is one step of it, its
  // time and bytes that share (`whole_bytes`: its time only, all its bytes moving, the rest beside
  // other work); `subgroup` narrows each group.
  TaskList collective(int stage, sim::TaskName name, cost::CollectiveKind kind, Bytes bytes,
                      std::span<const spec::ParallelDim> dims, StreamKind stream, Category category,
                      double fraction = 1.0, std::string_view algorithm = "auto", Subgroup subgroup = {},
                      bool whole_bytes = false);
  // The same collective as one issued before with the same arguments but the name's number (a
  // pass played back): its costing choices are kept already (Lowered::collectives).
  TaskList collective_again(int stage, sim::TaskName name, cost::CollectiveKind kind, Bytes bytes,
                            std::span<const spec::ParallelDim> dims, StreamKind stream, Category category,
                            double fraction, std::string_view algorithm, Subgroup subgroup = {},
                            bool whole_bytes = false);
  // The longest time a group of the stage's ranks along `dims` takes for the collective alone on its
  // links (the cost model's answer, uncontended): no simulated collective takes less.
  Duration uncontended(int stage, cost::CollectiveKind kind, Bytes bytes, std::span<const spec::ParallelDim> dims,
                       Subgroup subgroup = {});
  // A collective among explicitly given ranks of two stages (the tied-embedding all-reduce).
  TaskList collective_between(int stage_a, int stage_b, sim::TaskName name, Bytes bytes, StreamKind stream,
                              TaskList& on_b);
  // From every rank of `from` to its peer in `to` (same coordinates but the stage); returns the
  // transfers in the order of `to`'s ranks.
  TaskList transfer(int from, int to, sim::TaskName name, Bytes bytes, bool forward);
  void memory(int stage, const TaskList& tasks, std::int64_t bytes, MemoryKind kind, bool at_end);
  // `tasks` ran the loss (SimulatedRank::first_loss keeps each rank's first).
  void loss_ran(int stage, const TaskList& tasks);

 private:
  sim::StreamId stream_of(std::size_t rank_index, StreamKind kind) const;
  sim::LoadId load_for(const cost::CollectivePlan& plan);
  // `overlaps_compute`: the collective runs beside compute, which loses the SMs its channels hold.
  sim::CommWork comm_work(const cost::CollectiveCost& cost, Bytes bytes, bool overlaps_compute);
  // Appends the waits pending on the rank's stream (sorted, without repeats) to `into`; none remain.
  void take_pending(std::size_t rank_index, StreamKind kind, std::vector<sim::TaskId>& into);
  // Keeps how the collective `task` was costed, once per distinct choice (Lowered::collectives);
  // looked up by the task's interned label, most collectives repeating a choice already kept.
  // `cost` is one of costed_'s, which lives as long as choices_: the key keeps a view of its
  // algorithm.
  struct CostedGroup;
  void record(sim::TaskId task, cost::CollectiveKind kind, const CostedGroup& costed);
  struct ChoiceKey {
    std::uint32_t label = 0;
    cost::CollectiveKind kind{};
    cost::Protocol protocol{};
    std::int64_t bytes = 0;
    std::int64_t group_size = 0;
    std::string_view algorithm;
    friend bool operator==(const ChoiceKey&, const ChoiceKey&) = default;
  };
  struct ChoiceKeyHash {
    std::size_t operator()(const ChoiceKey& k) const;
  };
  std::size_t index_of_rank(int rank) const;
  TaskList issue_collective(int stage, sim::TaskName name, cost::CollectiveKind kind, Bytes bytes,
                            std::span<const spec::ParallelDim> dims, StreamKind stream, Category category,
                            double fraction, std::string_view algorithm, Subgroup subgroup, bool whole_bytes,
                            bool record_choices);
  // The rank of `rank`'s pipeline group on `stage` (pp_groups_ keeps each group asked for).
  int pp_peer(int rank, int stage);
  std::unordered_map<int, std::vector<int>> pp_groups_;
  // With LoweringOptions::record_work: what `task` does, and a group's index in Lowered::groups.
  void note(sim::TaskId task, const TaskWork& work);
  std::int32_t work_group(std::vector<int> devices);

  const spec::Job* job_;
  cost::CostModel* costs_;
  const LoweringOptions* options_;
  Lowered* out_;
  topo::Placement placement_;
  model::KernelContext kernels_;
  model::LayerShape shape_;
  std::vector<std::vector<std::size_t>> stage_ranks_;
  std::map<int, std::size_t> rank_index_;
  // per rank: the waits of each stream, the second lane's after the first's
  std::vector<std::array<std::vector<sim::TaskId>, kStreamKinds + kLaned>> pending_;
  int lane_ = 0;
  // `kind`'s position among the second lane's streams while tasks go there, else -1
  int second_lane(StreamKind kind) const;
  // `kind`'s waits in pending_ (the lane's own)
  std::size_t slot(StreamKind kind) const;
  std::vector<std::array<sim::TaskId, 2>> last_compute_;  // per rank and lane
  std::map<const cost::CollectivePlan*, sim::LoadId> loads_;
  std::unordered_set<ChoiceKey, ChoiceKeyHash> choices_;
  // A stage's groups along some dims: the group's size, its simulated members (positions in
  // stage_ranks, in order) and its interned members for the cost model.
  struct StageGroup {
    std::size_t size = 0;
    std::vector<std::size_t> members;
    cost::GroupId group;
    std::int32_t work_group = -1;  // Lowered::groups, with record_work
  };
  const std::vector<StageGroup>& groups_of(int stage, std::span<const spec::ParallelDim> dims, Subgroup subgroup);
  // A collective call of a stage costed once (a pass issues the same calls for every micro-batch):
  // each group's cost scaled to `fraction`, and its work when the cost model planned it.
  struct CallKey {
    int stage = 0;
    std::uint32_t dims = 0;  // as a bit set
    Subgroup subgroup;
    cost::CollectiveKind kind{};
    std::int64_t bytes = 0;
    double fraction = 1.0;
    bool whole_bytes = false;
    bool overlaps_compute = false;
    std::string algorithm;
    friend bool operator==(const CallKey& a, const CallKey& b) {
      return a.stage == b.stage && a.dims == b.dims && a.subgroup.size == b.subgroup.size &&
             a.subgroup.across == b.subgroup.across && a.kind == b.kind && a.bytes == b.bytes &&
             a.fraction == b.fraction && a.whole_bytes == b.whole_bytes && a.overlaps_compute == b.overlaps_compute &&
             a.algorithm == b.algorithm;
    }
  };
  struct CallKeyHash {
    std::size_t operator()(const CallKey& k) const;
  };
  struct CostedGroup {
    const StageGroup* group = nullptr;
    cost::CollectiveCost cost;
    Bytes bytes;         // the step's share of the collective's bytes
    sim::CommWork work;  // (without a plan, a fresh load each time: comm_work)
  };
  const std::vector<CostedGroup>& costed_groups(const CallKey& key, std::span<const spec::ParallelDim> dims,
                                                Bytes bytes);
  std::unordered_map<CallKey, std::vector<CostedGroup>, CallKeyHash> costed_;
  static constexpr std::size_t kNotSimulated = ~std::size_t{0};
  std::vector<std::size_t> stage_position_;  // per rank: its position in its stage's list
  // by (stage, dims as a bit set, subgroup size, across), in the order of their first member
  std::map<std::tuple<int, std::uint32_t, int, bool>, std::vector<StageGroup>> stage_groups_;
  std::map<std::vector<int>, std::int32_t> work_groups_;
  std::vector<sim::StreamId> streams_;  // scratch space
  std::vector<sim::TaskId> deps_;
};

}  // namespace trainsim::lower
