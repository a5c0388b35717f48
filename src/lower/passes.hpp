#pragma once
#include <set>
// The forward, backward and weight-gradient passes of a model chunk on a stage, kernel by kernel
// grouped into compute tasks between communication points: Megatron-LM's tensor-parallel
// all-reduces (or, with SP, all-gathers and reduce-scatters), context-parallel K/V all-gathers,
// expert-parallel all-to-alls, recomputation, and the activation memory each pass holds.
// Private to lower/.
#include <array>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "lower/context.hpp"
#include "lower/data_parallel.hpp"
#include "lower/offload.hpp"
#include "trainsim/model/saved_tensors.hpp"

namespace trainsim::lower {

class Passes {
 public:
  Passes(Context& ctx, DataParallel& dp);

  // Each returns the last compute task of the pass on every rank of the stage.
  TaskList forward(int stage, int chunk, int microbatch);
  TaskList backward(int stage, int chunk, int microbatch);  // with weight gradients unless split
  TaskList weight_grad(int stage, int chunk, int microbatch);

  // How long one micro-batch's passes of a unit keep a rank of `stage` busy without contention:
  // kernels plus the collectives the compute stream waits for (tensor-, context- and
  // expert-parallel), as forward, backward without weight gradients, and weight gradients.
  struct UnitTimes {
    Duration forward;
    Duration backward_data;
    Duration weight;
  };
  // With `blocking_comm` off, the collectives a pass waits for are left out: under combined 1F1B
  // they run beside the other lane's compute.
  UnitTimes unit_times(int stage, int unit, bool blocking_comm = true);
  // The simulated rank of a stage (its position in Context::stage_ranks) whose groups unit_times
  // costs the collectives on: the first by default; a straddling group's rank (a folded run's
  // second rank of each stage) waits longer.
  void measure_at(std::size_t position) { measure_position_ = position; }

  // What the host launches for a unit's pass (docs/model.md "Host overhead").
  struct Launches {
    int kernels = 0;
    int collectives = 0;
  };

 private:
  struct Kernel {
    std::string_view op;  // its name (ops_of(unit)[index].name when found)
    std::uint32_t index;  // its position in ops_of(unit), or kNoOp
    model::Pass pass;
    int parts = 1;       // one of `parts` equal blocks of the kernel (ring attention)
    double scale = 1.0;  // slowed down by this factor (SMs lent to an overlapped collective)
  };
  // Compute kernels queued until the next communication (or the end of the unit).
  class Writer;
  // A unit's pass (forward, backward, replay) as a Writer issued it on a stage: its tasks in order,
  // each with what it was costed at, played back for the stage's later micro-batches instead of
  // walking the unit's ops, kernels and collectives again (Writer::taped).
  struct TapeStep {
    enum class Kind : std::uint8_t { Compute, WaitForLast, Collective, WaitFor, KernelCategory };
    Kind kind = Kind::Compute;
    Category category = Category::Compute;  // of the task; KernelCategory: the writer's
    StreamKind stream = StreamKind::Compute;
    std::uint32_t label = 0;  // interned
    std::uint32_t step = 0;   // WaitFor: the Collective step waited for
    Duration duration;        // Compute
    TaskWork work;
    cost::CollectiveKind collective{};  // Collective
    Bytes bytes;
    boost::container::small_vector<spec::ParallelDim, 2> dims;
    double fraction = 1.0;
    std::string algorithm;
    Subgroup subgroup;
    bool whole_bytes = false;
  };
  struct Tape {
    std::vector<TapeStep> steps;
    std::vector<std::pair<int, Kernel>> queued;  // kernels left queued at the end
    bool valid = true;                           // false: waited on tasks from before the pass (played never)
  };
  // By pass letter, stage, unit, which pass (0 forward, 1 backward, 2 replay) and its argument, and
  // the writer's state (kernel category, no compute task yet, none since mark_first), packed.
  std::unordered_map<std::uint64_t, Tape> tapes_;
  // Writer::uncontended's answers by rank, dims (as a bit set), collective, bytes, fraction and
  // algorithm.
  std::map<std::tuple<int, std::uint32_t, cost::CollectiveKind, std::int64_t, double, std::string>, Duration>
      uncontended_;

  const std::vector<model::Op>& ops_of(int unit);
  Duration duration(int unit, const std::vector<Kernel>& kernels);
  // The FLOPs and HBM bytes of the kernels (Lowered::work; zero unless the options keep them).
  TaskWork work(int unit, const std::vector<Kernel>& kernels);
  int launches(int unit, const std::vector<Kernel>& kernels);
  // The host's time to launch a unit's pass ('F' forward, 'B' backward with `recomputed` saying
  // whether full recomputation replays it first, 'W' weight gradients), and the host task that
  // does it on every rank of the stage: the stage's next compute and data-parallel tasks wait for it.
  Duration host_time(int stage, int unit, char pass, bool recomputed);
  void launch(int stage, int unit, char pass, bool recomputed, int microbatch);
  // The device time of a unit's pass without contention (what the host's lead grows by).
  Duration device_time(int stage, int unit, char pass, bool recomputed);

 public:
  // Decides, before the step is lowered, whether the host can ever hold back `stage`'s device
  // (docs/model.md "Host overhead"): walking the stage's passes in program order with the host's
  // lead over the device, lead' = max(lead, 0) + device time − next launch time, from the step's
  // start; if the lead never falls below zero after the first launch, only that first launch is a
  // host task (the rest are all hidden behind the device, and would add a fifth of an every-rank
  // simulation's tasks while changing no time). Host waits on the device (FSDP1's rate limiter)
  // always keep every launch.
  void plan_host(int stage, const StageSchedule& schedule);

