#pragma once
// Device microbenchmarks (GEMM sweeps, attention kernels, HBM STREAM, nccl-tests collectives) and
// the kernel and collective parameters fitted to them (docs/model.md "Devices"): the device
// catalogue's fitted values come from here, never from end-to-end step times.
//
// The file format is tests/reference/modern/devices.json's: {"rows": [{"kind": ..., "gpu": ...}]}
// with kinds gemm (m, n, k, dtype, tflops), gemm_mamf (best_shape_MxNxK, dtype, tflops), attention
// (impl, pass, head_dim, seq_len, batch, hidden, causal, tflops), hbm_stream (op, tb_per_s) and
// nccl_all_reduce, nccl_all_gather and nccl_reduce_scatter (gpus, nodes, algo,
// message_bytes_derived, busbw_gb_s).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/cost/cost_model.hpp"
#include "trainsim/model/kernel_model.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/cluster_spec.hpp"

namespace trainsim::trace {

struct GemmBench {
  std::size_t row = 0;  // its index in the file's rows
  std::int64_t m = 0, n = 0, k = 0;
  spec::Dtype dtype = spec::Dtype::Bf16;
  double tflops = 0;
};

struct AttentionBench {
  std::size_t row = 0;
  spec::AttentionImpl impl = spec::AttentionImpl::Flash;
  bool forward_only = true;  // forward, or forward + backward together
  bool causal = false;
  std::int64_t head_dim = 0, seq_len = 0, batch = 0, heads = 0;
  double tflops = 0;  // FlashAttention's benchmark convention: 4·b·s²·h·d forward (halved when causal), 2.5× backward
};

// One nccl-tests size: its bus bandwidth (nccl-tests' convention for the operation).
struct CollectiveBench {
  std::size_t row = 0;
  cost::CollectiveKind op = cost::CollectiveKind::AllReduce;
  int gpus = 0;
  std::string algorithm = "auto";  // "nvls" when the run forced NCCL_ALGO=NVLS
  std::int64_t bytes = 0;
  double busbw_Bps = 0;
};

struct Microbenchmarks {
  std::string path;
  std::string device;  // what the rows were selected by
  std::vector<GemmBench> gemms;
  std::vector<AttentionBench> attention;
  std::optional<double> triad_Bps;  // STREAM triad
  std::size_t triad_row = 0;
  std::vector<CollectiveBench> collectives;
  std::vector<std::string> skipped;  // rows of the device that no model covers, with the reason
};

// The rows whose "gpu" contains one of the '|'-separated texts of `device_match` (case-sensitive).
// A file that is not of this shape, no row of the device, or a row of a kind the fit reads with a
// field missing, of the wrong type or not positive, is a SpecError naming the file and the JSON
// pointer of every such field. Rows no model covers are listed in `skipped`.
Microbenchmarks read_microbenchmarks(const std::string& path, const std::string& device_match);

// Refuses (SpecError naming the file and the row's field) a measurement the cluster's device could
// not have made: a rate above the device's dense peak for its dtype (beyond the boost-clock margin),
// a STREAM bandwidth above the HBM's, an all-reduce over more GPUs than the node has or faster
// than its fabric can carry (twice the per-device bandwidth with in-switch reduction).
void check_physical(const Microbenchmarks& bench, const spec::ClusterSpec& cluster);

// How far a measured rate may exceed a datasheet's dense peak: the boost clock above the one the
// peak is quoted at (H100 SXM: 1,980 against 1,830 MHz, 8%). check_physical and calibrate use it.
inline constexpr double kBoostClockMargin = 1.1;

// The time the kernel model gives a benchmark row on `ctx`'s device (at the microbenchmark's
// clocks, launches back to back: neither sustained_fraction nor kernel_gap applies), as TFLOP/s in
// the row's convention.
double modelled_tflops(const GemmBench& g, model::KernelContext ctx);
double modelled_tflops(const AttentionBench& a, model::KernelContext ctx);

struct BenchResidual {
  std::string what;
  double measured = 0;
  double modelled = 0;
  double error() const { return modelled / measured - 1; }
};

struct MicrobenchFit {
  spec::CalibrationSpec calibration;  // kernels (and collectives when all-reduce rows were given)
  std::vector<BenchResidual> residuals;
  std::vector<std::string> notes;
};

// A cost model of the device's node under a collective tuning (the fit tries many).
using CostModelFactory = std::function<std::unique_ptr<cost::CostModel>(const cost::CollectiveTuning&)>;

// Fits the kernel parameters of `device` (peaks, SMs, memory bandwidth from the spec) to the
// microbenchmarks, starting from `start`: HBM efficiency from the STREAM triad; GEMM ceilings per
// dtype, the K overhead and the per-kernel gap by least squares on log ratios; attention
// efficiencies per implementation, head-dim factors and sequence terms likewise. With
// `node_costs` (one node of the device), also the collective launch cost and the in-switch
// reduction's latency and efficiency from the all-reduce sweep.
MicrobenchFit fit_microbenchmarks(const Microbenchmarks& bench, const spec::DeviceSpec& device,
                                  const spec::Tunables& start, const CostModelFactory& node_costs = {});

// The busbw the collective model gives an all-reduce row.
double modelled_busbw(const CollectiveBench& a, cost::CostModel& costs);

}  // namespace trainsim::trace
