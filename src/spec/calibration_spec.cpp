#include "trainsim/spec/calibration_spec.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr std::array<std::string_view, 7> kCollectiveOps{"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                         "reduce",     "all_to_all",     "send_recv"};

CollectiveFit read_fit(Reader f) {
  CollectiveFit fit;
  fit.op = f.string("op");
  if (!fit.op.empty() && std::find(kCollectiveOps.begin(), kCollectiveOps.end(), fit.op) == kCollectiveOps.end())
    f.error_at("op", fmt::format("\"{}\" is not valid; expected one of: {}", fit.op, fmt::join(kCollectiveOps, ", ")));
  fit.group_size = static_cast<int>(f.integer("group_size", {2, 1 << 22}));
  fit.latency = Duration::from_seconds(f.quantity("latency", QuantityKind::Duration, {0, 10.0}));
  fit.bandwidth = Bandwidth{f.quantity("bandwidth", QuantityKind::Bandwidth, {0, 1e15, true})};
  fit.samples = f.integer_or("samples", 0, {0, std::int64_t{1} << 40});
  fit.min_bytes = Bytes::from_double(f.quantity("min_bytes", QuantityKind::Bytes, {0, 1e15}));
  fit.max_bytes = Bytes::from_double(f.quantity("max_bytes", QuantityKind::Bytes, {0, 1e15}));
  if (fit.max_bytes.count < fit.min_bytes.count)
    f.error_at("max_bytes", fmt::format("{} is below min_bytes ({}): the fitted range is empty", fit.max_bytes.count,
                                        fit.min_bytes.count));
  f.finish();
  return fit;
}

std::vector<CollectiveFit> read_fits(Reader& r, Diagnostics& diagnostics) {
  std::vector<CollectiveFit> out;
  const auto* fits = r.value("fits");
  if (!fits) return out;
  if (!fits->is_array()) {
    r.error_at("fits", fmt::format("expected a list of fitted collectives, got {}", describe(*fits)));
    return out;
  }
  for (std::size_t i = 0; i < fits->size(); ++i) {
    const auto pointer = pointer_join(pointer_join(r.pointer(), "fits"), std::to_string(i));
    if (!(*fits)[i].is_object()) {
      r.error_at("fits", fmt::format("item {}: expected an object, got {}", i, describe((*fits)[i])));
      continue;
    }
    out.push_back(read_fit(Reader((*fits)[i], pointer, diagnostics)));
  }
  return out;
}

void append(TunableValues& to, const TunableValues& from) {
  to.values.insert(to.values.end(), from.values.begin(), from.values.end());
}

}  // namespace

void CalibrationSpec::apply(Tunables& tunables) const {
  values.apply(tunables);
  auto& f = tunables.collectives.fits;
  f.insert(f.end(), fits.begin(), fits.end());
}

CalibrationSpec read_calibration_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  CalibrationSpec c;
  root.sources();
  if (auto k = root.optional_object("kernels")) {
    append(c.values, read_tunables(*k, "kernels"));
    k->finish();
  }
  if (auto col = root.optional_object("collectives")) {
    append(c.values, read_tunables(*col, "collectives"));
    c.fits = read_fits(*col, diagnostics);
    col->finish();
  }
  if (auto mem = root.optional_object("memory")) {
    append(c.values, read_tunables(*mem, "memory"));
    mem->finish();
  }
  if (auto host = root.optional_object("host")) {
    append(c.values, read_tunables(*host, "host"));
    host->finish();
  }
  root.value("traces");  // written by `trainsim calibrate`: where the values came from
  root.value("fit");     // residuals of the fit, for the record
  root.finish();
  diagnostics.throw_if_any(source);
  return c;
}

nlohmann::ordered_json calibration_json(const CalibrationSpec& c) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (auto k = tunables_json(c.values, "kernels"); !k.empty()) out["kernels"] = std::move(k);
  auto col = tunables_json(c.values, "collectives");
  if (!c.fits.empty()) {
    auto& fits = col["fits"] = nlohmann::ordered_json::array();
    for (const auto& f : c.fits)
      fits.push_back({{"op", f.op},
                      {"group_size", f.group_size},
                      {"latency", f.latency.seconds()},
                      {"bandwidth", f.bandwidth.bytes_per_s},
                      {"samples", f.samples},
                      {"min_bytes", f.min_bytes.count},
                      {"max_bytes", f.max_bytes.count}});
  }
  if (!col.empty()) out["collectives"] = std::move(col);
  if (auto m = tunables_json(c.values, "memory"); !m.empty()) out["memory"] = std::move(m);
  if (auto h = tunables_json(c.values, "host"); !h.empty()) out["host"] = std::move(h);
  return out;
}

CalibrationSpec load_calibration_spec(const std::string& path) {
  return read_calibration_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
