#pragma once
// The physical parameters of the kernel, collective and memory models beyond what a topology
// states. Each is declared once: its default in the structs below, its key, unit, range, meaning
// and source in tunable_fields(). Calibration files, device files, the `tunables` verb and the
// documentation table in docs/model.md are all derived from that one list.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainsim/spec/reader.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::spec {

// How long kernels take (docs/model.md "Kernels").
struct KernelTuning {
  double gemm_ceiling = 0.82;
  double fp8_gemm_ceiling = 0.70;
  double sustained_fraction = 0.84;
  // Share of a device's TDP that does not scale with its compute clock (HBM, I/O, leakage): under
  // a power limit P the clocks keep ((P - s·TDP) / (TDP - s·TDP))^(1/3) (model::clock_factor).
  double static_power_share = 0.40;
  std::int64_t tile_m = 128;
  std::int64_t tile_n = 256;
  double k_overhead = 64;
  std::int64_t split_k_min_slice = 256;
  // A partly filled last wave costs this share of a whole one (1: classical wave quantisation).
  double wave_quantization = 1.0;
  // GEMMs with a dimension that is not a multiple of 16 bytes run this share of the rate.
  double unaligned_efficiency = 1.0;
  // A square tile of tile_m (for small outputs) at this share of the large tile's rate; 0: never.
  double small_tile_efficiency = 0;
  // SMs a pipelined reduce-scatter of tp_overlap takes from the GEMM it overlaps.
  double tp_overlap_sms = 16;
  // How a kernel bound by both arithmetic and memory overlaps them: the p-norm of the two times.
  double roofline_sharpness = 1e3;
  // Attention kernels: each implementation's share of the bf16 peak at head dim 128 on long
  // sequences, forward and backward, and relative to it at head dims 64 and 256.
  double flash_fwd_efficiency = 0.55;
  double flash_bwd_efficiency = 0.40;
  double flash_hd64_factor = 1.0;
  double flash_hd256_factor = 1.0;
  double flash3_fwd_efficiency = 0.55;
  double flash3_bwd_efficiency = 0.40;
  double flash3_hd64_factor = 1.0;
  double flash3_hd256_factor = 1.0;
  double cudnn_fwd_efficiency = 0.55;
  double cudnn_bwd_efficiency = 0.40;
  double cudnn_hd64_factor = 1.0;
  double cudnn_hd256_factor = 1.0;
  double flash1_fwd_efficiency = 0.55;
  double flash1_bwd_efficiency = 0.40;
  double flash1_hd64_factor = 1.0;
  double flash1_hd256_factor = 1.0;
  double triton_fwd_efficiency = 0.55;
  double triton_bwd_efficiency = 0.40;
  double triton_hd64_factor = 1.0;
  double triton_hd256_factor = 1.0;
  // Short sequences leave tiles partly idle: efficiency × s / (s + overhead); a causal mask also
  // wastes part of the diagonal blocks: × causal_efficiency × s / (s + causal overhead).
  double attention_seq_overhead = 0;
  double attention_causal_efficiency = 1.0;
  double attention_causal_seq_overhead = 0;
  double hbm_efficiency = 0.83;
  Duration kernel_gap = nanoseconds(3000);
  friend bool operator==(const KernelTuning&, const KernelTuning&) = default;
};

// One NCCL protocol: the share of the link rate its payload gets, and its per-step latency
// relative to Simple.
struct ProtocolTuning {
  double bandwidth_factor = 1.0;
  double latency_factor = 1.0;
  // What one network step of a collective costs beyond its links' latency (at latency_factor): the
  // proxies on both hosts and the hand-over of the chunk. NCCL tuning.cc hwLat[NET][TREE] (LL 5.0,
  // LL128 8.5, Simple 14 us) less InfiniBand's 5 us link.
  Duration net_step_overhead = Duration::zero();
  friend bool operator==(const ProtocolTuning&, const ProtocolTuning&) = default;
};

// A collective measured on real hardware: time = latency + bytes / bandwidth for `op` on groups of
// `group_size`, `bytes` in nccl-tests' sense; fitted by `trainsim calibrate` over [min_bytes,
// max_bytes]. It replaces the algorithmic model for that operation and group size.
struct CollectiveFit {
  std::string op;
  int group_size = 0;
  Duration latency;
  Bandwidth bandwidth;
  std::int64_t samples = 0;
  Bytes min_bytes;
  Bytes max_bytes;
  // The fitted time of a message of `bytes`.
  Duration time(Bytes bytes) const { return latency + bytes / bandwidth; }
  // Whether the fit saw messages of this size (a fit without a recorded range covers any).
  bool covers(Bytes bytes) const { return max_bytes.count <= 0 || (bytes >= min_bytes && bytes <= max_bytes); }
  friend bool operator==(const CollectiveFit&, const CollectiveFit&) = default;
};

