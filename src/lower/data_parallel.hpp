#pragma once
// Data parallelism and ZeRO: gradient buckets reduced as the last micro-batch's backward produces
// them (overlap_grad_reduce: PyTorch DDP, Megatron's --overlap-grad-reduce) or all after it (in
// grad_reduce_dtype), reduce-scatter with a sharded optimizer and the parameter all-gather
// overlapped with the next forward (ZeRO-1, Megatron's distributed optimizer with
// --overlap-param-gather) or before it,
// gradients reduce-scattered unit by unit every micro-batch (ZeRO-2), parameters gathered per unit
// before forward and backward with one unit of prefetch (ZeRO-3/FSDP), or as DeepSpeed gathers them
// (per module or per tensor, synchronously, through tensor lists: spec::StrategySpec::zero3_gather
// and the keys after it); then the optimizer step.
// Private to lower/.
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "lower/context.hpp"
#include "trainsim/model/params.hpp"

namespace trainsim::lower {

// A unit of parameters: a transformer layer (its global index), the embedding or the head.
inline constexpr int kEmbeddingUnit = -1;
inline constexpr int kHeadUnit = -2;

// What a unit's kernels are the same as: the embedding, the head, any dense layer (0) or any MoE
// layer (1).
int unit_kind(const spec::ModelSpec& model, int unit);

// The units of a stage's model chunk in forward order: embedding (first virtual stage), layers,
// the multi-token prediction modules' layers and the head (last virtual stage).
std::vector<int> chunk_units(const spec::Job& job, int stage, int chunk);

class DataParallel {
 public:
  explicit DataParallel(Context& ctx);

  void start_of_step();
  // Before the host launches a unit's pass: under FSDP1's rate limiter (limit_all_gathers) it
  // first waits, for each gather the pass issues, until the parameters gathered two units before
  // are freed on the device.
  // Under zero3_sync the host fetches the pass's parameters here: for each gather it synchronizes
  // the device, launches the gather and waits for it (a `recomputed` layer's backward gathers again
  // what its recomputation released).
  void before_launch(int stage, int chunk, int unit, int microbatch, bool forward, bool recomputed = false);
  // Whether ZeRO-3's collectives are launched by the host one by one (per module or tensor,
  // synchronously or through tensor lists), each a host task of its own, rather than as part of
  // their pass's launch (Passes::host_time).
  bool launches_own_collectives() const;
  // Before a unit's forward or backward (its pass order given): the compute stream waits for its
  // parameters; ZeRO-3 gathers them and prefetches the next unit once `previous` has run.
  void before_pass(int stage, int chunk, int unit, int microbatch, bool forward, const TaskList& previous);
  // After the pass: ZeRO-3 releases the gathered parameters when `last` ends.
  void after_pass(int stage, int unit, bool forward, int microbatch, const TaskList& last);
  // A unit's weight gradients for a micro-batch are complete when `last` ends.
  void gradients_ready(int stage, int chunk, int unit, int microbatch, const TaskList& last);
  // The remaining reductions, the tied-embedding all-reduce, the gradient norm and the optimizer.
  void end_of_step(const std::vector<TaskList>& last_compute);
  // What must follow the stage's last compute task, each part alone on its resources (a lower
  // bound, lower::step_time_lower_bound): the gradient reductions deferred to the end of the
  // backward (ZeRO 0-1 without overlap_grad_reduce), one after another on the data-parallel
  // stream, then the optimizer step on the compute stream.
  Duration tail_lower_bound(int stage);
  // ZeRO-3: the parameter gathers and gradient reductions of the stage's layers over a step, each
  // alone on its links; they run one after another on the rank's data-parallel stream, so the step
  // takes at least their sum (lower::step_time_lower_bound). Zero under other stages.
  Duration stream_lower_bound(int stage);

 private:
  struct UnitParams {
    double dense = 0;
    double expert = 0;
  };
  struct Bucket {
    double dense = 0;
    double expert = 0;
    int pending = 0;  // units still to finish their last micro-batch
  };
  // ZeRO-3: the key a unit's gathered parameters are kept under for a pass (unit, micro-batch,
  // forward): the pass's own, the micro-batch's forward one, or the step's first.
  using GatherKey = std::tuple<int, int, bool>;
  struct StageState {
    std::map<std::pair<int, int>, std::size_t> bucket_of;  // (chunk, unit) -> bucket
    std::vector<Bucket> buckets;
    std::vector<TaskList> gathers_at_start;                   // ZeRO-1/2, per bucket
    std::map<std::tuple<int, int, bool>, TaskList> gathered;  // ZeRO-3 (unit, microbatch, forward)
    std::vector<TaskList> reductions;
    std::vector<std::size_t> deferred;  // buckets reduced after the backward (no overlap_grad_reduce)
    std::deque<TaskList> frees;         // ZeRO-3: gathered parameters freed, not yet waited for
    std::set<GatherKey> to_copy_out;    // FSDP2: gathers whose copy-out their first pass still runs
    TaskList last_zero3;                // the last ZeRO-3 gather or reduce-scatter issued
  };

