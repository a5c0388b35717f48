#pragma once
// What a PyTorch-profiler (Kineto) trace recorded on one rank: its GPU kernels, copies and sets per
// stream, the CUDA runtime calls of every CPU thread (launches, synchronisation), the profiler
// steps, the NCCL collectives with their sizes and groups, and the matrix products' shapes.
//
// The reader streams: events are parsed one at a time (nlohmann's SAX interface over a zlib
// stream), so memory grows with the events kept, not with the file; names are interned.
// Times are nanoseconds from the first event of the file.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::trace {

// A string table: a trace repeats a few thousand names millions of times.
class Names {
 public:
  std::uint32_t intern(std::string_view name);
  const std::string& at(std::uint32_t id) const { return names_.at(id); }
  std::size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::map<std::string, std::uint32_t, std::less<>> ids_;
};

// An NCCL collective as the kernel (or the record_param_comms op around its launch) describes it.
struct Collective {
  std::string op;                 // all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv
  std::string algorithm;          // RING, TREE, ... when the kernel name says
  std::string protocol;           // LL, LL128, SIMPLE when the kernel name says
  std::string dtype;              // as recorded ("Float", "BFloat16", ...); empty when unknown
  std::int64_t in_elements = -1;  // -1: not recorded
  std::int64_t out_elements = -1;
  int group_size = 0;  // 0: not recorded
  std::vector<int> ranks;
  std::string group_name;
  bool sized() const { return in_elements >= 0 && !dtype.empty(); }
  // The size nccl-tests reports: the per-rank buffer of all-reduce, broadcast, reduce and send/recv,
  // the whole output of all-gather, the whole input of reduce-scatter and all-to-all. -1 if unknown.
  std::int64_t bytes() const;
};

enum class GpuKind { Kernel, Memcpy, Memset };

struct GpuOp {
  GpuKind kind = GpuKind::Kernel;
  std::uint32_t name = 0;  // Names id
  std::int64_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
  std::int64_t correlation = -1;
  std::int64_t bytes = 0;  // copies and sets
  std::optional<Collective> collective;
  std::int64_t end_ns() const { return start_ns + dur_ns; }
};

// A CUDA runtime (or driver) call on a CPU thread.
struct RuntimeCall {
  std::uint32_t name = 0;
  std::int64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
  std::int64_t correlation = -1;
  std::int64_t end_ns() const { return start_ns + dur_ns; }
};

// The CPU operators a replay or a calibration needs: record_param_comms (collective metadata in
// older traces) and matrix products with their input shapes.
struct CpuOp {
  std::uint32_t name = 0;
  std::int64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
  std::vector<std::vector<std::int64_t>> input_dims;
  std::vector<std::string> input_types;  // "Input type": "float", "c10::BFloat16", "c10::Half", "Scalar"
  std::optional<Collective> collective;
  std::int64_t end_ns() const { return start_ns + dur_ns; }
};

struct Step {
  int number = 0;  // N of ProfilerStep#N
  std::int64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
  std::int64_t end_ns() const { return start_ns + dur_ns; }
};

// A `[memory]` instant event of the PyTorch profiler (profile_memory=True): the caching
// allocator's totals on a CUDA device after an allocation or free.
struct MemorySample {
  std::int64_t ts_ns = 0;
  std::int64_t allocated = 0;  // "Total Allocated"
  std::int64_t reserved = 0;   // "Total Reserved"
};

struct RankTrace {
  std::string path;
  int rank = -1;  // distributedInfo; -1 when absent
  int world_size = -1;
  std::string backend;
  std::string nccl_version;
  std::string device;  // deviceProperties[0].name
  std::int64_t device_memory = 0;
  std::int64_t base_ns = 0;  // the absolute time of 0 (microseconds in the file × 1000)
  Names names;
  std::vector<GpuOp> gpu;  // in time order
  std::vector<RuntimeCall> runtime;
  std::vector<CpuOp> cpu_ops;
  std::vector<Step> steps;
  std::vector<MemorySample> memory;  // the GPU's, in file order
  std::int64_t events = 0;  // trace events read
  std::vector<std::string> warnings;
};

// Reads one rank's Chrome-trace JSON, plain or gzip. Unusable input (not JSON, no traceEvents, a
// truncated gzip stream) is a SpecError naming the file; what real traces contain (unknown
// categories, events without a time, kernels without collective metadata) becomes warnings.
RankTrace read_trace(const std::string& path);

// The collective an NCCL kernel name stands for ("ncclKernel_AllReduce_RING_LL_Sum_float(...)",
// "ncclDevKernel_SendRecv(...)"); nullopt for other kernels.
std::optional<Collective> collective_from_kernel_name(std::string_view name);
// Bytes of one element of a recorded dtype ("Float" 4, "BFloat16" 2, "Byte" 1, ...); 0 if unknown.
int dtype_bytes(std::string_view dtype);

}  // namespace trainsim::trace
