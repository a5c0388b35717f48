#include "trainsim/spec/link_catalogue.hpp"

#include <array>

#include <fmt/format.h>

#include "trainsim/spec/device_spec.hpp"

namespace trainsim::spec {
namespace {

namespace fs = std::filesystem;

constexpr std::array<Choice<LinkScope>, 3> kScopes{
    {{"fabric", LinkScope::Fabric}, {"network", LinkScope::Network}, {"torus", LinkScope::Torus}}};
constexpr NumberRange kLinkRateRange{1e6, 1e13};  // 1 MB/s .. 10 TB/s per link and direction
constexpr NumberRange kLinkLatencyRange{0, 1e-3};
constexpr NumberRange kLinkEfficiencyRange{0, 1.0, true};

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(no devices/links/ folder found)" : out;
}

}  // namespace

std::string_view link_scope_name(LinkScope scope) {
  return choice_name<LinkScope>(kScopes, scope);
}

std::vector<std::string> link_catalogue_names(const std::string& spec_path) {
  return catalogue_names(spec_path, "links");
}

LinkKind load_link_file(const std::string& path) {
  const auto json = load_json_file(path);
  if (!json.is_object()) throw SpecError(path, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader r(json, "", diagnostics);
  LinkKind k;
  k.catalogue = fs::path(path).stem().string();
  r.sources();
  k.name = r.string("name");
  k.scope = r.choice<LinkScope>("scope", kScopes);
  const char* rate_key = k.scope == LinkScope::Network ? "port_bandwidth" : "link_bandwidth";
  k.bandwidth = r.bandwidth(rate_key, kLinkRateRange);
  if (k.scope == LinkScope::Fabric) {
    if (const auto n = r.optional_integer("links_per_device", {1, 1024})) k.links_per_device = static_cast<int>(*n);
  }
  k.latency = r.duration("latency", kLinkLatencyRange);
  if (k.scope == LinkScope::Network) k.switch_latency = r.duration("switch_latency", kLinkLatencyRange);
  k.efficiency = r.number("efficiency", kLinkEfficiencyRange);
  if (k.scope == LinkScope::Torus) {
    if (r.has("max_slice"))
      for (const auto d : r.integer_list("max_slice", {1, 4096}, 1, 3)) k.max_slice.push_back(static_cast<int>(d));
    k.cube_side = static_cast<int>(r.integer_or("cube_side", 0, {0, 64}));
    k.full_axis = static_cast<int>(r.integer_or("full_axis", 0, {0, 4096}));
    if (k.cube_side > 0 && k.full_axis > 0)
      r.error_at("full_axis", "a pod's slices wrap around either as whole cubes or along full axes, not both");
  }
  r.finish();
  diagnostics.throw_if_any(path);
  return k;
}

std::optional<LinkKind> read_link_value(Reader& r, LinkScope scope, const std::string& spec_path,
                                        std::string_view key) {
  if (!r.has(key)) return std::nullopt;
  const auto name = r.string(key);
  const auto path = catalogue_path(name, spec_path, "links");
  if (path.empty()) {
    const auto names = link_catalogue_names(spec_path);
    const auto hint = closest_match(name, names);
    r.error_at(key, fmt::format("unknown link \"{}\"; the link catalogue holds: {}{}", name, joined_names(names),
                                hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint)));
    return std::nullopt;
  }
  auto kind = load_link_file(path);
  if (kind.scope != scope) {
    std::vector<std::string> fitting;
    for (const auto& n : link_catalogue_names(spec_path))
      if (load_link_file(catalogue_path(n, spec_path, "links")).scope == scope) fitting.push_back(n);
    r.error_at(key, fmt::format("\"{}\" is a {} link, not a {} link; {} links: {}", name, link_scope_name(kind.scope),
                                link_scope_name(scope), link_scope_name(scope), joined_names(fitting)));
    return std::nullopt;
  }
  return kind;
}

}  // namespace trainsim::spec
