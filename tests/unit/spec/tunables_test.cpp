// Every tunable is declared once (spec/tunables.cpp); calibration files read and write them through
// that table.
#include <doctest/doctest.h>

#include <set>

#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/tunables.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace {
// A value inside the field's range that differs from its default.
double other_value(const spec::TunableField& f, const spec::Tunables& defaults) {
  const double d = f.get(defaults);
  if (f.kind == spec::TunableKind::Share) return d / 2;
  const double up = d * 2 + 1;
  return up <= f.range.max ? up : (f.range.min + d) / 2;
}
}  // namespace

TEST_CASE("every tunable has a unique key, a meaning and a source, and its default lies in its range") {
  std::set<std::string> keys;
  const spec::Tunables defaults;
  for (const auto& f : spec::tunable_fields()) {
    const std::string key = fmt::format("{}.{}", f.section, f.key);
    CAPTURE(key);
    CHECK(keys.insert(key).second);
    CHECK_FALSE(f.meaning.empty());
    CHECK_FALSE(f.source.empty());
    const double v = f.get(defaults);
    CHECK(v <= f.range.max);
    CHECK((f.range.min_exclusive ? v > f.range.min : v >= f.range.min));
    CHECK(spec::find_tunable(f.section, f.key) == &f);
  }
}

TEST_CASE("each tunable set through the table changes exactly its own value") {
  const spec::Tunables defaults;
  for (const auto& f : spec::tunable_fields()) {
    CAPTURE(f.key);
    spec::Tunables t;
    const double v = other_value(f, defaults);
    f.set(t, v);
    CHECK(f.get(t) == doctest::Approx(v).epsilon(1e-9));
    for (const auto& other : spec::tunable_fields())
      if (&other != &f) CHECK(other.get(t) == other.get(defaults));
  }
}

TEST_CASE("a calibration file carrying every tunable reads back what it wrote") {
  spec::CalibrationSpec c;
  const spec::Tunables defaults;
  for (const auto& f : spec::tunable_fields())
    c.values.set(f.section, f.key, other_value(f, defaults));
  const auto back = spec::read_calibration_spec(nlohmann::json::parse(spec::calibration_json(c).dump()), "cal");
  REQUIRE(back.values.values.size() == spec::tunable_fields().size());
  spec::Tunables a, b;
  c.apply(a);
  back.apply(b);
  for (const auto& f : spec::tunable_fields()) {
    CAPTURE(f.key);
    CHECK(f.get(b) == doctest::Approx(f.get(a)).epsilon(1e-9));
  }
}

TEST_CASE("a misspelt tunable in a calibration file is an error with a hint") {
  const auto j = nlohmann::json::parse(R"({"kernels": {"gemm_celing": 0.8}})");
  CHECK_THROWS_WITH_AS(spec::read_calibration_spec(j, "cal.json"),
                       "cal.json: /kernels/gemm_celing: unknown key \"gemm_celing\" (did you mean \"gemm_ceiling\"?)",
                       SpecError);
}
