#pragma once
// A calibration file (INTERFACE.md "Calibration"): fitted values that override the defaults of the
// kernel, collective and memory models. Every field is optional; a missing one keeps its default.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/util/units.hpp"

namespace trainsim::spec {

struct KernelCalibration {
  std::optional<double> gemm_ceiling;
  std::optional<double> sustained_fraction;
  std::optional<std::int64_t> tile_m;
  std::optional<std::int64_t> tile_n;
  std::optional<double> k_overhead;
  std::optional<double> flash_fwd_efficiency;
  std::optional<double> flash_bwd_efficiency;
  std::optional<double> hbm_efficiency;
  std::optional<Duration> kernel_gap;
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
  friend bool operator==(const CollectiveFit&, const CollectiveFit&) = default;
};

struct CollectiveCalibration {
  std::optional<Duration> launch;
  std::optional<int> channels;
  std::optional<Bandwidth> ll128_channel_cap;
  std::optional<Bytes> simple_chunk;
  std::optional<double> in_switch_efficiency;
  std::optional<Duration> in_switch_latency;
  std::vector<CollectiveFit> fits;
};

struct CalibrationSpec {
  KernelCalibration kernels;
  CollectiveCalibration collectives;
  std::optional<Bytes> runtime_reserved;
};

CalibrationSpec read_calibration_spec(const nlohmann::json& json, const std::string& source);
CalibrationSpec load_calibration_spec(const std::string& path);
// The file `read_calibration_spec` reads back: only the values that are set, `extra` (traces,
// residuals) kept as given.
nlohmann::ordered_json calibration_json(const CalibrationSpec& calibration);

}  // namespace trainsim::spec