// How long collectives take beyond the links themselves (docs/model.md "Collectives").
struct CollectiveTuning {
  Duration launch = nanoseconds(41'000);
  int channels = 8;
  ProtocolTuning ll{.bandwidth_factor = 0.25, .latency_factor = 0.14, .net_step_overhead = nanoseconds(4'300)};
  ProtocolTuning ll128{.bandwidth_factor = 0.92, .latency_factor = 0.56, .net_step_overhead = nanoseconds(5'700)};
  ProtocolTuning simple{.bandwidth_factor = 1.0, .latency_factor = 1.0, .net_step_overhead = nanoseconds(9'000)};
  Bandwidth ll128_channel_cap = gigabytes_per_s(16.7);
  Bytes simple_chunk = kib(512);
  std::int64_t max_fill_chunks = 16;
  double in_switch_efficiency = 0.61;
  std::int64_t in_switch_channels = 1;
  // SMs one NCCL channel's thread block keeps from compute while a collective runs beside it
  // (0: communication never slows compute).
  double channel_sms = 1.0;
  Duration in_switch_latency = nanoseconds(23'000);
  // Per-step latency floor of a ring's hops inside a node once the ring spans nodes, under Simple
  // (the other protocols scale it by their latency factor).
  Duration proxy_step_latency = nanoseconds(3'000);
  std::vector<CollectiveFit> fits;
  friend bool operator==(const CollectiveTuning&, const CollectiveTuning&) = default;
};

// What the memory model assumes beyond the model itself (docs/model.md "Memory").
struct MemoryTuning {
  Bytes runtime_reserved = gib(1);
  // NCCL's buffers per channel of one connection to a peer (Simple, LL128 and LL FIFOs)
  Bytes nccl_channel_buffers = mib(12);
  // What the caching allocator holds beyond the live tensors at the peak, as a share of the
  // memory allocated and freed during the step (activations and communication buffers)
  double fragmentation = 0.08;
  friend bool operator==(const MemoryTuning&, const MemoryTuning&) = default;
};

// What the host, the CPU thread of a rank's training loop, spends handing work to the GPU
// (docs/model.md "Host overhead"): kernels and collectives are launched in program order, the GPU
// cannot run work the host has not launched yet, and the host runs ahead of the GPU otherwise.
struct HostTuning {
  Duration eager_launch = nanoseconds(10'000);
  Duration compiled_launch = nanoseconds(5'000);
  Duration graph_launch = nanoseconds(10'000);
  Duration collective_launch = nanoseconds(20'000);
  friend bool operator==(const HostTuning&, const HostTuning&) = default;
};

struct Tunables {
  KernelTuning kernels;
  CollectiveTuning collectives;
  MemoryTuning memory;
  HostTuning host;
  friend bool operator==(const Tunables&, const Tunables&) = default;
};

// How a tunable is written in a file: a share of a rate in (0, 1], a plain number, an integer, or a
// quantity with a unit.
enum class TunableKind { Share, Number, Integer, Duration, Bandwidth, Bytes };

struct TunableField {
  std::string_view section;  // the object of a calibration or device file: kernels, collectives, memory, host
  std::string_view key;
  TunableKind kind;
  NumberRange range;  // in SI units (integers: whole numbers in the range)
  std::string_view meaning;
  std::string_view source;
  double (*get)(const Tunables&);  // the value in SI units
  void (*set)(Tunables&, double);
  // Whether the field is one of the kernel efficiencies a device must have measured (reports warn
  // while none of them is calibrated on a device the defaults were not fitted to).
  bool kernel_efficiency = false;
};

// Every tunable, in the order files and reports list them.
std::span<const TunableField> tunable_fields();
// The field `section`/`key`, or null.
const TunableField* find_tunable(std::string_view section, std::string_view key);

// Values set by a calibration or device file, in tunable_fields() order; unset ones keep what the
// layer below gives.
struct TunableValues {
  std::vector<std::pair<const TunableField*, double>> values;
  void apply(Tunables& tunables) const;
  // Sets (or replaces) the value of `section`/`key`, keeping tunable_fields() order.
  void set(std::string_view section, std::string_view key, double value);
  bool sets(std::string_view section, std::string_view key) const;
  bool sets_kernel_efficiency() const;
  friend bool operator==(const TunableValues&, const TunableValues&) = default;
};

// Reads the tunables of one section of a file; unknown keys are reported by `r.finish()`.
TunableValues read_tunables(Reader& r, std::string_view section);
// Writes the set values of a section (integers and byte counts as integers, the rest as doubles).
nlohmann::ordered_json tunables_json(const TunableValues& values, std::string_view section);

// The unit a tunable's SI value is written in (for tables): "", "s", "B/s", "B".
std::string_view tunable_unit(TunableKind kind);

}  // namespace trainsim::spec
