#include "trainsim/spec/perturb_spec.hpp"

#include <array>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {

bool PerturbSpec::active() const {
  for (const auto& s : slow_gpus)
    if (s.compute_factor != 1) return true;
  for (const auto& d : degraded_links)
    if (d.bandwidth_fraction != 1) return true;
  return noise && noise->sigma > 0;
}

PerturbSpec read_perturb_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  PerturbSpec p;
  root.sources();
  // a straggler is slower, at most a hundred times (beyond that it is a failure: see goodput)
  constexpr NumberRange kFactor{1, 100};
  if (const auto* list = root.value("slow_gpus")) {
    if (!list->is_array()) root.error_at("slow_gpus", fmt::format("expected a list, got {}", describe(*list)));
    for (std::size_t i = 0; list->is_array() && i < list->size(); ++i) {
      Reader r((*list)[i], fmt::format("/slow_gpus/{}", i), diagnostics);
      SlowGpus s;
      s.rank = r.optional_integer("rank", {0, std::int64_t{1} << 22});
      s.count = r.integer_or("count", 0, {1, std::int64_t{1} << 22});
      if (s.rank.has_value() == (s.count > 0)) r.error("give rank (one GPU) or count (drawn from seed), not both");
      s.seed = static_cast<std::uint64_t>(r.integer_or("seed", 1, {0, std::int64_t{1} << 62}));
      s.compute_factor = r.number("compute_factor", kFactor);
      r.finish();
      p.slow_gpus.push_back(s);
    }
  }
  if (auto n = root.optional_object("noise")) {
    n->choice<int>("distribution", std::array<Choice<int>, 1>{{{"lognormal", 0}}});
    p.noise = ComputeNoise{.sigma = n->number("sigma", {0, 1}),
                           .seed = static_cast<std::uint64_t>(n->integer_or("seed", 1, {0, std::int64_t{1} << 62}))};
    n->finish();
  }
  // a port below a thousandth of its rate is down (a failure: see goodput), not degraded
  constexpr NumberRange kFraction{1e-3, 1};
  if (const auto* list = root.value("degraded_links")) {
    if (!list->is_array()) root.error_at("degraded_links", fmt::format("expected a list, got {}", describe(*list)));
    for (std::size_t i = 0; list->is_array() && i < list->size(); ++i) {
      Reader r((*list)[i], fmt::format("/degraded_links/{}", i), diagnostics);
      DegradedNics d;
      d.rank = r.optional_integer("nic_of_rank", {0, std::int64_t{1} << 22});
      d.count = r.integer_or("count", 0, {1, std::int64_t{1} << 22});
      if (d.rank.has_value() == (d.count > 0))
        r.error("give nic_of_rank (one NIC) or count (drawn from seed), not both");
      d.seed = static_cast<std::uint64_t>(r.integer_or("seed", 1, {0, std::int64_t{1} << 62}));
      d.bandwidth_fraction = r.number("bandwidth_fraction", kFraction);
      r.finish();
      p.degraded_links.push_back(d);
    }
  }
  root.finish();
  diagnostics.throw_if_any(source);
  return p;
}

PerturbSpec load_perturb_spec(const std::string& path) {
  return read_perturb_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
