// Hostile specs: every value of every shipped topology and workload replaced by every wrong type,
// and files far too large. The readers must answer each with a SpecError or a valid spec.
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "common/paths.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/spec/workload_spec.hpp"
#include "trainsim/util/error.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace trainsim;

namespace {

// Every JSON pointer of a document, containers included.
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (const auto& [k, v] : j.items()) pointers(v, at / k, out);
  else if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i) pointers(j[i], at / i, out);
}

template <class Read>
std::pair<int, int> mutate_everywhere(const json& original, Read read) {
  static const std::vector<json> kWrong = {nullptr,
                                           true,
                                           -1,
                                           0,
                                           1e308,
                                           -1e308,
                                           18446744073709551615ULL,
                                           "x",
                                           "1e999 GB",
                                           json::array(),
                                           json::object(),
                                           std::string(4096, 'z')};
  std::vector<json::json_pointer> all;
  pointers(original, json::json_pointer(), all);
  int rejected = 0, accepted = 0;
  for (const auto& p : all) {
    if (p.empty()) continue;
    for (const auto& wrong : kWrong) {
      json j = original;
      j[p] = wrong;
      try {
        read(j);
        ++accepted;
      } catch (const SpecError&) {
        ++rejected;
      }
    }
  }
  return {rejected, accepted};
}

// Every file of a shipped folder, mutated everywhere; returns how many specs were rejected.
template <class Read>
int mutate_folder(const std::string& folder, Read read) {
  int rejected = 0;
  for (const auto& e : fs::directory_iterator(test::source_path(folder))) {
    CAPTURE(e.path().string());
    const auto [r, a] = mutate_everywhere(spec::load_json_file(e.path().string()), read);
    rejected += r;
    CHECK(r > a);  // most wrong types are wrong
  }
  return rejected;
}

}  // namespace

TEST_CASE("every value of every shipped topology, replaced by every wrong type: SpecError or valid") {
  const int rejected = mutate_folder("topologies", [](const json& j) { (void)spec::read_cluster_spec(j, "t.json"); });
  MESSAGE(rejected << " hostile topologies rejected");
}

TEST_CASE("every value of every shipped workload, replaced by every wrong type: SpecError or valid") {
  const int rejected = mutate_folder("workloads", [](const json& j) { (void)spec::read_workload_spec(j, "w.json"); });
  MESSAGE(rejected << " hostile workloads rejected");
}

TEST_CASE("every value of a strategy file, replaced by every wrong type: SpecError or valid") {
  const json strategy = {{"tp", 8},
                         {"pp", 4},
                         {"vpp", 2},
                         {"dp", 4},
                         {"cp", 2},
                         {"ep", 1},
                         {"sp", true},
                         {"zero", 1},
                         {"mb", 2},
                         {"gpus", 256},
                         {"schedule", "1f1b"},
                         {"recompute", "selective"},
                         {"cp_comm", "ring"},
                         {"order", "tp-cp-dp-pp"}};
  const auto [r, a] = mutate_everywhere(strategy, [](const json& j) { (void)spec::read_strategy_spec(j, "s.json"); });
  CHECK(r > a);
}

TEST_CASE("a 100 MB spec is refused by its size before it is parsed") {
  const auto path = (fs::temp_directory_path() / "trainsim-100mb.json").string();
  {
    std::ofstream out(path);
    out << "{\"name\": \"" << std::string(100'000'000, 'a') << "\"}";
  }
  CHECK_THROWS_WITH_AS(spec::load_json_file(path), doctest::Contains("64 MiB"), SpecError);
  fs::remove(path);
}