 private:
  void unit_forward(Writer& w, int unit, Category category);
  void unit_backward(Writer& w, int unit, bool weights);
  // The head: the final norm, the logits and the loss, with each multi-token prediction module's
  // projection, norm, logits and loss after them (its layer is a unit before the head).
  void head_forward(Writer& w, Category category);
  void head_backward(Writer& w, const std::vector<model::Pass>& bwd);
  void mlp_forward(Writer& w, int unit, bool moe, Category category, cost::CollectiveKind tp_out, Bytes act);
  void mlp_backward(Writer& w, int unit, const std::vector<model::Pass>& bwd, bool moe, cost::CollectiveKind tp_in,
                    Bytes act);
  // The checkpointing policy's effect on a layer (full recomputation takes it or not).
  const model::LayerCheckpoint& checkpoint(int unit, bool recomputed);
  std::int64_t stored_activations(int unit, bool recomputed);
  std::int64_t rebuilt_activations(int unit, bool recomputed);
  void replay(Writer& w, int unit, bool recomputed);
  Bytes kv_gather_bytes() const;
  // What a sequence-parallel all-gather of an FP8 GEMM's operand carries: `act` (a hidden state in the
  // activation dtype), or 1 byte per element under spec::fp8_tp_gather_of.
  Bytes fp8_operand_gather(Bytes act) const;
  // What the MLP's sequence-parallel all-gather carries (fp8_operand_gather where it feeds an FP8 GEMM).
  Bytes mlp_gather_bytes(bool moe, Bytes act) const;
  bool overlap_shared_experts() const;
  // The layers of a chunk's units that full recomputation recomputes.
  std::set<int> recomputed_units(const std::vector<int>& units) const;
  // Whether the MLP of a (MoE) layer sits between tensor-parallel collectives.
  bool mlp_tp_comm(bool moe) const;
  // The expert-parallel group's dims (folded: the tensor-parallel ranks too).
  std::span<const spec::ParallelDim> ep_dims() const;
  // tp_overlap applies: sequence parallelism over more than one rank.
  bool tp_overlap() const;
  // Share of the SMs a pipelined reduce-scatter takes from its GEMM.
  double reduce_scatter_sm_share() const;
  void ring_attention(Writer& w, int unit, const std::vector<model::Pass>& passes, bool backward, Category category);
  Bytes all_to_all_bytes() const;
  // Under dispatcher=deepep with the expert-parallel group across scale-up domains, the exchange's
  // two legs: across the domains among the group's ranks of one local index (each token once per
  // domain that holds one of its experts: model::expected_domains_per_token), then inside each
  // domain (every routed copy to its expert's rank). Not split: one all-to-all of every copy.
  struct EpLegs {
    bool split = false;
    Subgroup across;  // the group's ranks of one local index, one per domain
    Subgroup within;  // the group's ranks in one domain
    Bytes across_bytes;
    Bytes within_bytes;
    // The legs run at once, chunk by chunk: the longer one whole, of the shorter only its last
    // chunk's share trails it.
    double across_share = 1.0;
    double within_share = 1.0;
  };
  EpLegs ep_legs() const;
  EpLegs ep_legs_;

  Context& ctx_;
  DataParallel& dp_;
  ActivationOffload offload_;
  bool split_;
  // the FP8 weight transpose each layer's backward builds and frees, where they are not kept
  std::int64_t transient_transpose_;
  bool measure_blocking_comm_ = true;          // see unit_times
  std::size_t measure_position_ = 0;           // see measure_at
  // per unit kind (unit_kind, from kHeadUnit): head, embedding, dense layer, MoE layer
  std::array<std::optional<std::vector<model::Op>>, 4> ops_;
  static constexpr std::uint32_t kNoOp = ~std::uint32_t{0};
  // The position of the op named `name` in ops_of(unit), or kNoOp.
  std::uint32_t op_index(int unit, std::string_view name);
  // Kernel durations by unit kind and kernel list (each kernel by its op's position), looked up
  // without building a key (a sweep lowers the same lists hundreds of thousands of times).
  struct DurationKey {
    int kind = 0;
    std::vector<std::tuple<std::uint32_t, model::Pass, int, double>> kernels;
  };
  struct DurationView {
    int kind = 0;
    std::span<const Kernel> kernels;
  };
  struct DurationHash {
    using is_transparent = void;
    std::size_t operator()(const DurationKey& k) const;
    std::size_t operator()(const DurationView& k) const;
  };
  struct DurationEq {
    using is_transparent = void;
    bool operator()(const DurationKey& a, const DurationKey& b) const {
      return a.kind == b.kind && a.kernels == b.kernels;
    }
    bool operator()(const DurationView& a, const DurationKey& b) const;
    bool operator()(const DurationKey& a, const DurationView& b) const { return (*this)(b, a); }
  };
  std::unordered_map<DurationKey, Duration, DurationHash, DurationEq> durations_;
  // Interned compute-task labels by pass letter, unit, and first and last op (Writer::compute_label).
  std::unordered_map<std::uint64_t, std::uint32_t> compute_labels_;
  std::map<std::pair<bool, bool>, model::LayerCheckpoint> checkpoints_;  // by (MoE, recomputed)
  std::map<std::tuple<int, char, bool>, Duration> host_times_;           // by (unit kind, pass, recomputed)
  std::map<int, UnitTimes> unit_times_;                                  // by unit kind
  std::vector<bool> host_hidden_;                                        // per stage (plan_host)
  std::vector<bool> launched_;                                           // per stage: its first launch issued
};

}  // namespace trainsim::lower
