#pragma once
// A calibration file (INTERFACE.md "Calibration"): fitted values that override the defaults of the
// kernel, collective and memory models. Every field is optional; a missing one keeps its default.
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

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

struct CollectiveCalibration {
  std::optional<Duration> launch;
  std::optional<int> channels;
  std::optional<Bandwidth> ll128_channel_cap;
  std::optional<Bytes> simple_chunk;
  std::optional<double> in_switch_efficiency;
  std::optional<Duration> in_switch_latency;
};

struct CalibrationSpec {
  KernelCalibration kernels;
  CollectiveCalibration collectives;
  std::optional<Bytes> runtime_reserved;
};

CalibrationSpec read_calibration_spec(const nlohmann::json& json, const std::string& source);
CalibrationSpec load_calibration_spec(const std::string& path);

}  // namespace trainsim::spec
