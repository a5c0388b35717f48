#include "trainsim/spec/device_spec.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "trainsim/spec/link_catalogue.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

namespace fs = std::filesystem;

constexpr std::array<Choice<Dtype>, 5> kDtypes{{
    {"fp32", Dtype::Fp32},
    {"tf32", Dtype::Tf32},
    {"bf16", Dtype::Bf16},
    {"fp16", Dtype::Fp16},
    {"fp8", Dtype::Fp8},
}};
constexpr std::array<Choice<bool>, 2> kFp8GemmLayouts{{{"tn", false}, {"all", true}}};
constexpr std::array<Choice<bool>, 2> kCollectiveEngines{{{"cores", true}, {"dma", false}}};
constexpr std::array<Choice<DeviceArch>, 9> kArchs{{{"ampere", DeviceArch::Ampere},
                                                    {"hopper", DeviceArch::Hopper},
                                                    {"blackwell", DeviceArch::Blackwell},
                                                    {"cdna3", DeviceArch::Cdna3},
                                                    {"cdna4", DeviceArch::Cdna4},
                                                    {"tpu-v4", DeviceArch::TpuV4},
                                                    {"tpu-v5p", DeviceArch::TpuV5p},
                                                    {"tpu-v6e", DeviceArch::TpuV6e},
                                                    {"tpu-v7", DeviceArch::TpuV7}}};

constexpr NumberRange kPower{1, 1e5};  // a board: 1 W .. 100 kW
// What a device's figures can be and usually are (docs/cli.md "Plausible values"): from a phone-class
// accelerator to well beyond today's parts (B200: 8 TB/s HBM, 180 GB, 4.5 PFLOP/s dense FP8).
constexpr Plausibility kMemoryBandwidth{
    "a device's memory bandwidth", {100e9, 20e12}, {500e9, 10e12}, "100 GB/s to 20 TB/s", "500 GB/s to 10 TB/s"};
constexpr Plausibility kMemoryCapacity{"a device's memory",
                                       {1073741824.0, 1099511627776.0},
                                       {8589934592.0, 549755813888.0},
                                       "1 GiB to 1 TiB",
                                       "8 GiB to 512 GiB"};
constexpr Plausibility kPeakFlops{
    "a device's dense peak", {1e12, 1e17}, {1e13, 2e16}, "1 TFLOP/s to 100 PFLOP/s", "10 TFLOP/s to 20 PFLOP/s"};
constexpr Plausibility kHostBandwidth{
    "a device's host copy bandwidth", {1e9, 2e12}, {8e9, 1e12}, "1 GB/s to 2 TB/s", "8 GB/s to 1 TB/s"};
constexpr int kDefaultSms = 108;  // A100, as docs/cli.md's example warns
// Keys a catalogue file or a derived device may carry besides the device's own fields.
constexpr std::array<std::string_view, 3> kTunableSections{"kernels", "collectives", "host"};

void read_peak_flops(Reader& r, DeviceSpec& d, std::vector<std::string>& warnings) {
  Reader flops = r.object("peak_flops");
  const auto keys = flops.keys();
  for (const auto& key : keys) {
    const auto it = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const auto& c) { return c.name == key; });
    if (it == kDtypes.end()) {
      std::vector<std::string> names;
      for (const auto& c : kDtypes) names.emplace_back(c.name);
      const auto hint = closest_match(key, names);
      flops.error_at(key, fmt::format("unknown dtype \"{}\"; expected one of: fp32, tf32, bf16, fp16, fp8{}", key,
                                      hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint)));
      continue;
    }
    d.peak_flops[it->value] = {flops.plausible_quantity(key, QuantityKind::FlopRate, kPeakFlops, warnings)};
  }
  if (keys.empty()) r.error_at("peak_flops", "expected at least one dtype, such as {\"bf16\": \"312 TFLOP/s\"}");
}

std::optional<double> power(Reader& r, std::string_view key) {
  return r.optional_quantity(key, QuantityKind::Power, kPower);
}

