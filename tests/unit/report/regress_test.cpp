#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/paths.hpp"
#include "trainsim/report/regress.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
namespace fs = std::filesystem;

namespace {

// A scratch checkout: <tmp>/results/ holding cases, with topologies/ beside it.
struct Scratch {
  fs::path root = fs::temp_directory_path() / "trainsim-regress-test";
  Scratch() {
    fs::remove_all(root);
    fs::create_directories(root / "results");
    fs::create_directories(root / "topologies");
    fs::copy_file(test::topology("dgx-a100-superpod"), root / "topologies" / "dgx-a100-superpod.json");
  }
  ~Scratch() { fs::remove_all(root); }
  void write(const std::string& name, const nlohmann::json& j) const {
    std::ofstream(root / "results" / name) << j.dump(2);
  }
  std::string results() const { return (root / "results").string(); }
};

nlohmann::json collective_case(double predicted) {
  return {
      {"name", "allreduce-1gib"},
      {"source", "test: a measured value"},
      {"collective",
       {{"topology", "topologies/dgx-a100-superpod.json"}, {"op", "all_reduce"}, {"group", "0-7"}, {"bytes", "1 GiB"}}},
      {"expect", {{"/busbw_Bps", {{"measured", 228.1e9}, {"tolerance", 0.15}, {"predicted", predicted}}}}}};
}

}  // namespace

TEST_CASE("regress recomputes a case, updates its prediction and then passes") {
  Scratch s;
  s.write("case.json", collective_case(1.0));
  auto results = report::run_regression(s.results(), {.update = true, .threads = 1});
  CHECK(report::all_passed(results));
  results = report::run_regression(s.results(), {.threads = 1});
  REQUIRE(results.size() == 1);
  REQUIRE(results[0].checks.size() == 2);
  CHECK(results[0].checks[0].kind == "measured");
  CHECK(results[0].checks[1].kind == "predicted");
  CHECK(report::all_passed(results));
  // --update rewrote the prediction only
  const auto updated = nlohmann::json::parse(std::ifstream(s.root / "results" / "case.json"));
  CHECK(updated["expect"]["/busbw_Bps"]["measured"] == 228.1e9);
  CHECK(updated["expect"]["/busbw_Bps"]["predicted"].get<double>() == doctest::Approx(229.087e9).epsilon(1e-3));
}

TEST_CASE("an edited expectation fails with a clear line") {
  Scratch s;
  s.write("case.json", collective_case(200e9));
  const auto results = report::run_regression(s.results(), {.threads = 1});
  CHECK_FALSE(report::all_passed(results));
  const auto table = report::regress_table(results);
  CHECK(table.find("allreduce-1gib") != std::string::npos);
  CHECK(table.find("FAIL") != std::string::npos);
  CHECK(table.find("1 passed, 1 failed") != std::string::npos);
}

TEST_CASE("a malformed case names its file and JSON path") {
  Scratch s;
  auto bad = collective_case(1.0);
  bad["expect"]["/busbw_Bps"]["tolerence"] = 0.1;
  s.write("bad.json", bad);
  CHECK_THROWS_WITH_AS(
      report::run_regression(s.results(), {.threads = 1}),
      doctest::Contains("/expect/~1busbw_Bps/tolerence: unknown key \"tolerence\" (did you mean \"tolerance\"?)"),
      SpecError);
}

TEST_CASE("a case asking for a field the report lacks is an error") {
  Scratch s;
  auto bad = collective_case(1.0);
  bad["expect"]["/nonsense"] = {{"measured", 1.0}, {"tolerance", 0.1}};
  s.write("bad.json", bad);
  CHECK_THROWS_WITH_AS(report::run_regression(s.results(), {.threads = 1}),
                       doctest::Contains("the report has no number at /nonsense"), SpecError);
}
