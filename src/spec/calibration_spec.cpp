#include "trainsim/spec/calibration_spec.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr NumberRange kShare{0, 1.0, true};
constexpr std::array<std::string_view, 7> kCollectiveOps{"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                         "reduce",     "all_to_all",     "send_recv"};

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

CollectiveCalibration read_collectives(Reader r, Diagnostics& diagnostics) {
  CollectiveCalibration c;
  c.launch = duration(r, "launch");
  if (const auto ch = r.optional_integer("channels", {1, 64})) c.channels = static_cast<int>(*ch);
  if (const auto cap = r.optional_quantity("ll128_channel_cap", QuantityKind::Bandwidth, {0, 1e13, true}))
    c.ll128_channel_cap = Bandwidth{*cap};
  if (const auto chunk = r.optional_quantity("simple_chunk", QuantityKind::Bytes, {1, 1e9}))
    c.simple_chunk = Bytes::from_double(*chunk);
  c.in_switch_efficiency = share(r, "in_switch_efficiency");
  c.in_switch_latency = duration(r, "in_switch_latency");
  if (const auto* fits = r.value("fits")) {
    if (!fits->is_array()) {
      r.error_at("fits", fmt::format("expected a list of fitted collectives, got {}", describe(*fits)));
    } else {
      for (std::size_t i = 0; i < fits->size(); ++i) {
        const auto pointer = pointer_join(pointer_join(r.pointer(), "fits"), std::to_string(i));
        if (!(*fits)[i].is_object()) {
          r.error_at("fits", fmt::format("item {}: expected an object, got {}", i, describe((*fits)[i])));
          continue;
        }
        Reader f((*fits)[i], pointer, diagnostics);
        CollectiveFit fit;
        fit.op = f.string("op");
        if (!fit.op.empty() && std::find(kCollectiveOps.begin(), kCollectiveOps.end(), fit.op) == kCollectiveOps.end())
          f.error_at("op",
                     fmt::format("\"{}\" is not valid; expected one of: {}", fit.op, fmt::join(kCollectiveOps, ", ")));
        fit.group_size = static_cast<int>(f.integer("group_size", {2, 1 << 22}));
        fit.latency = Duration::from_seconds(f.quantity("latency", QuantityKind::Duration, {0, 10.0}));
        fit.bandwidth = Bandwidth{f.quantity("bandwidth", QuantityKind::Bandwidth, {0, 1e15, true})};
        fit.samples = f.integer_or("samples", 0, {0, std::int64_t{1} << 40});
        fit.min_bytes = Bytes::from_double(f.quantity("min_bytes", QuantityKind::Bytes, {0, 1e15}));
        fit.max_bytes = Bytes::from_double(f.quantity("max_bytes", QuantityKind::Bytes, {0, 1e15}));
        if (fit.max_bytes.count < fit.min_bytes.count)
          f.error_at("max_bytes", fmt::format("{} is below min_bytes ({}): the fitted range is empty",
                                              fit.max_bytes.count, fit.min_bytes.count));
        f.finish();
        c.fits.push_back(std::move(fit));
      }
    }
  }
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
  if (auto col = root.optional_object("collectives")) c.collectives = read_collectives(*col, diagnostics);
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

nlohmann::ordered_json calibration_json(const CalibrationSpec& c) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  nlohmann::ordered_json k = nlohmann::ordered_json::object();
  const auto& kc = c.kernels;
  if (kc.gemm_ceiling) k["gemm_ceiling"] = *kc.gemm_ceiling;
  if (kc.sustained_fraction) k["sustained_fraction"] = *kc.sustained_fraction;
  if (kc.tile_m) k["tile_m"] = *kc.tile_m;
  if (kc.tile_n) k["tile_n"] = *kc.tile_n;
  if (kc.k_overhead) k["k_overhead"] = *kc.k_overhead;
  if (kc.flash_fwd_efficiency) k["flash_fwd_efficiency"] = *kc.flash_fwd_efficiency;
  if (kc.flash_bwd_efficiency) k["flash_bwd_efficiency"] = *kc.flash_bwd_efficiency;
  if (kc.hbm_efficiency) k["hbm_efficiency"] = *kc.hbm_efficiency;
  if (kc.kernel_gap) k["kernel_gap"] = kc.kernel_gap->seconds();
  if (!k.empty()) out["kernels"] = std::move(k);
  nlohmann::ordered_json col = nlohmann::ordered_json::object();
  const auto& cc = c.collectives;
  if (cc.launch) col["launch"] = cc.launch->seconds();
  if (cc.channels) col["channels"] = *cc.channels;
  if (cc.ll128_channel_cap) col["ll128_channel_cap"] = cc.ll128_channel_cap->bytes_per_s;
  if (cc.simple_chunk) col["simple_chunk"] = cc.simple_chunk->count;
  if (cc.in_switch_efficiency) col["in_switch_efficiency"] = *cc.in_switch_efficiency;
  if (cc.in_switch_latency) col["in_switch_latency"] = cc.in_switch_latency->seconds();
  if (!cc.fits.empty()) {
    auto& fits = col["fits"] = nlohmann::ordered_json::array();
    for (const auto& f : cc.fits)
      fits.push_back({{"op", f.op},
                      {"group_size", f.group_size},
                      {"latency", f.latency.seconds()},
                      {"bandwidth", f.bandwidth.bytes_per_s},
                      {"samples", f.samples},
                      {"min_bytes", f.min_bytes.count},
                      {"max_bytes", f.max_bytes.count}});
  }
  if (!col.empty()) out["collectives"] = std::move(col);
  if (c.runtime_reserved) out["memory"] = {{"runtime_reserved", c.runtime_reserved->count}};
  return out;
}

CalibrationSpec load_calibration_spec(const std::string& path) {
  return read_calibration_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
