// Hostile specs: every value of every shipped topology and workload replaced by every wrong type,
// and files far too large. The readers must answer each with a SpecError or a valid spec.
#include <filesystem>
#include <fstream>

#include <set>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "common/paths.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/launch_config.hpp"
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

// A value of another kind than the original (a string for a number, a list for an object, ...):
// no reader may take it. Null is left out: it means "absent", which optional keys allow; so is a
// number for a string, which quantities take as a plain SI value ("300 GB/s" or 3e11).
bool changes_kind(const json& original, const json& wrong) {
  if (wrong.is_null()) return false;
  if (original.is_number() && wrong.is_number()) return false;
  if (original.is_string() && wrong.is_number()) return false;
  return original.type() != wrong.type();
}

// Whether an error names the mutated value or something inside it.
bool names(const SpecError& e, const json::json_pointer& p) {
  const auto at = p.to_string();
  for (const auto& d : e.diagnostics())
    if (d.pointer == at || d.pointer.rfind(at + "/", 0) == 0) return true;
  return false;
}

// Replaces every value of `original` by each wrong value and checks the outcome of each: a valid
// spec or a SpecError with a message; a value of the wrong kind is rejected with an error at its
// own pointer. Returns (rejected, accepted).
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
    // "sources" holds free-form citations; its own shape is checked, its strings are not read
    if (p.empty() || p.to_string().rfind("/sources", 0) == 0) continue;
    for (const auto& wrong : kWrong) {
      json j = original;
      j[p] = wrong;
      CAPTURE(p.to_string());
      CAPTURE(wrong.dump().substr(0, 40));
      try {
        read(j);
        ++accepted;
        CHECK_FALSE(changes_kind(original[p], wrong));
      } catch (const SpecError& e) {
        ++rejected;
        REQUIRE_FALSE(e.diagnostics().empty());
        CHECK_FALSE(e.diagnostics().front().message.empty());
        if (changes_kind(original[p], wrong)) CHECK(names(e, p));
      }
    }
  }
  return {rejected, accepted};
}

// Every file of a shipped folder, mutated everywhere; returns how many specs were rejected.
template <class Read>
int mutate_folder(const std::string& folder, Read read) {
  int rejected = 0;
  for (const auto& path : test::shipped(folder)) {
    CAPTURE(path);
    const auto [r, a] = mutate_everywhere(spec::load_json_file(path), read);
    rejected += r;
    CHECK(r > a);  // most wrong values are wrong
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

TEST_CASE("every value of the shipped Hugging Face config, replaced by every wrong type: SpecError or valid") {
  // keys that do not change the cost are never read, whatever they hold; the ones the llama family
  // reads reject a value of the wrong kind at their own pointer
  const auto config = spec::load_json_file(test::source_path("workloads/hf/llama-3.1-8b/config.json"));
  const std::set<std::string> read{
      "/hidden_size", "/intermediate_size",   "/num_attention_heads", "/num_hidden_layers", "/num_key_value_heads",
      "/vocab_size",  "/tie_word_embeddings", "/attention_bias",      "/mlp_bias",          "/model_type"};
  const std::vector<json> wrong = {true, -1, 0, 1e308, "x", json::array(), json::object(), std::string(4096, 'z')};
  int rejected = 0;
  for (const auto& item : config.items()) {
    const std::string key = item.key();
    const json& value = item.value();
    for (const auto& w : wrong) {
      json j = config;
      j[key] = w;
      CAPTURE(key);
      CAPTURE(w.dump().substr(0, 40));
      std::vector<std::string> warnings;
      try {
        (void)spec::read_hf_model(j, "config.json", warnings);
        CHECK_FALSE((read.contains("/" + key) && changes_kind(value, w)));
      } catch (const SpecError& e) {
        ++rejected;
        CHECK(names(e, json::json_pointer("/" + key)));
      }
    }
  }
  MESSAGE(rejected << " hostile configs rejected");
  CHECK(rejected > 0);
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
  const test::ScratchDir scratch("trainsim-hostile");
  const auto path = scratch.file("100mb.json");
  {
    std::ofstream out(path);
    out << "{\"name\": \"" << std::string(100'000'000, 'a') << "\"}";
  }
  CHECK_THROWS_WITH_AS(spec::load_json_file(path), doctest::Contains("64 MiB"), SpecError);
}

TEST_CASE("a spec of many small objects parses, and its duplicate keys and depth are still checked") {
  // the shape that made the callback parser quadratic (docs/performance.md "Reading specs")
  std::string text = "{\"tp\": 8";
  for (int i = 0; i < 20000; ++i) text += fmt::format(", \"x{}\": {{\"a\": {}}}", i, i);
  const auto j = spec::parse_json_text(text + "}", "many.json");
  CHECK(j.size() == 20001);
  CHECK(j.at("x19999").at("a") == 19999);
  CHECK_THROWS_WITH_AS(spec::parse_json_text(text + ", \"x7\": {\"b\": 1}}", "many.json"),
                       "many.json: /x7: duplicate key", SpecError);
  CHECK_THROWS_WITH_AS(spec::parse_json_text("{\"a\": {\"b\": [1, {\"c\": 2, \"c\": 3}]}}", "d.json"),
                       "d.json: /a/b/1/c: duplicate key", SpecError);
  CHECK_THROWS_WITH_AS(spec::parse_json_text(std::string(100, '[') + std::string(100, ']'), "deep.json"),
                       doctest::Contains("nested deeper than 64 levels"), SpecError);
  CHECK_THROWS_WITH_AS(spec::parse_json_text("{\"a\": [1, 2}", "bad.json"), doctest::Contains("invalid JSON at line 1"),
                       SpecError);
}

TEST_CASE("a TorchTitan TOML nested or dotted without bound is refused before the TOML parser recurses") {
  const std::string deep = "[training]\nx = " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml(deep, "deep.toml"),
                       "deep.toml: invalid TOML at line 2: arrays and inline tables nested deeper than 64 levels",
                       SpecError);
  std::string dotted = "a";
  for (int i = 0; i < 100000; ++i) dotted += ".a";
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml(dotted + " = 1\n", "dotted.toml"),
                       "dotted.toml: invalid TOML at line 1: a key of more than 64 dotted parts", SpecError);
  // brackets and dots inside strings and comments are not structure
  const std::string quoted = "[job]\ndescription = \"" + std::string(200, '[') + std::string(200, '.') + "\" # " +
                             std::string(200, '{') + "\n";
  CHECK_NOTHROW((void)spec::read_torchtitan_toml(quoted, "quoted.toml"));
}

// toml11 3.7 read past its buffer reporting a literal string that is not UTF-8 (found by fuzzing;
// tests/fuzz/regressions/launch/ keeps the input): such a document is refused before it parses.
TEST_CASE("a TorchTitan TOML that is not UTF-8 is refused with its line, before the TOML parser reads it") {
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml("[job]\ndescription = 'x\xff'\n", "bytes.toml"),
                       "bytes.toml: invalid TOML at line 2, byte 17 of the line: 0xff does not begin a UTF-8 "
                       "character (a TOML document is UTF-8)",
                       SpecError);
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml("a = '''\xed\xa0\x80'''\n", "surrogate.toml"),
                       doctest::Contains("line 1, byte 8 of the line: 0xed"), SpecError);
  // UTF-8 beyond ASCII in strings and comments is read
  CHECK_NOTHROW((void)spec::read_torchtitan_toml("[job] # \xe2\x82\xac\ndescription = 'caf\xc3\xa9'\n", "ok.toml"));
}
