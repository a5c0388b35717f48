#include "trainsim/spec/calibration_spec.hpp"

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr NumberRange kShare{0, 1.0, true};

std::optional<double> share(Reader& r, std::string_view key) {
  if (!r.has(key)) return std::nullopt;
  return r.number(key, kShare);
}

std::optional<Duration> duration(Reader& r, std::string_view key) {
  const auto v = r.optional_quantity(key, QuantityKind::Duration, {0, 1.0});
  if (!v) return std::nullopt;
  return Duration::from_seconds(*v);
}

KernelCalibration read_kernels(Reader r) {
  KernelCalibration k;
  k.gemm_ceiling = share(r, "gemm_ceiling");
  k.sustained_fraction = share(r, "sustained_fraction");
  k.tile_m = r.optional_integer("tile_m", {1, 4096});
  k.tile_n = r.optional_integer("tile_n", {1, 4096});
  if (r.has("k_overhead")) k.k_overhead = r.number("k_overhead", {0, 1e6});
  k.flash_fwd_efficiency = share(r, "flash_fwd_efficiency");
  k.flash_bwd_efficiency = share(r, "flash_bwd_efficiency");
  k.hbm_efficiency = share(r, "hbm_efficiency");
  k.kernel_gap = duration(r, "kernel_gap");
  r.finish();
  return k;
}

CollectiveCalibration read_collectives(Reader r) {
  CollectiveCalibration c;
  c.launch = duration(r, "launch");
  if (const auto ch = r.optional_integer("channels", {1, 64})) c.channels = static_cast<int>(*ch);
  if (const auto cap = r.optional_quantity("ll128_channel_cap", QuantityKind::Bandwidth, {0, 1e13, true}))
    c.ll128_channel_cap = Bandwidth{*cap};
  if (const auto chunk = r.optional_quantity("simple_chunk", QuantityKind::Bytes, {1, 1e9}))
    c.simple_chunk = Bytes::from_double(*chunk);
  c.in_switch_efficiency = share(r, "in_switch_efficiency");
  c.in_switch_latency = duration(r, "in_switch_latency");
  r.finish();
  return c;
}

}  // namespace

CalibrationSpec read_calibration_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  CalibrationSpec c;
  root.sources();
  if (auto k = root.optional_object("kernels")) c.kernels = read_kernels(*k);
  if (auto col = root.optional_object("collectives")) c.collectives = read_collectives(*col);
  if (auto mem = root.optional_object("memory")) {
    if (const auto b = mem->optional_quantity("runtime_reserved", QuantityKind::Bytes, {0, 1e13}))
      c.runtime_reserved = Bytes::from_double(*b);
    mem->finish();
  }
  root.value("traces");  // written by `trainsim calibrate`: where the values came from
  root.value("fit");     // residuals of the fit, for the record
  root.finish();
  diagnostics.throw_if_any(source);
  return c;
}

CalibrationSpec load_calibration_spec(const std::string& path) {
  return read_calibration_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
