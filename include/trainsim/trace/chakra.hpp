#pragma once
// MLCommons Chakra execution traces (ET) read and replayed (docs/traces.md "Chakra"): a folder of
// per-rank files (<prefix>.<rank>.et: length-delimited protobuf, the global metadata then one Node
// per operation, schema src/chakra/et_def.proto) with an optional comm_group.json naming each
// process group's ranks, as ASTRA-sim reads them.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainsim/spec/device_spec.hpp"
#include "trainsim/spec/tunables.hpp"
#include "trainsim/trace/analysis.hpp"

namespace trainsim::trace {

struct ChakraNode {
  // Device kernels, host (CPU) operators, collectives, point-to-point halves, and the node types
  // trainsim only delays by their duration (memory, storage, metadata, batch, checkpoint).
  enum class Kind { Compute, Host, Collective, Send, Recv, Other };
  std::uint64_t id = 0;
  std::string name;
  Kind kind = Kind::Compute;
  std::vector<std::uint64_t> deps;       // data_deps on nodes of the file: what orders execution
  std::vector<std::uint64_t> ctrl_deps;  // kept, but ordering nothing (as in Chakra's feeder)
  std::int64_t start_us = 0;             // as recorded: often microseconds since the epoch, too far for picoseconds
  std::int64_t duration_ps = 0;
  std::int64_t stream = 0;  // the `tid` attribute: a CUDA stream or a CPU thread
  std::string op;           // a collective: all_reduce, all_gather, reduce_scatter, ... ("" if not costable)
  std::int64_t bytes = -1;  // comm_size; -1: not given
  std::string group;        // pg_name; "" for every rank
  int peer = -1;            // a send's destination, a receive's source
  std::int64_t tag = 0;
  double flops = 0;         // num_ops
  double tensor_bytes = 0;  // tensor_size: the bytes a compute node moves
};

struct ChakraTrace {
  std::string path;
  int rank = -1;
  std::vector<ChakraNode> nodes;   // in file order
  std::int64_t missing_deps = 0;   // data or control dependencies on nodes the file does not hold (dropped)
  std::int64_t missing_nodes = 0;  // the distinct nodes they name
};

// Reads one file; `rank` is the file name's (<prefix>.<rank>.et). Corrupt or truncated protobuf,
// unknown node types, duplicate ids, a collective without its type, a send or receive without its
// peer and dependency cycles are SpecErrors naming the file and the node.
ChakraTrace read_chakra(const std::string& path, int rank);

struct ChakraJob {
  std::string dir;
  std::vector<ChakraTrace> ranks;                  // by rank
  std::map<std::string, std::vector<int>> groups;  // comm_group.json; empty without one
  std::vector<std::string> warnings;
};

// Every <prefix>.<rank>.et of a folder and its comm_group.json.
ChakraJob read_chakra_dir(const std::string& dir);

struct ChakraRankFigures {
  std::string path;
  int rank = -1;
  std::int64_t nodes = 0;
  std::int64_t compute = 0;  // device kernels
  std::int64_t host = 0;
  std::int64_t collectives = 0;
  std::int64_t p2p = 0;
  std::int64_t missing_deps = 0;
  double recorded_s = 0;  // last end − first start of the recorded times (0 without them)
  double replayed_s = 0;  // the same in the replay
};

struct ChakraReport {
  std::string dir;
  std::vector<ChakraRankFigures> ranks;
  double step_time_s = 0;  // the replay's last end over every rank
  std::int64_t collectives = 0;
  std::int64_t costed = 0;          // communication costed by the collective model (with a topology)
  std::int64_t costed_compute = 0;  // device kernels costed on a device from num_ops and tensor_size
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

// Replays the job on the engine: each node on its rank's stream for its kind and `tid` (in a
// dependency order that follows the recorded start times), after its dependencies; the k-th
// collective of a group on each of its ranks is one collective across them, a send and the
// matching receive one transfer. Device kernels run compute_scale times faster; communication is
// costed by options.costs (ranks are its cluster's devices) or runs network_scale times faster.
// `compute`: device kernels with num_ops or tensor_size costed on this device instead (a roofline:
// FLOPs at gemm_ceiling × sustained_fraction of its bf16 peak, bytes at hbm_efficiency of its HBM
// bandwidth, joined as the kernel model joins them); null: their recorded time.
struct ComputeCosting {
  const spec::DeviceSpec* device = nullptr;
  spec::KernelTuning kernels;
};
ChakraReport replay_chakra(const ChakraJob& job, const ReplayOptions& options, const ComputeCosting& compute = {});

}  // namespace trainsim::trace
