#pragma once
// Lowering: a job (model + strategy on a cluster) becomes a task graph of per-rank compute and
// communication tasks, as Megatron-LM and DeepSpeed/FSDP run them: TP (and SP) collectives on the
// critical path, pipeline sends and receives between stages, data-parallel gradient reduction in
// buckets overlapped with the last micro-batch's backward, ZeRO-1/2/3 sharding, recomputation, the
// optimizer step, and the memory each task allocates and frees.
#include <optional>
#include <vector>

#include "trainsim/cost/cost_model.hpp"
#include "trainsim/model/kernel_model.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/sim/task_graph.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::lower {

// Streams of a rank, in timeline order (Perfetto threads).
enum class StreamKind : std::uint16_t {
  Compute,
  TpComm,
  CpComm,
  EpComm,
  DpComm,
  PpSendNext,
  PpRecvPrev,
  PpSendPrev,
  PpRecvNext,
  Host,        // the CPU thread that launches the rank's work (docs/model.md "Host overhead")
  OffloadOut,  // copies of saved activations to host memory (Transformer Engine's d2h stream)
  OffloadIn    // and back (its h2d stream)
};
inline constexpr int kStreamKinds = 12;
// A device stream that carries communication (not the compute stream, not the host).
inline bool is_comm_stream(StreamKind kind) {
  return kind != StreamKind::Compute && kind != StreamKind::Host;
}
std::string_view stream_kind_name(StreamKind kind);
// The streams a rank has twice when two micro-batches' passes run together (combined 1F1B): the
// compute stream and the layers' collectives; the rest (data-parallel, pipeline, host, offload)
// are shared by both.
inline constexpr StreamKind kLanedKinds[] = {StreamKind::Compute, StreamKind::TpComm, StreamKind::CpComm,
                                             StreamKind::EpComm};
inline constexpr int kLaned = 4;
// The position of `kind` in kLanedKinds, or -1.
inline int laned_index(StreamKind kind) {
  for (int i = 0; i < kLaned; ++i)
    if (kLanedKinds[i] == kind) return i;
  return -1;
}

// Task categories, for breakdowns.
enum class Category : std::uint16_t {
  Compute,
  Recompute,
  Optimizer,
  TpComm,
  CpComm,
  EpComm,
  DpComm,
  PpComm,
  Host,
  Offload  // activations copied to host memory and back
};
inline constexpr int kCategories = 10;
std::string_view category_name(Category c);

// Memory categories tracked separately at the peak.
enum class MemoryKind : std::uint8_t { Static, Activations, Buffers };

// A model-parallel group by its first rank (coordinate 0 along `dim`).
struct DistinctGroup {
  int rank = 0;
  spec::ParallelDim dim = spec::ParallelDim::Tp;
};

struct LoweringOptions {
  bool full = false;  // simulate every rank instead of one representative per pipeline stage
  spec::KernelTuning kernel;
  spec::MemoryTuning memory;
  spec::HostTuning host;
  int nccl_channels = spec::CollectiveTuning{}.channels;  // for NCCL's buffers (model::runtime_memory)
  // Perturbations (stragglers): each rank's compute kernels run this many times slower (indexed by
  // rank; empty or missing: 1)
  std::vector<double> compute_factor;
  // Ranks a perturbation makes different (its slow GPUs and degraded NICs): simulated on their own
  // with every rank they make different (their coordinates along tp, cp, ep and dp), the rest
  // folded. Ignored with `full`.
  std::vector<int> distinct_ranks;
  // Groups that run differently as a whole (the worst tp, cp or ep group straddling two scale-up
  // domains), each by its first rank: simulated beside the first group, its members folded into
  // that rank. Ignored with `full`.
  std::vector<DistinctGroup> distinct_groups;
  // Megatron-LM's data-parallel bucket: max(40M, 1M · dp) parameters.
  double min_bucket_params = 40e6;
  // Keep what each task does (Lowered::work): an exporter's need (Chakra), off otherwise.
  bool record_work = false;
  // Issue a unit's pass on a stage once by walking its ops, then play that back for the stage's
  // later micro-batches (the same tasks, costed once; docs/architecture.md "The path of `trainsim
  // run`"). Off: every pass walked afresh, the same graph (a test compares them).
  bool replay_passes = true;
  // The job's memory estimate (model::estimate_memory with `memory` and `nccl_channels`) when the
  // caller has it already (the run report, the sweep's screen); computed again when null.
  const model::MemoryEstimate* memory_estimate = nullptr;
};

struct SimulatedRank {
  int rank = 0;
  int stage = 0;
  std::int64_t stands_for = 1;  // ranks of the job that run as this one does (itself included)
  std::array<sim::StreamId, kStreamKinds> streams{};
  // The second lane's streams, of kLanedKinds in order (combined 1F1B); empty otherwise.
  std::vector<sim::StreamId> second;
  sim::PoolId pool;
  model::StageMemory static_memory;  // params, grads, optimizer, runtime buffers
  // The first task of the loss's forward on a rank holding the output layer: from its backward on,
  // the caching allocator holds the loss's cached block (model::loss_cached_bytes).
  std::optional<sim::TaskId> first_loss;
};

// Calls f(kind, stream) for each of the rank's streams, the second lane's after the first's.
template <class F>
void for_each_stream(const SimulatedRank& rank, F&& f) {
  for (int k = 0; k < kStreamKinds; ++k) f(static_cast<StreamKind>(k), rank.streams[static_cast<std::size_t>(k)]);
  for (std::size_t j = 0; j < rank.second.size(); ++j) f(kLanedKinds[j], rank.second[j]);
}

// How a collective of the step was costed: what reports show beside its tasks' times.
struct CollectiveChoice {
  std::string label;  // the task's label ("F# tp all-gather")
  std::string op;     // the operation
  std::int64_t bytes = 0;
  std::int64_t group_size = 0;
  std::string algorithm;
  std::string protocol;
  friend auto operator<=>(const CollectiveChoice&, const CollectiveChoice&) = default;
};

// What a task does beyond its duration, for exporters (LoweringOptions::record_work).
struct TaskWork {
  static constexpr std::int16_t kCompute = -1;
  double flops = 0;            // compute: the FLOPs of its kernels
  double bytes = 0;            // compute: the HBM bytes of its memory-bound kernels
  std::int16_t op = kCompute;  // communication: its cost::CollectiveKind (SendRecv: a pipeline transfer)
  // communication: its devices, an index into Lowered::groups (a transfer's: source, destination)
  std::int32_t group = -1;
};

struct Lowered {
  sim::TaskGraph graph;
  // one entry per distinct (label, bytes, group size, algorithm, protocol), sorted
  std::vector<CollectiveChoice> collectives;
  std::vector<SimulatedRank> ranks;
  // With LoweringOptions::record_work: one entry per task (by TaskId), and the device groups the
  // communication tasks run on (every member of the group, simulated or not), in rank order.
  std::vector<TaskWork> work;
  std::vector<std::vector<int>> groups;
  // Ranks of the job per simulated rank (1 with LoweringOptions::full; rounded down, and a mean,
  // when ranks stand for different numbers: SimulatedRank::stands_for).
  std::int64_t fold = 1;
  // Per stage: the host's time for the launches left out of the graph because they can never hold
  // the device back (Passes::plan_host), which the stage's host still spends (`host busy`).
  std::vector<Duration> unissued_host;
};

Lowered lower(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options);

}  // namespace trainsim::lower
