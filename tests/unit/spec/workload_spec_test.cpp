#include <doctest/doctest.h>

#include "common/paths.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/workload_spec.hpp"

using namespace trainsim;
using namespace trainsim::spec;
using nlohmann::json;

namespace {

json gpt() {
  return json::parse(R"({
    "name": "gpt",
    "model": {"kind": "transformer", "layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96,
              "ffn_hidden": 49152, "vocab": 51200, "mlp": "gelu", "moe": null},
    "training": {"seq_len": 2048, "global_batch": 1536, "dtype": "bf16", "optimizer": "adam"}
  })");
}

std::string workload_error(const json& j) {
  try {
    read_workload_spec(j, "w.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("the docs/cli.md example workload reads with Megatron GPT defaults") {
  const auto w = read_workload_spec(gpt(), "w.json");
  CHECK(w.model.head_dim == 128);
  CHECK(w.model.bias);
  CHECK(w.model.tied_embeddings);
  CHECK(w.model.dropout);
  CHECK(!w.model.moe);
  CHECK(w.training.dtype == Dtype::Bf16);
}

TEST_CASE("kv_heads must divide heads") {
  auto j = gpt();
  j["model"]["kv_heads"] = 7;
  CHECK(workload_error(j) == "w.json: /model/kv_heads: 7 does not divide heads (96)");
}

TEST_CASE("heads must divide hidden unless head_dim is given") {
  auto j = gpt();
  j["model"]["heads"] = 100;
  j["model"]["kv_heads"] = 100;
  CHECK(workload_error(j) ==
        "w.json: /model/heads: 100 does not divide hidden (12288); give head_dim to use another head size");
  j["model"]["head_dim"] = 128;
  CHECK(workload_error(j) == "no error");
}

TEST_CASE("wrong types everywhere are reported at once") {
  auto j = gpt();
  j["model"]["layers"] = "96";
  j["model"]["mlp"] = "relu";
  j["training"]["dtype"] = 16;
  j["training"]["global_batch"] = 0;
  CHECK(workload_error(j) ==
        "w.json: /model/layers: expected an integer in [1, 10000], got \"96\"\n"
        "w.json: /model/mlp: \"relu\" is not valid; expected one of: gelu, swiglu (did you mean \"gelu\"?)\n"
        "w.json: /training/dtype: 16 is not valid; expected one of: bf16, fp16, fp32, fp8\n"
        "w.json: /training/global_batch: 0 is out of range; expected an integer in [1, 1073741824]");
}

TEST_CASE("MoE fields are checked against each other") {
  auto j = gpt();
  j["model"]["moe"] = json::parse(R"({"experts": 8, "top_k": 9, "expert_ffn_hidden": 1024})");
  CHECK(workload_error(j) == "w.json: /model/moe/top_k: 9 exceeds the number of experts (8)");
}

TEST_CASE("a top-level value that is not an object is rejected") {
  CHECK(workload_error(json::array()) == "w.json: expected a JSON object, got a list");
}

TEST_CASE("every shipped workload reads without error") {
  const auto files = test::shipped("workloads");
  CHECK(files.size() >= 21);
  for (const auto& path : files) {
    CAPTURE(path);
    CHECK_NOTHROW(load_workload_spec(path));
  }
}

TEST_CASE("a model whose every layer is an expert layer needs no dense ffn_hidden") {
  auto j = gpt();
  j["model"].erase("ffn_hidden");
  j["model"]["moe"] = {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 4096}};
  CHECK(read_workload_spec(j, "w.json").model.ffn_hidden == 0);
  // with dense layers it does
  j["model"]["moe"]["dense_layers"] = 2;
  CHECK(workload_error(j) == "w.json: /model/ffn_hidden: missing; expected an integer in [1, 4194304]");
  // and a dense model always does
  auto dense = gpt();
  dense["model"].erase("ffn_hidden");
  CHECK(workload_error(dense) == "w.json: /model/ffn_hidden: missing; expected an integer in [1, 4194304]");
}
