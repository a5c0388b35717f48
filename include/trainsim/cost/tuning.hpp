#pragma once
// The physical parameters of the collective model beyond the links themselves. Defaults come from
// NCCL's design (protocol payload shares, buffer sizes) and from fitting the 8×A100 nccl-tests
// sweep in reference/nccl_allreduce.json (launch cost); a calibration file overrides them.
#include <limits>
#include <string>
#include <vector>

#include "trainsim/util/units.hpp"

namespace trainsim::cost {

enum class Protocol { LL, LL128, Simple };
std::string_view protocol_name(Protocol p);

struct ProtocolTuning {
  // Share of the link rate the protocol's payload gets. LL: 8-byte lines of 4 data + 4 flag bytes
  // and NCCL's own 1/4 for all-reduce; LL128: 120 of 128 bytes (NCCL tuning.cc: 0.92); Simple: all.
  double bandwidth_factor = 1.0;
  // Per-step latency relative to Simple: NCCL's hwLat ratios for NVLink rings (0.47, 1.9, 3.4 µs).
  double latency_factor = 1.0;
};

// A collective measured on real hardware (`trainsim calibrate`): on groups of `group_size`, `op`
// (a collective name) takes latency + bytes / bandwidth, replacing the algorithmic model.
struct FittedCollective {
  std::string op;
  int group_size = 0;
  Duration latency;
  Bandwidth bandwidth;
  // the message sizes the fit saw; outside them it extrapolates, and reports say so
  std::int64_t min_bytes = 0;
  std::int64_t max_bytes = std::numeric_limits<std::int64_t>::max();
};

struct CollectiveTuning {
  // Fixed cost of one collective call: kernel launch, synchronisation, proxy start. Fitted to the
  // flat 42–45 µs of the A100 sweep for 1 KiB–256 KiB.
  Duration launch = nanoseconds(41'000);
  // Parallel rings/trees NCCL runs; each moves 1/channels of the data.
  int channels = 8;
  ProtocolTuning ll{.bandwidth_factor = 0.25, .latency_factor = 0.14};
  ProtocolTuning ll128{.bandwidth_factor = 0.92, .latency_factor = 0.56};
  ProtocolTuning simple{.bandwidth_factor = 1.0, .latency_factor = 1.0};
  // LL128 is limited by the SMs of a channel: 16.7 GB/s of bus bandwidth per channel for
  // all-reduce (NCCL tuning.cc, ll128MaxBwPerCh).
  Bandwidth ll128_channel_cap = gigabytes_per_s(16.7);
  // Simple moves chunks of NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8; a ring fills and drains its
  // pipeline one chunk per step.
  Bytes simple_chunk = kib(512);
  // Chunks in flight along a ring are bounded by the send and receive slots (2 × NCCL_STEPS), so
  // the fill and drain cost at most this many chunk-times however long the ring is.
  int max_fill_chunks = 16;
  // In-switch reduction (NVLS): usable share of the NVLink line rate; 480 GB/s all-reduce busbw on
  // 8 H100s = 1.75 × 274 GB/s algorithm bandwidth of 450 (nccl-tests issue 212).
  double in_switch_efficiency = 0.61;
  // ... and its extra latency: multimem set-up and switch reduction (NCCL tuning.cc, baseLat for NVLS).
  Duration in_switch_latency = nanoseconds(23'000);
  std::vector<FittedCollective> fits;

  const ProtocolTuning& protocol(Protocol p) const {
    return p == Protocol::LL ? ll : p == Protocol::LL128 ? ll128 : simple;
  }
};

}  // namespace trainsim::cost
