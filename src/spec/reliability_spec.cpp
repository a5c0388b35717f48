#include "trainsim/spec/reliability_spec.hpp"

#include <array>
#include <filesystem>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr std::array<Choice<FailureUnit>, 3> kUnits{
    {{"gpu", FailureUnit::Gpu}, {"node", FailureUnit::Node}, {"job", FailureUnit::Job}}};

constexpr NumberRange kBandwidth{1e6, 1e15, false};   // 1 MB/s to 1 PB/s
constexpr NumberRange kTime{0, 30 * 86400.0, false};  // up to a month
constexpr NumberRange kPeriod{3600, 1e9, false};      // an observation: an hour to decades
constexpr double kHour = 3600;

// One cause: an MTBF per unit, or a count over a period on a number of units.
FailureCause read_cause(Reader r) {
  FailureCause c;
  c.cause = r.string("cause");
  c.per = r.choice<FailureUnit>("per", kUnits);
  c.replaces_node = r.boolean_or("replaces_node", c.per != FailureUnit::Job);
  const bool mtbf = r.has("mtbf");
  const bool count = r.has("count");
  if (mtbf == count) {
    r.error(mtbf ? "give mtbf or count (with over and units), not both"
                 : "missing: give mtbf (per unit) or count, over and units");
  } else if (mtbf) {
    c.rate_per_unit_hour = kHour / r.quantity("mtbf", QuantityKind::Duration, {60, 1e13, false});
  } else {
    const auto n = r.number("count", {0, 1e9});
    const auto over = r.quantity("over", QuantityKind::Duration, kPeriod);
    const auto units = c.per == FailureUnit::Job ? 1.0 : r.number("units", {1, 1e8});
    c.rate_per_unit_hour = n / (units * over / kHour);
  }
  if (c.per == FailureUnit::Job && c.replaces_node && r.has("replaces_node"))
    r.error_at("replaces_node", "a failure counted per job takes no node out");
  r.finish();
  return c;
}

}  // namespace

std::string_view failure_unit_name(FailureUnit unit) {
  return choice_name<FailureUnit>(kUnits, unit);
}

ReliabilitySpec read_reliability_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  ReliabilitySpec s;
  s.name = root.string("name");
  s.source = source;
  root.sources();
  if (const auto* causes = root.value("failures"); causes && causes->is_array() && !causes->empty()) {
    for (std::size_t i = 0; i < causes->size(); ++i) {
      Reader item((*causes)[i], fmt::format("/failures/{}", i), diagnostics);
      if (!(*causes)[i].is_object())
        item.error(fmt::format("expected an object with cause, per and a rate, got {}", describe((*causes)[i])));
      else
        s.causes.push_back(read_cause(item));
    }
  } else {
    root.error_at("failures", "missing or empty; expected a list of causes with their rates");
  }
  if (auto c = root.optional_object("checkpoint")) {
    auto& k = s.checkpoint;
    k.write_bandwidth = c->quantity("write_bandwidth", QuantityKind::Bandwidth, kBandwidth);
    k.read_bandwidth =
        c->optional_quantity("read_bandwidth", QuantityKind::Bandwidth, kBandwidth).value_or(k.write_bandwidth);
    k.node_write_bandwidth =
        c->optional_quantity("node_write_bandwidth", QuantityKind::Bandwidth, kBandwidth).value_or(0);
    k.node_read_bandwidth = c->optional_quantity("node_read_bandwidth", QuantityKind::Bandwidth, kBandwidth)
                                .value_or(k.node_write_bandwidth);
    k.asynchronous = c->boolean_or("asynchronous", false);
    k.host_copy_bandwidth =
        c->optional_quantity("host_copy_bandwidth", QuantityKind::Bandwidth, kBandwidth).value_or(0);
    if (k.asynchronous && k.host_copy_bandwidth == 0)
      c->error_at("host_copy_bandwidth",
                  "missing: an asynchronous save stalls training while it copies the state "
                  "to host memory");
    k.interval_s = c->optional_quantity("interval", QuantityKind::Duration, {1, 1e8, false});
    c->finish();
  } else {
    root.error_at("checkpoint", "missing; expected write_bandwidth and friends");
  }
  if (auto r = root.optional_object("restart")) {
    s.restart.detection_s = r->quantity("detection", QuantityKind::Duration, kTime);
    s.restart.rescheduling_s = r->quantity("rescheduling", QuantityKind::Duration, kTime);
    s.restart.initialization_s = r->quantity("initialization", QuantityKind::Duration, kTime);
    r->finish();
  } else {
    root.error_at("restart", "missing; expected detection, rescheduling and initialization times");
  }
  s.spare_nodes = root.integer_or("spare_nodes", 0, {0, 1 << 20});
  s.repair_s = root.optional_quantity("repair", QuantityKind::Duration, {0, 1e8, false}).value_or(0);
  s.spare_trays_per_domain = static_cast<int>(root.integer_or("spare_trays_per_domain", 0, {0, 64}));
  s.spare_domains = root.integer_or("spare_domains", 0, {0, 1 << 20});
  if (s.spare_trays_per_domain > 0 && s.spare_nodes > 0)
    root.error_at("spare_nodes",
                  "not with spare_trays_per_domain: a tray of another domain cannot join the job's "
                  "scale-up domain; give whole spare domains (spare_domains)");
  if (s.spare_domains > 0 && s.spare_trays_per_domain == 0)
    root.error_at("spare_domains", "only with spare_trays_per_domain (without it spare_nodes are the pool)");
  root.finish();
  diagnostics.throw_if_any(source);
  return s;
}

ReliabilitySpec load_reliability_spec(const std::string& path) {
  return read_reliability_spec(load_json_file(path), path);
}

std::string default_reliability_path() {
  return (std::filesystem::path(TRAINSIM_TOPOLOGIES_DIR) / "reliability" / "llama3-405b-table5.json").string();
}

}  // namespace trainsim::spec