// The fields of a device object. `whole`: a device described inline or a catalogue file (name,
// peak_flops, memory and memory_bandwidth required); otherwise overrides of a catalogue device.
// The device's copies to and from pinned host memory: a catalogue link (its line rate times the
// share a copy achieves) or a figure.
void read_host_link(Reader& r, DeviceSpec& d, const std::string& spec_path, std::vector<std::string>& warnings) {
  if (r.has("host_link") && r.has("host_bandwidth")) {
    r.error_at("host_bandwidth", "give host_link (a catalogue link) or host_bandwidth (a figure), not both");
    return;
  }
  if (const auto link = read_link_value(r, LinkScope::Fabric, spec_path, "host_link")) {
    d.host_link = link->catalogue;
    d.host_bandwidth = link->bandwidth * link->efficiency;
  } else if (r.has("host_bandwidth")) {
    d.host_link.clear();
    d.host_bandwidth =
        Bandwidth{r.plausible_quantity("host_bandwidth", QuantityKind::Bandwidth, kHostBandwidth, warnings)};
  }
}

void read_fields(Reader& r, DeviceSpec& d, bool whole, const std::string& spec_path,
                 std::vector<std::string>& warnings) {
  if (whole || r.has("name")) d.name = r.string("name");
  if (const auto arch = r.optional_choice<DeviceArch>("arch", kArchs)) d.arch = *arch;
  if (whole && !r.has("peak_flops"))
    r.error_at("peak_flops", "missing; expected an object such as {\"bf16\": \"312 TFLOP/s\"}");
  else if (r.has("peak_flops"))
    read_peak_flops(r, d, warnings);
  if (whole || r.has("memory"))
    d.memory = Bytes::from_double(r.plausible_quantity("memory", QuantityKind::Bytes, kMemoryCapacity, warnings));
  if (whole || r.has("memory_bandwidth"))
    d.memory_bandwidth = {
        r.plausible_quantity("memory_bandwidth", QuantityKind::Bandwidth, kMemoryBandwidth, warnings)};
  if (const auto sms = r.optional_integer("sms", {1, 100000})) {
    d.sms = static_cast<int>(*sms);
  } else if (whole) {
    warnings.push_back(fmt::format("device.sms not given: assumed {}", kDefaultSms));
    d.sms = kDefaultSms;
  }
  if (const auto layouts = r.optional_choice<bool>("fp8_gemm_layouts", kFp8GemmLayouts))
    d.fp8_gemm_all_layouts = *layouts;
  if (const auto engine = r.optional_choice<bool>("collective_engine", kCollectiveEngines))
    d.collectives_take_cores = *engine;
  if (const auto tdp = power(r, "tdp")) d.tdp_w = *tdp;
  if (const auto limit = power(r, "power_limit")) d.power_limit_w = *limit;
  read_host_link(r, d, spec_path, warnings);
  for (const auto section : kTunableSections) {
    if (auto s = r.optional_object(section)) {
      const auto values = read_tunables(*s, section);
      d.fitted.values.insert(d.fitted.values.end(), values.values.begin(), values.values.end());
      s->finish();
    }
  }
  if (d.power_limit_w && !d.tdp_w) r.error_at("power_limit", "needs the device's tdp to scale its clocks from");
  // the clock model (kernels.static_power_share) is fitted at 0.71-1.0 of the TDP; far below, the
  // power that does not scale with the clock would leave the compute nothing
  if (d.power_limit_w && d.tdp_w && *d.power_limit_w < 0.5 * *d.tdp_w)
    r.error_at("power_limit", fmt::format("{:g} W is below half the device's tdp ({:g} W): the clock model "
                                          "(docs/model.md \"Clocks under a power limit\") holds from there up",
                                          *d.power_limit_w, *d.tdp_w));
}

