#pragma once
// What real traces say, and what the engine makes of them:
//  - summarize: per profiler step, what was recorded (step time, compute, communication, their
//    overlap) and per collective counts, bytes and time;
//  - replay: the recorded CPU threads and GPU streams rebuilt as a task graph (launch → kernel
//    edges by correlation, synchronisation calls, stream waits, collectives matched across the
//    ranks given) and run on the engine, optionally with faster kernels, a faster network or the
//    cost model's collectives on a topology;
//  - calibrate: collective latency and bandwidth per operation and group size, and the sustained
//    GEMM fraction, fitted from the recorded kernels.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/cost/cost_model.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/trace/trace.hpp"

namespace trainsim::trace {

struct CollectiveTotals {
  std::string op;
  int group_size = 0;  // 0: not recorded
  std::int64_t count = 0;
  std::int64_t bytes = 0;    // of the sized ones
  std::int64_t unsized = 0;  // kernels without size metadata
  double time_s = 0;         // kernel time
};

// Where a replayed step's time went along its critical path: from the step's end back to its
// start, each task to whichever of its dependencies and stream predecessors ended last.
struct CriticalPath {
  double cpu_s = 0;      // runtime calls and the recorded gaps between them on CPU threads
  double compute_s = 0;  // GPU kernels, copies and sets
  double comm_s = 0;     // NCCL kernels
  double wait_s = 0;     // GPU ops' delays the trace does not explain
  // "CPU", "GPU" (compute kernels), "communication" or "unrecorded wait": whichever holds most of
  // the path
  const char* bound() const;
};

struct StepFigures {
  int rank = -1;
  int step = 0;
  double recorded_s = 0;
  std::optional<double> replayed_s;  // replay only
  std::optional<CriticalPath> critical_path;  // replay only
  double gpu_busy_s = 0;             // union of every GPU op
  double compute_s = 0;              // union of non-NCCL kernels, copies and sets
  double comm_s = 0;                 // union of NCCL kernels
  double overlap_s = 0;              // compute and communication at once
  double exposed_comm_s = 0;         // communication alone
  std::int64_t kernels = 0;
  std::int64_t nccl_kernels = 0;
  // the caching allocator's peaks during the step, from `[memory]` events (profile_memory=True)
  std::optional<std::int64_t> peak_allocated;
  std::optional<std::int64_t> peak_reserved;
};

struct FileFigures {
  std::string path;
  int rank = -1;
  int world_size = -1;
  std::string device;
  std::int64_t events = 0;
  std::int64_t kernels = 0;
  std::int64_t nccl_kernels = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> kernels_per_stream;  // (stream, kernels)
  std::vector<std::string> warnings;
};

// The model's peak memory beside the caching allocator's recorded one (`replay` and `calibrate`
// given the job the traces recorded: -w and -s). Both without the CUDA context and NCCL's buffers,
// which live outside the allocator; the largest over the traced ranks' steps against the model's
// largest stage.
struct MemoryComparison {
  std::int64_t recorded_allocated = 0;  // torch.cuda.max_memory_allocated: the live tensors
  std::int64_t recorded_reserved = 0;   // torch.cuda.max_memory_reserved
  std::int64_t model_live = 0;
  std::int64_t model_reserved = 0;
  double allocated_error() const;
  double reserved_error() const;
};

// The allocator's recorded peaks over the traces' profiler steps (every sample where a trace has
// no step); none without `[memory]` events.
std::optional<std::pair<std::int64_t, std::int64_t>> recorded_memory_peaks(const std::vector<RankTrace>& traces);

struct TraceReport {
  std::vector<FileFigures> files;
  std::int64_t kernels = 0;
  std::int64_t nccl_kernels = 0;
  std::vector<CollectiveTotals> collectives;
  std::vector<StepFigures> steps;
  std::vector<std::string> notes;     // what a replay assumed
  std::vector<std::string> warnings;  // what a replay could not do as asked
  bool what_if = false;               // a replay that changed something: its deviation is a change
  std::optional<MemoryComparison> memory;
};

TraceReport summarize(const std::vector<RankTrace>& traces);

struct ReplayOptions {
  double compute_scale = 1;  // GPU kernels, copies and sets run this many times faster
  double network_scale = 1;  // recorded NCCL kernels run this many times faster
  // Collectives costed by this model (ranks are its cluster's devices in order) instead of recorded;
  // kernels without size metadata keep their recorded time.
  cost::CostModel* costs = nullptr;
  // Without a cost model: measured collectives (a calibration's fits) replace the recorded NCCL
  // kernels of their operation and group size.
  std::optional<std::vector<spec::CollectiveFit>> fits;
};

TraceReport replay(const std::vector<RankTrace>& traces, const ReplayOptions& options);

struct CollectiveFitReport {
  spec::CollectiveFit fit;
  double median_error = 0;                               // |predicted / recorded − 1| over every kernel
  double envelope_error = 0;                             // the same against each size's fastest kernel
  std::vector<std::pair<std::int64_t, double>> fastest;  // (bytes, seconds) per size
};

struct CalibrationReport {
  spec::CalibrationSpec calibration;
  std::vector<CollectiveFitReport> collectives;
  std::int64_t gemm_samples = 0;
  double gemm_flops = 0;
  std::vector<std::string> notes;
  std::optional<MemoryComparison> memory;  // with the job: memory.fragmentation fitted from it
};

// `cluster` gives the device whose kernel model the GEMM fit scales; without it only the
// collectives are fitted.
// `memory_fit`: the caller fits memory.fragmentation from the traces' memory events, so traces
// without collectives or products to fit are not an error.
CalibrationReport calibrate(const std::vector<RankTrace>& traces, const std::optional<spec::ClusterSpec>& cluster,
                            bool memory_fit = false);

}  // namespace trainsim::trace
