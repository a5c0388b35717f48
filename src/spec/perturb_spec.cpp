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

namespace {

// Each entry of the list at `key`, read by `one` from a Reader on it.
template <class F>
void read_each(Reader& root, const char* key, Diagnostics& diagnostics, F&& one) {
  const auto* list = root.value(key);
  if (!list) return;
  if (!list->is_array()) root.error_at(key, fmt::format("expected a list, got {}", describe(*list)));
  for (std::size_t i = 0; list->is_array() && i < list->size(); ++i) {
    Reader r((*list)[i], fmt::format("/{}/{}", key, i), diagnostics);
    one(r);
    r.finish();
  }
}

// The ranks an entry names: one (`rank_key`, `what` it names), or `count` drawn from `seed`.
template <class T>
void read_ranks(Reader& r, const char* rank_key, const char* what, T& into) {
  into.rank = r.optional_integer(rank_key, {0, std::int64_t{1} << 22});
  into.count = r.integer_or("count", 0, {1, std::int64_t{1} << 22});
  if (into.rank.has_value() == (into.count > 0))
    r.error(fmt::format("give {} ({}) or count (drawn from seed), not both", rank_key, what));
  into.seed = static_cast<std::uint64_t>(r.integer_or("seed", 1, {0, std::int64_t{1} << 62}));
}

}  // namespace

PerturbSpec read_perturb_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  PerturbSpec p;
  root.sources();
  // a straggler is slower, at most a hundred times (beyond that it is a failure: see goodput)
  constexpr NumberRange kFactor{1, 100};
  read_each(root, "slow_gpus", diagnostics, [&](Reader& r) {
    SlowGpus s;
    read_ranks(r, "rank", "one GPU", s);
    s.compute_factor = r.number("compute_factor", kFactor);
    p.slow_gpus.push_back(s);
  });
  if (auto n = root.optional_object("noise")) {
    n->choice<int>("distribution", std::array<Choice<int>, 1>{{{"lognormal", 0}}});
    p.noise = ComputeNoise{.sigma = n->number("sigma", {0, 1}),
                           .seed = static_cast<std::uint64_t>(n->integer_or("seed", 1, {0, std::int64_t{1} << 62}))};
    n->finish();
  }
  // a port below a thousandth of its rate is down (a failure: see goodput), not degraded
  constexpr NumberRange kFraction{1e-3, 1};
  read_each(root, "degraded_links", diagnostics, [&](Reader& r) {
    DegradedNics d;
    read_ranks(r, "nic_of_rank", "one NIC", d);
    d.bandwidth_fraction = r.number("bandwidth_fraction", kFraction);
    p.degraded_links.push_back(d);
  });
  root.finish();
  diagnostics.throw_if_any(source);
  return p;
}

PerturbSpec load_perturb_spec(const std::string& path) {
  return read_perturb_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