// A catalogue device by name, or a diagnostic at `key` listing the shipped ones.
std::optional<DeviceSpec> catalogue_device(Reader& r, std::string_view key, const std::string& name,
                                           const std::string& spec_path) {
  const auto path = catalogue_path(name, spec_path);
  if (path.empty()) {
    const auto names = catalogue_names(spec_path);
    const auto hint = closest_match(name, names);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    r.error_at(key, fmt::format("unknown device \"{}\"; the catalogue holds: {}{}", name,
                                list.empty() ? "(no devices/ folder found)" : list,
                                hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint)));
    return std::nullopt;
  }
  return load_device_file(path);
}

}  // namespace

std::string_view dtype_name(Dtype dtype) {
  return choice_name<Dtype>(kDtypes, dtype);
}

int dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::Fp8:
      return 1;
    case Dtype::Bf16:
    case Dtype::Fp16:
      return 2;
    case Dtype::Fp32:
    case Dtype::Tf32:
      return 4;
  }
  return 4;
}

std::string_view arch_name(DeviceArch arch) {
  return arch == DeviceArch::Unknown ? "unknown" : choice_name<DeviceArch>(kArchs, arch);
}

std::vector<fs::path> device_search_path(const std::string& spec_path) {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("TRAINSIM_DEVICES"); env != nullptr && *env != '\0') {
    std::string_view list(env);
    std::size_t start = 0;
    while (start <= list.size()) {
      const auto end = std::min(list.find(':', start), list.size());
      if (end > start) out.emplace_back(std::string(list.substr(start, end - start)));
      start = end + 1;
    }
  }
  std::error_code ec;
  if (!spec_path.empty() && fs::is_regular_file(spec_path, ec)) {
    const auto folder = fs::path(spec_path).parent_path();
    out.push_back(folder / "devices");
    out.push_back(folder / ".." / "devices");
  }
  out.emplace_back(TRAINSIM_DEVICES_DIR);
  return out;
}

std::vector<std::string> catalogue_names(const std::string& spec_path, const std::string& subfolder) {
  std::set<std::string> names;
  for (const auto& dir : device_search_path(spec_path)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(subfolder.empty() ? dir : dir / subfolder, ec))
      if (e.path().extension() == ".json") names.insert(e.path().stem().string());
  }
  return {names.begin(), names.end()};
}

std::string catalogue_path(const std::string& name, const std::string& spec_path, const std::string& subfolder) {
  for (const auto& dir : device_search_path(spec_path)) {
    const auto candidate = (subfolder.empty() ? dir : dir / subfolder) / (name + ".json");
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return {};
}

DeviceSpec load_device_file(const std::string& path) {
  const auto json = load_json_file(path);
  if (!json.is_object()) throw SpecError(path, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader r(json, "", diagnostics);
  DeviceSpec d;
  std::vector<std::string> warnings;
  r.sources();
  read_fields(r, d, true, path, warnings);
  if (!r.has("sms")) r.error_at("sms", "missing; a catalogue device states its streaming multiprocessors");
  r.finish();
  diagnostics.throw_if_any(path);
  d.catalogue = fs::path(path).stem().string();
  return d;
}

DeviceSpec read_device_value(Reader& topology, const std::string& spec_path, std::vector<std::string>& warnings) {
  const auto* value = topology.value("device");
  if (value == nullptr) {
    topology.error_at("device",
                      "missing; expected a catalogue name such as \"h100-sxm5-80gb\" or an object with name, "
                      "peak_flops, memory, memory_bandwidth");
    return {};
  }
  if (value->is_string())
    return catalogue_device(topology, "device", value->get<std::string>(), spec_path).value_or(DeviceSpec{});
  if (!value->is_object()) {
    topology.error_at("device", fmt::format("expected a catalogue name or an object, got {}", describe(*value)));
    return {};
  }
  Reader r = topology.child("device");
  DeviceSpec d;
  if (r.has("from")) {
    const auto base = r.string("from");
    if (auto found = catalogue_device(r, "from", base, spec_path)) d = std::move(*found);
    read_fields(r, d, false, spec_path, warnings);
  } else {
    read_fields(r, d, true, spec_path, warnings);
  }
  r.finish();
  return d;
}

}  // namespace trainsim::spec