  UnitParams unit_params(int stage, int unit) const;
  // The unit's parameter tensors on a GPU (model::layer_param_tensors, the embedding's, the head's),
  // built once per unit kind.
  const std::vector<model::ParamTensor>& unit_tensors(int unit) const;
  // One tensor as a part of a collective; the collectives a part is, one per group its tensors
  // shard over (gather_steps, reduce_steps).
  static UnitParams part_of(const model::ParamTensor& t);
  static int collectives_in(const UnitParams& part);
  // What ZeRO-3 gathers of the unit: its parameters less the tensors below the persistence
  // threshold, which every rank keeps whole.
  UnitParams gathered_params(int stage, int unit) const;
  // The parts ZeRO-3 gathers a unit in, in forward order, as (dense, expert) elements, each part
  // one gather (two where it holds dense and expert tensors): the unit (zero3_gather=unit), each
  // module's tensors (module) or each tensor (parameter), the persistent tensors left out.
  std::vector<UnitParams> gather_parts(int stage, int unit) const;
  // The parts its gradients are reduce-scattered in: each tensor under `parameter`, else the unit.
  std::vector<UnitParams> reduce_parts(int stage, int unit) const;
  // The host's time to issue a part's collectives when it launches them itself: each one's launch
  // and, under zero3_list_io, one copy per rank of its group (each rank's slice copied out of the
  // gather's output or into the reduce-scatter's input).
  Duration own_launch_time(const UnitParams& part) const;
  // ZeRO-3: a gather of `parts`; under zero3_sync the host first synchronizes the device (its last
  // compute and ZeRO-3 collective) and then waits for each collective.
  TaskList gather_unit(int stage, const std::vector<UnitParams>& parts, std::string_view name);
  // ZeRO-2/3: the unit's gradients reduce-scattered, in reduce_parts.
  void reduce_scatter_unit(int stage, int unit);
  // the unit's parameters that train, whose gradients are reduced (under LoRA its adapters)
  UnitParams grad_params(int stage, int unit) const;
  GatherKey gather_key(int unit, int microbatch, bool forward) const;
  // The gathers a pass issues: its own unit's unless already gathered, then the next unit's
  // (the prefetch) unless already gathered.
  struct Gather {
    int unit;
    GatherKey key;
    bool prefetch;
  };
  std::vector<Gather> gathers_of(int stage, int chunk, int unit, int microbatch, bool forward) const;
  // A gather of the unit's parameters for `key` issued from `first` to `last`: its buffer held from
  // `first` (released in after_pass), the pass waiting for `last`, FSDP2's copy-out still to run.
  void keep_gathered(int stage, int unit, const GatherKey& key, const TaskList& first, const TaskList& last);
  void build_buckets(int stage);
  TaskList gather(int stage, const UnitParams& p, std::string_view name);
  void reduce(int stage, const UnitParams& p, bool scatter, std::string_view name);
  // FSDP's memory-bound copies around its collectives (spec::StrategySpec::fsdp_version), per
  // parameter: FSDP2 copies each all-gather's output into the parameters (read and write, in the
  // weights' dtype) on the compute stream before the unit's pass; before a unit's gradient
  // reduce-scatter, FSDP2 concatenates the gradients into the reduce-scatter input in the reduce
  // dtype, FSDP1 casts the unsharded gradient to the reduce dtype (when it differs) and pre-divides
  // it in place, on its reduce-scatter stream.
  double copy_out_bytes_per_param() const;
  double reduce_copy_bytes_per_param() const;
  // The unit's gradients prepared for their reduce-scatter (the copies above), on the DP stream.
  void before_reduce_scatter(int stage, const UnitParams& p, int unit);
  Duration copy_time(double bytes) const;
  // One collective a gather or a reduction of a unit's parameters issues: what it moves over which
  // group; `across_replicas` names HSDP's all-reduce across the shard groups, `completes` marks the
  // collective that ends the unit's part (what waits for a reduction waits for it).
  struct Step {
    cost::CollectiveKind kind;
    Bytes bytes;
    const std::vector<spec::ParallelDim>* dims;
    Subgroup subgroup;
    bool across_replicas = false;
    bool completes = true;
  };
  std::vector<Step> gather_steps(const UnitParams& p) const;
  std::vector<Step> reduce_steps(const UnitParams& p, bool scatter) const;
  // The steps one after another, each alone on its links (a lower bound on their time).
  Duration uncontended(int stage, const std::vector<Step>& steps);
  // A whole bucket's gradients: all-reduced, or reduce-scattered under ZeRO-1.
  void reduce_bucket(int stage, std::size_t bucket);
  Subgroup expert_shard() const;
  // The ranks holding the same experts (the expert-data-parallel group: dp·cp / the outer ep).
  std::int64_t expert_ranks() const;
  Duration optimizer_launch_time(int stage) const;
  // The optimizer step's kernels over the stage's (sharded) parameters.
  Duration optimizer_step_time(int stage) const;

  Context& ctx_;
  int zero_;
  // ZeRO-3: gathered parameters kept from the forward for the backward; and, under a pipeline
  // schedule, kept (and gradients left unreduced) until the last micro-batch
  bool keep_for_backward_;
  bool keep_for_step_;
  bool overlap_grad_reduce_;
  bool overlap_param_gather_;
  bool limit_all_gathers_;
  int fsdp_version_;
  spec::Zero3Gather gather_mode_;
  bool sync_;
  bool list_io_;
  double persistence_threshold_;  // zero3_persistence_threshold, in elements
  double max_reuse_distance_;     // zero3_max_reuse_distance, in elements
  double grad_bytes_;  // per gradient element reduced
  Subgroup shard_;     // the ranks ZeRO shards over (HSDP: part of the data-parallel group)
  std::int64_t microbatches_;
  std::vector<model::StageParams> trainable_;  // per stage (model::trainable_stage_params)
  double bucket_params_;
  std::vector<StageState> stages_;
  std::vector<spec::ParallelDim> dense_dims_;
  std::vector<spec::ParallelDim> expert_dims_;
  mutable std::map<int, std::vector<model::ParamTensor>> tensors_;  // unit_tensors, by unit_kind
};

}  // namespace trainsim::lower
