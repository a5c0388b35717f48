#include <doctest/doctest.h>

#include "trainsim/spec/reader.hpp"

using namespace trainsim;
using namespace trainsim::spec;
using nlohmann::json;

TEST_CASE("the reader records the JSON pointer of every value it rejects") {
  const json j = json::parse(R"({"a": {"b": "x", "c": -1}})");
  Diagnostics d;
  Reader root(j, "", d);
  Reader a = root.object("a");
  a.integer("b", {1, 10});
  a.integer("c", {1, 10});
  a.integer("missing", {1, 10});
  REQUIRE(d.items().size() == 3);
  CHECK(d.items()[0].pointer == "/a/b");
  CHECK(d.items()[0].message == "expected an integer in [1, 10], got \"x\"");
  CHECK(d.items()[1].pointer == "/a/c");
  CHECK(d.items()[1].message == "-1 is out of range; expected an integer in [1, 10]");
  CHECK(d.items()[2].pointer == "/a/missing");
  CHECK(d.items()[2].message == "missing; expected an integer in [1, 10]");
}

TEST_CASE("integral floats are integers, fractional ones are not") {
  const json j = json::parse(R"({"a": 8.0, "b": 1e3, "c": 8.5, "d": 1e30, "e": 18446744073709551615})");
  Diagnostics d;
  Reader r(j, "", d);
  CHECK(r.integer("a", {1, 100}) == 8);
  CHECK(r.integer("b", {1, 1000}) == 1000);
  r.integer("c", {1, 100});
  r.integer("d", {1, 100});
  r.integer("e", {1, 100});
  REQUIRE(d.items().size() == 3);
  CHECK(d.items()[0].message == "expected an integer in [1, 100], got 8.5");
  CHECK(d.items()[1].message == "1e+30 is out of range; expected an integer in [1, 100]");
  CHECK(d.items()[2].message == "18446744073709551615 is out of range; expected an integer in [1, 100]");
}

TEST_CASE("unknown keys are errors with a did-you-mean hint") {
  const json j = json::parse(R"({"nodes": 2, "ndoes": 3, "zzz": 1})");
  Diagnostics d;
  Reader r(j, "", d);
  r.integer("nodes", {1, 10});
  r.finish();
  REQUIRE(d.items().size() == 2);
  CHECK(d.items()[0].pointer == "/ndoes");
  CHECK(d.items()[0].message == "unknown key \"ndoes\" (did you mean \"nodes\"?)");
  CHECK(d.items()[1].message == "unknown key \"zzz\"; valid keys: nodes");
}

TEST_CASE("choices list the valid names and suggest the closest") {
  enum class K { A, B };
  constexpr std::array<Choice<K>, 2> kChoices{{{"leaf_spine", K::A}, {"torus", K::B}}};
  const json j = json::parse(R"({"kind": "tours"})");
  Diagnostics d;
  Reader r(j, "", d);
  r.choice<K>("kind", kChoices);
  REQUIRE(d.items().size() == 1);
  CHECK(d.items()[0].message == "\"tours\" is not valid; expected one of: leaf_spine, torus (did you mean \"torus\"?)");
}

TEST_CASE("pointers escape '/' and '~' as RFC 6901 says") {
  CHECK(pointer_join("/a", "b/c~d") == "/a/b~1c~0d");
}

TEST_CASE("JSON syntax errors name line and column") {
  CHECK_THROWS_WITH_AS(parse_json_text("{\n  \"a\": 1,\n}", "x.json"),
                       "x.json: invalid JSON at line 3, column 1: syntax error while parsing object key - unexpected "
                       "'}'; expected string literal",
                       SpecError);
}

TEST_CASE("duplicate keys are rejected with their pointer") {
  CHECK_THROWS_WITH_AS(parse_json_text(R"({"a": {"b": 1, "b": 2}})", "x.json"), "x.json: /a/b: duplicate key",
                       SpecError);
  CHECK_THROWS_WITH_AS(parse_json_text(R"({"a": [1, {"c": 1, "c": 1}]})", "x.json"), "x.json: /a/1/c: duplicate key",
                       SpecError);
}

TEST_CASE("deeply nested JSON is rejected without recursion") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_json_text(deep, "deep.json");
    FAIL("expected a SpecError");
  } catch (const SpecError& e) {
    const std::string what = e.what();
    CHECK(what.starts_with("deep.json: /0/0/0/"));
    CHECK(what.ends_with(": invalid JSON: nested deeper than 64 levels"));
  }
}

TEST_CASE("all errors come together, sorted by pointer") {
  const SpecError e("f.json", {{"/b", "second"}, {"/a", "first"}});
  CHECK(std::string(e.what()) == "f.json: /a: first\nf.json: /b: second");
}

TEST_CASE("hints match case first, count a swap of letters as one slip, and suggest nothing far off") {
  const std::vector<std::string> keys{"tp", "cp", "pp", "nodes", "schedule"};
  CHECK(spec::closest_match("TP", keys) == "tp");
  CHECK(spec::closest_match("ndoes", keys) == "nodes");
  CHECK(spec::closest_match("schedlue", keys) == "schedule");
  CHECK(spec::closest_match("fp8", keys).empty());  // not a misspelt "cp"
  CHECK(spec::closest_match("x", keys).empty());
}
