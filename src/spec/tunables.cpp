#include "trainsim/spec/tunables.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "trainsim/util/error.hpp"

namespace trainsim::spec {
namespace {

double to_si(double v) {
  return v;
}
double to_si(std::int64_t v) {
  return static_cast<double>(v);
}
double to_si(int v) {
  return v;
}
double to_si(Duration v) {
  return v.seconds();
}
double to_si(Bandwidth v) {
  return v.bytes_per_s;
}
double to_si(Bytes v) {
  return v.as_double();
}

template <class T>
T from_si(double v);
template <>
double from_si<double>(double v) {
  return v;
}
template <>
std::int64_t from_si<std::int64_t>(double v) {
  return static_cast<std::int64_t>(std::llround(v));
}
template <>
int from_si<int>(double v) {
  return static_cast<int>(std::lround(v));
}
template <>
Duration from_si<Duration>(double v) {
  return Duration::from_seconds(v);
}
template <>
Bandwidth from_si<Bandwidth>(double v) {
  return Bandwidth{v};
}
template <>
Bytes from_si<Bytes>(double v) {
  return Bytes::from_double(v);
}

// A field of one of the tuning structs: Section is the Tunables member, Member the field in it.
template <auto Section, auto Member>
constexpr TunableField field(std::string_view section, std::string_view key, TunableKind kind, NumberRange range,
                             std::string_view meaning, std::string_view source, bool efficiency = false) {
  return TunableField{.section = section,
                      .key = key,
                      .kind = kind,
                      .range = range,
                      .meaning = meaning,
                      .source = source,
                      .get = [](const Tunables& t) { return to_si(t.*Section.*Member); },
                      .set =
                          [](Tunables& t, double v) {
                            auto& slot = t.*Section.*Member;
                            slot = from_si<std::decay_t<decltype(slot)>>(v);
                          },
                      .kernel_efficiency = efficiency};
}

// A field of a protocol's tuning inside the collective tuning (a factor unless told otherwise).
template <auto Protocol, auto Member>
constexpr TunableField protocol_field(std::string_view key, std::string_view meaning, std::string_view source,
                                      TunableKind kind = TunableKind::Number, NumberRange range = {0, 1e3, true}) {
  return TunableField{.section = "collectives",
                      .key = key,
                      .kind = kind,
                      .range = range,
                      .meaning = meaning,
                      .source = source,
                      .get = [](const Tunables& t) { return to_si(t.collectives.*Protocol.*Member); },
                      .set =
                          [](Tunables& t, double v) {
                            auto& slot = t.collectives.*Protocol.*Member;
                            slot = from_si<std::decay_t<decltype(slot)>>(v);
                          }};
}

constexpr NumberRange kShare{0, 1.0, true};
constexpr NumberRange kSmallDuration{0, 1.0};

using K = KernelTuning;
using C = CollectiveTuning;
using P = ProtocolTuning;
constexpr auto kK = &Tunables::kernels;
constexpr auto kC = &Tunables::collectives;
constexpr auto kM = &Tunables::memory;
constexpr auto kH = &Tunables::host;

constexpr std::array kFields{
    field<kK, &K::gemm_ceiling>(
        "kernels", "gemm_ceiling", TunableKind::Share, kShare,
        "share of peak a large GEMM reaches once tiles fill every SM",
        "reproduces the 253.7 TFLOP/s of an 8192³ bf16 GEMM on A100 (cuBLASLt) with the tile and K terms", true),
    field<kK, &K::fp8_gemm_ceiling>(
        "kernels", "fp8_gemm_ceiling", TunableKind::Share, kShare, "the same for FP8 GEMMs (against the FP8 peak)",
        "fitted per device to FP8 GEMM microbenchmarks (tools: trainsim calibrate --microbenchmarks)", true),
    field<kK, &K::sustained_fraction>(
        "kernels", "sustained_fraction", TunableKind::Share, kShare,
        "share of the microbenchmark rate compute-bound kernels sustain inside a training step (clocks under "
        "sustained power draw, SMs taken by overlapped NCCL kernels)",
        "fitted once across every A100 step-time row (Megatron-LM 2020 and 2021, Korthikanti 2022, TorchTitan "
        "A100): the value with the least mean absolute error over them, the device's kernels held at their "
        "microbenchmark fit",
        true),
    field<kK, &K::static_power_share>(
        "kernels", "static_power_share", TunableKind::Share, {0, 0.45},
        "share of the TDP that does not scale with the compute clock (HBM, I/O, leakage): a power limit P "
        "keeps the clocks at ((P - s TDP) / (TDP - s TDP))^(1/3) of the peak's (at most 0.45: a limit is at "
        "least half the TDP)",
        "the clocks hipBLASLt's BF16 and FP8 GEMMs sustained on the MI300X at 750 W and on the MI325X (the "
        "same die) at 1000 W, 1207 / 1447 and 1230 / 1464 MHz (ROCm blogs 'Measuring Max-Achievable FLOPs - "
        "Part 2'; tests/reference/modern/devices.json): 0.404 and 0.386"),
    field<kK, &K::tile_m>("kernels", "tile_m", TunableKind::Integer, {1, 4096},
                          "rows of one thread block's output tile (either orientation is used)",
                          "cuBLAS's usual 128×256 bf16 tile on A100 and H100"),
    field<kK, &K::tile_n>("kernels", "tile_n", TunableKind::Integer, {1, 4096},
                          "columns of one thread block's output tile", "cuBLAS's usual 128×256 bf16 tile"),
    field<kK, &K::k_overhead>("kernels", "k_overhead", TunableKind::Number, {0, 1e6},
                              "prologue and epilogue of the K loop, in K elements: efficiency k / (k + k0)",
                              "fitted with gemm_ceiling to the A100 GEMM sweep"),
    field<kK, &K::split_k_min_slice>("kernels", "split_k_min_slice", TunableKind::Integer, {1, 1 << 20},
                                     "shallowest K slice cuBLAS's split-K cuts a GEMM into when its output "
                                     "tiles cannot fill the SMs",
                                     "the splitKreduce kernels of the reference traces"),
    field<kK, &K::wave_quantization>("kernels", "wave_quantization", TunableKind::Number, {0, 1},
                                     "what a partly filled last wave of thread blocks costs, as a share of a whole "
                                     "wave (1: classical wave quantisation; persistent stream-K kernels share it)",
                                     "fitted to the device's GEMM microbenchmarks"),
    field<kK, &K::unaligned_efficiency>("kernels", "unaligned_efficiency", TunableKind::Share, kShare,
                                        "rate of a GEMM with a dimension that is not a multiple of 16 bytes "
                                        "(no aligned tensor-core loads)",
                                        "fitted to the device's GEMM microbenchmarks (1024×2145×1024)"),
    field<kK, &K::small_tile_efficiency>("kernels", "small_tile_efficiency", TunableKind::Number, {0, 1},
                                         "rate of a square tile_m × tile_m tile (picked for small outputs) "
                                         "relative to the large tile; 0: never picked",
                                         "fitted to the device's GEMM microbenchmarks"),
    field<kK, &K::tp_overlap_sms>("kernels", "tp_overlap_sms", TunableKind::Integer, {0, 256},
                                  "SMs a reduce-scatter pipelined with its GEMM takes from it (tp_overlap); "
                                  "the all-gathers' ring exchange runs on copy engines",
                                  "NeMo's userbuffers configs (tp_overlap_configs/userbuffers.py): pipelined "
                                  "reduce-scatter num_sm 16-24, ring-exchange all-gather num_sm 1"),
    field<kK, &K::roofline_sharpness>("kernels", "roofline_sharpness", TunableKind::Number, {1, 1e3},
                                      "how a kernel bound by both arithmetic and memory overlaps them: the "
                                      "p-norm of the two times (1000: the roofline's max)",
                                      "fitted to the device's GEMM microbenchmarks"),
    field<kK, &K::flash_fwd_efficiency>("kernels", "flash_fwd_efficiency", TunableKind::Share, kShare,
                                        "FlashAttention-2's share of peak, forward, head dim 128",
                                        "FlashAttention-2 (Dao 2023) on A100: 50–73% forward at head dim 128", true),
    field<kK, &K::flash_bwd_efficiency>("kernels", "flash_bwd_efficiency", TunableKind::Share, kShare,
                                        "FlashAttention-2's share of peak, backward (2.5× the forward's FLOPs)",
                                        "FlashAttention-2 on A100: about two thirds of the forward rate", true),
    field<kK, &K::flash_hd64_factor>("kernels", "flash_hd64_factor", TunableKind::Number, {0, 4, true},
                                     "FlashAttention-2 at head dim 64 relative to 128 (interpolated in log2)",
                                     "device microbenchmarks (docs/model.md \"Devices\")"),
    field<kK, &K::flash_hd256_factor>("kernels", "flash_hd256_factor", TunableKind::Number, {0, 4, true},
                                      "FlashAttention-2 at head dim 256 relative to 128", "device microbenchmarks"),
    field<kK, &K::flash3_fwd_efficiency>("kernels", "flash3_fwd_efficiency", TunableKind::Share, kShare,
                                         "FlashAttention-3's share of peak, forward, head dim 128 (Hopper)",
                                         "device microbenchmarks (FlashAttention-3 README charts)", true),
    field<kK, &K::flash3_bwd_efficiency>("kernels", "flash3_bwd_efficiency", TunableKind::Share, kShare,
                                         "FlashAttention-3's share of peak, backward",
                                         "the forward times FlashAttention-2's backward/forward ratio on the device "
                                         "(no published backward microbenchmark)",
                                         true),
    field<kK, &K::flash3_hd64_factor>("kernels", "flash3_hd64_factor", TunableKind::Number, {0, 4, true},
                                      "FlashAttention-3 at head dim 64 relative to 128", "device microbenchmarks"),
    field<kK, &K::flash3_hd256_factor>("kernels", "flash3_hd256_factor", TunableKind::Number, {0, 4, true},
                                       "FlashAttention-3 at head dim 256 relative to 128", "device microbenchmarks"),
    field<kK, &K::cudnn_fwd_efficiency>("kernels", "cudnn_fwd_efficiency", TunableKind::Share, kShare,
                                        "cuDNN fused attention's (Transformer Engine's default) share of peak, "
                                        "forward, head dim 128",
                                        "device microbenchmarks (FlashAttention-3 README charts)", true),
    field<kK, &K::cudnn_bwd_efficiency>("kernels", "cudnn_bwd_efficiency", TunableKind::Share, kShare,
                                        "cuDNN fused attention's share of peak, backward",
                                        "the forward times FlashAttention-2's backward/forward ratio on the device",
                                        true),
    field<kK, &K::cudnn_hd64_factor>("kernels", "cudnn_hd64_factor", TunableKind::Number, {0, 4, true},
                                     "cuDNN attention at head dim 64 relative to 128", "device microbenchmarks"),
    field<kK, &K::flash1_fwd_efficiency>(
        "kernels", "flash1_fwd_efficiency", TunableKind::Share, kShare,
        "forward rate of FlashAttention v1, share of the bf16 peak at head dim 128 on long sequences",
        "device microbenchmarks (FlashAttention-2 README's A100 and H100 figures, "
        "FlashAttention bars)",
        true),
    field<kK, &K::flash1_bwd_efficiency>("kernels", "flash1_bwd_efficiency", TunableKind::Share, kShare,
                                         "backward rate of FlashAttention v1, share of the bf16 peak",
                                         "device microbenchmarks", true),
    field<kK, &K::flash1_hd64_factor>("kernels", "flash1_hd64_factor", TunableKind::Number, {0, 4, true},
                                      "FlashAttention v1's rate at head dim 64 relative to 128",
                                      "device microbenchmarks"),
    field<kK, &K::flash1_hd256_factor>("kernels", "flash1_hd256_factor", TunableKind::Number, {0, 4, true},
                                       "FlashAttention v1's rate at head dim 256 relative to 128",
                                       "device microbenchmarks (none: as at 128)"),
    field<kK, &K::triton_fwd_efficiency>(
        "kernels", "triton_fwd_efficiency", TunableKind::Share, kShare,
        "forward rate of FlashAttention's Triton port as llm-foundry ran it (attention=triton: "
        "flash_attn_triton under the pre-MLIR Triton compiler), share of the bf16 peak at head dim 128",
        "fitted to llm-foundry's step times (tools/fit-triton; no microbenchmark of that compiler's kernel "
        "names its device)",
        true),
    field<kK, &K::triton_bwd_efficiency>("kernels", "triton_bwd_efficiency", TunableKind::Share, kShare,
                                         "backward rate of the Triton port, share of the bf16 peak",
                                         "the forward times FlashAttention v1's backward/forward ratio on the device",
                                         true),
    field<kK, &K::triton_hd64_factor>("kernels", "triton_hd64_factor", TunableKind::Number, {0, 4, true},
                                      "the Triton port's rate at head dim 64 relative to 128",
                                      "fitted with the forward rate (tools/fit-triton)"),
    field<kK, &K::triton_hd256_factor>("kernels", "triton_hd256_factor", TunableKind::Number, {0, 4, true},
                                       "the Triton port's rate at head dim 256 relative to 128",
                                       "none measured: as at 128"),
    field<kK, &K::cudnn_hd256_factor>("kernels", "cudnn_hd256_factor", TunableKind::Number, {0, 4, true},
                                      "cuDNN attention at head dim 256 relative to 128", "device microbenchmarks"),
    field<kK, &K::attention_seq_overhead>("kernels", "attention_seq_overhead", TunableKind::Number, {0, 1e6},
                                          "tokens of sequence an attention kernel loses to partly idle tiles: "
                                          "efficiency × s / (s + this)",
                                          "device microbenchmarks over sequence lengths"),
    field<kK, &K::attention_causal_efficiency>("kernels", "attention_causal_efficiency", TunableKind::Share, kShare,
                                               "efficiency of causal attention relative to full, on long sequences "
                                               "(masking, diagonal blocks)",
                                               "device microbenchmarks, causal against non-causal"),
    field<kK, &K::attention_causal_seq_overhead>("kernels", "attention_causal_seq_overhead", TunableKind::Number,
                                                 {0, 1e6}, "the same tokens for causal attention",
                                                 "device microbenchmarks, causal"),
    field<kK, &K::hbm_efficiency>("kernels", "hbm_efficiency", TunableKind::Share, kShare,
                                  "achievable share of the HBM datasheet bandwidth",
                                  "A100 STREAM triad: 1.70 of 2.04 TB/s", true),
    field<kK, &K::kernel_gap>("kernels", "kernel_gap", TunableKind::Duration, kSmallDuration,
                              "gap between consecutive kernels on a stream (launch latency, tails)",
                              "assumed; matters for small models"),
    field<kC, &C::launch>("collectives", "launch", TunableKind::Duration, kSmallDuration,
                          "fixed cost of one collective call: kernel launch, synchronisation, proxy start",
                          "the flat 42–45 µs of the 8×A100 nccl-tests sweep below 256 KiB"),
    field<kC, &C::channels>("collectives", "channels", TunableKind::Integer, {1, 64},
                            "parallel rings or trees NCCL runs, each moving 1/channels of the data",
                            "NCCL's usual count on DGX systems"),
    field<kC, &C::ll128_channel_cap>("collectives", "ll128_channel_cap", TunableKind::Bandwidth, {0, 1e13, true},
                                     "LL128 bus bandwidth per channel, limited by the channel's SMs",
                                     "NCCL tuning.cc ll128MaxBwPerCh (A100)"),
    field<kC, &C::simple_chunk>("collectives", "simple_chunk", TunableKind::Bytes, {1, 1e9},
                                "chunk the Simple protocol moves per pipeline step",
                                "NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8"),
    field<kC, &C::max_fill_chunks>("collectives", "max_fill_chunks", TunableKind::Integer, {1, 1024},
                                   "chunk-times a ring's fill and drain cost at most (send and receive slots)",
                                   "2 × NCCL_STEPS"),
    field<kC, &C::in_switch_efficiency>("collectives", "in_switch_efficiency", TunableKind::Share, kShare,
                                        "usable share of the NVLink line rate under in-switch reduction (NVLS)",
                                        "480 GB/s all-reduce busbw on 8 H100s (nccl-tests issue 212)"),
    field<kC, &C::in_switch_channels>("collectives", "in_switch_channels", TunableKind::Integer, {1, 64},
                                      "channels an in-switch reduction streams its chunks on (1: no pipeline "
                                      "fill modelled)",
                                      "NCCL src/transport/nvls.cc: NVLS_NCHANNELS_SM90 = 16"),
    field<kC, &C::channel_sms>("collectives", "channel_sms", TunableKind::Number, {0, 8},
                               "SMs each channel of a collective holds while it runs: compute overlapping a "
                               "data-, context-, expert- or pipeline-parallel collective runs on the other SMs "
                               "(0: no contention)",
                               "NCCL launches one thread block per channel (its kernels' grid is the channel count)"),
    field<kC, &C::proxy_step_latency>("collectives", "proxy_step_latency", TunableKind::Duration, kSmallDuration,
                                      "latency floor of every step inside a node of a ring that spans nodes (Simple; "
                                      "LL and LL128 scale it by their latency factors): each step waits for the "
                                      "network proxy's progress however fast the NVLink hop",
                                      "NCCL src/graph/tuning.cc: ring latency adds max(intraLat, netOverhead) per "
                                      "intra-node step when nNodes > 1; netOverhead is 1 µs on Intel hosts, ×3 for "
                                      "Simple (v2.18.5-1 to v2.30.7-1; tests/reference/collected/fidelity)"),
    field<kC, &C::in_switch_latency>("collectives", "in_switch_latency", TunableKind::Duration, kSmallDuration,
                                     "extra latency of in-switch reduction: multimem set-up and switch reduction",
                                     "NCCL tuning.cc baseLat for NVLS"),
    protocol_field<&C::ll, &P::bandwidth_factor>("ll_bandwidth_factor",
                                                 "share of the link rate LL's payload gets (4 data bytes in 8-byte "
                                                 "lines, and NCCL's own 1/4 for all-reduce)",
                                                 "NCCL tuning.cc"),
    protocol_field<&C::ll, &P::latency_factor>("ll_latency_factor", "LL's per-step latency relative to Simple",
                                               "NCCL tuning.cc hwLat ratios for NVLink rings (0.47 of 3.4 µs)"),
    protocol_field<&C::ll128, &P::bandwidth_factor>(
        "ll128_bandwidth_factor", "share of the link rate LL128's payload gets (120 of 128 bytes)", "NCCL tuning.cc"),
    protocol_field<&C::ll128, &P::latency_factor>("ll128_latency_factor", "LL128's per-step latency relative to Simple",
                                                  "NCCL tuning.cc hwLat ratios (1.9 of 3.4 µs)"),
    protocol_field<&C::simple, &P::bandwidth_factor>(
        "simple_bandwidth_factor", "share of the link rate Simple's payload gets", "NCCL: Simple moves payload only"),
    protocol_field<&C::simple, &P::latency_factor>("simple_latency_factor", "Simple's per-step latency factor",
                                                   "the reference of the other two"),
    protocol_field<&C::ll, &P::net_step_overhead>(
        "ll_net_step_overhead",
        "what one network step of a collective costs under LL beyond its links' latency (at LL's latency factor): "
        "both hosts' network proxies and the hand-over of the chunk",
        "NCCL src/graph/tuning.cc hwLat[NET][TREE][LL] = 5.0 us, less InfiniBand's 5 us link at 0.14",
        TunableKind::Duration, kSmallDuration),
    protocol_field<&C::ll128, &P::net_step_overhead>(
        "ll128_net_step_overhead", "the same under LL128",
        "NCCL src/graph/tuning.cc hwLat[NET][TREE][LL128] = 8.5 us, less InfiniBand's 5 us link at 0.56",
        TunableKind::Duration, kSmallDuration),
    protocol_field<&C::simple, &P::net_step_overhead>(
        "simple_net_step_overhead", "the same under Simple",
        "NCCL src/graph/tuning.cc hwLat[NET][TREE][SIMPLE] = 14 us, less InfiniBand's 5 us link", TunableKind::Duration,
        kSmallDuration),
    field<kH, &HostTuning::eager_launch>("host", "eager_launch", TunableKind::Duration, kSmallDuration,
                                         "host time to launch one kernel through PyTorch's dispatcher from Python "
                                         "(an eager op, or a fused module's kernel)",
                                         "HOST_EAGER_SOURCE"),
    field<kH, &HostTuning::compiled_launch>("host", "compiled_launch", TunableKind::Duration, kSmallDuration,
                                            "host time to launch one kernel from torch.compile's generated code",
                                            "HOST_COMPILED_SOURCE"),
    field<kH, &HostTuning::graph_launch>("host", "graph_launch", TunableKind::Duration, kSmallDuration,
                                         "host time to replay one captured CUDA graph (a layer's pass)",
                                         "HOST_GRAPH_SOURCE"),
    field<kH, &HostTuning::collective_launch>("host", "collective_launch", TunableKind::Duration, kSmallDuration,
                                              "host time of one collective call through ProcessGroupNCCL",
                                              "HOST_COLLECTIVE_SOURCE"),
    field<kM, &MemoryTuning::runtime_reserved>("memory", "runtime_reserved", TunableKind::Bytes, {0, 1e13},
                                               "resident before the first step: CUDA context and cuBLAS workspaces",
                                               "assumed: the CUDA context takes about 0.5 GiB on Hopper, PyTorch's "
                                               "cuBLAS workspaces 32 MiB per stream on Hopper"),
    field<kM, &MemoryTuning::nccl_channel_buffers>(
        "memory", "nccl_channel_buffers", TunableKind::Bytes, {0, 1e10},
        "NCCL buffers per channel of each connection a communicator keeps to a peer (Simple, LL128 and LL FIFOs)",
        "NCCL_DEBUG_SUBSYS=ALLOC on 8×H100 allocates 10 MiB and 2 MiB per channel and peer (NVIDIA/nccl#1685)"),
    field<kM, &MemoryTuning::fragmentation>(
        "memory", "fragmentation", TunableKind::Share, {0, 1},
        "what PyTorch's caching allocator reserves beyond the live tensors at the peak, as a share of the "
        "memory allocated and freed during the step",
        "fitted: no mean bias over TorchTitan's fourteen reserved-memory peaks with the loss's cached block counted "
        "(docs/model.md \"What a GPU holds beyond the model\")"),
};

}  // namespace

std::span<const TunableField> tunable_fields() {
  return kFields;
}

const TunableField* find_tunable(std::string_view section, std::string_view key) {
  for (const auto& f : kFields)
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

void TunableValues::apply(Tunables& tunables) const {
  for (const auto& [f, v] : values) f->set(tunables, v);
}

void TunableValues::set(std::string_view section, std::string_view key, double value) {
  const auto* f = find_tunable(section, key);
  SIM_ASSERT(f != nullptr, "no tunable {}.{}", section, key);
  for (auto& [field, v] : values)
    if (field == f) {
      v = value;
      return;
    }
  values.emplace_back(f, value);
  std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

bool TunableValues::sets(std::string_view section, std::string_view key) const {
  return std::any_of(values.begin(), values.end(),
                     [&](const auto& v) { return v.first->section == section && v.first->key == key; });
}

bool TunableValues::sets_kernel_efficiency() const {
  return std::any_of(values.begin(), values.end(), [](const auto& v) { return v.first->kernel_efficiency; });
}

TunableValues read_tunables(Reader& r, std::string_view section) {
  TunableValues out;
  for (const auto& f : kFields) {
    if (f.section != section || !r.has(f.key)) continue;
    double v = 0;
    switch (f.kind) {
      case TunableKind::Share:
      case TunableKind::Number:
        v = r.number(f.key, f.range);
        break;
      case TunableKind::Integer:
        v = static_cast<double>(
            r.integer(f.key, {static_cast<std::int64_t>(f.range.min), static_cast<std::int64_t>(f.range.max)}));
        break;
      case TunableKind::Duration:
        v = r.duration(f.key, f.range).seconds();
        break;
      case TunableKind::Bandwidth:
        v = r.bandwidth(f.key, f.range).bytes_per_s;
        break;
      case TunableKind::Bytes:
        v = r.bytes(f.key, f.range).as_double();
        break;
    }
    out.values.emplace_back(&f, v);
  }
  return out;
}

nlohmann::ordered_json tunables_json(const TunableValues& values, std::string_view section) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [f, v] : values.values) {
    if (f->section != section) continue;
    if (f->kind == TunableKind::Integer || f->kind == TunableKind::Bytes)
      out[std::string(f->key)] = static_cast<std::int64_t>(std::llround(v));
    else
      out[std::string(f->key)] = v;
  }
  return out;
}

std::string_view tunable_unit(TunableKind kind) {
  switch (kind) {
    case TunableKind::Duration:
      return "s";
    case TunableKind::Bandwidth:
      return "B/s";
    case TunableKind::Bytes:
      return "B";
    case TunableKind::Share:
    case TunableKind::Number:
    case TunableKind::Integer:
      return "";
  }
  return "";
}

}  // namespace trainsim::spec
