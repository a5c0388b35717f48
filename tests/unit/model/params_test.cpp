#include <doctest/doctest.h>

#include <cmath>

#include "common/jobs.hpp"
#include "trainsim/model/params.hpp"

using namespace trainsim;
using namespace trainsim::model;

namespace {
double total_params(const std::string& workload_name) {
  const auto w = spec::load_workload_spec(test::workload(workload_name));
  return count_params(w.model, w.training.seq_len).total();
}
}  // namespace

TEST_CASE("GPT-3 175B has 174.6B parameters (Megatron-LM's 12lh²(1 + 13/12h + (V+s)/12lh))") {
  const double p = total_params("gpt3-175b");
  CHECK(p == doctest::Approx(174.6e9).epsilon(0.005));
  // the closed form, term by term
  const double l = 96, h = 12288, V = 51200, s = 2048;
  CHECK(p == doctest::Approx(12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h).epsilon(1e-12));
}

TEST_CASE("Llama 3 405B has 405B parameters") {
  CHECK(total_params("llama3-405b") == doctest::Approx(405e9).epsilon(0.005));
  CHECK(total_params("llama3-70b") == doctest::Approx(70.6e9).epsilon(0.005));
  CHECK(total_params("llama3-8b") == doctest::Approx(8.03e9).epsilon(0.005));
}

TEST_CASE("Mixtral 8x7B has 46.7B parameters, 12.9B active") {
  const auto w = spec::load_workload_spec(test::workload("mixtral-8x7b"));
  const auto c = count_params(w.model, w.training.seq_len);
  // Jiang et al. 2024: 47B total ("46.7B"), 13B active per token ("12.9B")
  CHECK(c.total() == doctest::Approx(46.7e9).epsilon(0.005));
  CHECK(c.active() == doctest::Approx(12.9e9).epsilon(0.01));
}

TEST_CASE("Qwen3-235B-A22B has 235B parameters, 22B active") {
  // Qwen Team 2025, the Qwen3 Technical Report's Table 2: 235B total, 22B activated (its per-head
  // query and key norms, 2·128 per layer, aside)
  const auto w = spec::load_workload_spec(test::workload("qwen3-235b-a22b"));
  const auto c = count_params(w.model, w.training.seq_len);
  CHECK(c.total() == doctest::Approx(235e9).epsilon(0.005));
  CHECK(c.active() == doctest::Approx(22e9).epsilon(0.02));
}

TEST_CASE("published parameter counts of the reference configurations") {
  // reference/megatron2021_table1.json lists params_b rounded to one decimal
  const auto table1 = test::load_reference("megatron2021_table1.json");
  for (const auto& row : table1["rows"]) {
    const double params_b = row["params_b"].get<double>();
    const auto name = fmt::format("megatron2021-{}b", row["params_b"].get<double>());
    CAPTURE(name);
    CHECK(std::round(total_params(name) / 1e8) / 10 == doctest::Approx(params_b));
  }
  // reference/megatron2020_tp_scaling.json lists params_b to two decimals
  const auto tp = test::load_reference("megatron2020_tp_scaling.json");
  for (const auto& [model, spec] : tp["models"].items()) {
    const auto name = "megatron2020-" + std::string(1, static_cast<char>(std::tolower(model[0])));
    CAPTURE(name);
    CHECK(std::round(total_params(name + "b") / 1e7) / 100 == doctest::Approx(spec["params_b"].get<double>()));
  }
}

TEST_CASE("per-GPU parameters under tp and pp add up to the model") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024");
  const auto stages = stage_params(job);
  REQUIRE(stages.size() == 8);
  double sum = 0;
  for (const auto& s : stages) sum += s.total() * 8;  // eight tp ranks per stage
  const double total = count_params(job.workload.model, 2048).total();
  // replicated norms and row-parallel biases are held by every tp rank, and the last stage keeps
  // a copy of the tied embedding: the sum exceeds the model by exactly those
  const double h = 12288;
  const double replicated_per_layer = 7 * (2 * h + 2 * h + h + h);  // 2 norms + 2 row-parallel biases, 7 extra copies
  const double extra = 96 * replicated_per_layer + 2048 * h * 7 + 51200 * h + 2 * h * 7;
  CHECK(sum == doctest::Approx(total + extra).epsilon(1e-9));
  CHECK(stages[1].total() == doctest::Approx(12 * (12 * h * h / 8 + 7 * h / 8 + 6 * h)).epsilon(1e-9));
}

TEST_CASE("experts are split over ep, then tp") {
  const auto job = test::make_job("dgx-h100-superpod", "mixtral-8x7b", "tp=2,ep=4,gpus=64");
  const auto s = stage_params(job).at(0);
  const double expert = 3.0 * 4096 * 14336;  // SwiGLU: gate, up, down
  CHECK(s.expert == doctest::Approx(32 * (8.0 / 4) * expert / 2).epsilon(1e-12));
}

TEST_CASE("a layer's parameter tensors are Megatron's modules' and add up to the layer") {
  const auto sum = [](const std::vector<ParamTensor>& ts, bool expert) {
    double s = 0;
    for (const auto& t : ts)
      if (t.expert == expert) s += t.elements;
    return s;
  };
  SUBCASE("GPT-3: two LayerNorms, QKV, the projection, fc1 and fc2, each with its bias: 12 tensors") {
    const auto w = spec::load_workload_spec(test::workload("gpt3-175b"));
    const auto ts = layer_param_tensors(w.model, false, 1, 1, 1);
    REQUIRE(ts.size() == 12);
    const double h = 12288;
    // in the forward's order: norm1 (weight, bias), QKV (3h² and 3h), out_proj (h², h), norm2, fc1, fc2
    CHECK(ts[2].elements == 3 * h * h);
    CHECK(ts[3].elements == 3 * h);
    CHECK(ts[4].elements == h * h);
    CHECK(ts[8].elements == 4 * h * h);
    CHECK(ts[10].elements == 4 * h * h);
    CHECK(ts[11].elements == h);
    CHECK(sum(ts, false) == doctest::Approx(12 * h * h + 13 * h).epsilon(1e-15));
    // six modules: a linear's weight and bias, a LayerNorm's weight and bias share theirs
    CHECK(ts[3].module == ts[2].module);
    CHECK(ts.back().module == 5);
    // under TP 8 the column-parallel biases split, the row-parallel ones and the norms stay whole
    const auto split = layer_param_tensors(w.model, false, 8, 1, 1);
    CHECK(sum(split, false) == doctest::Approx(layer_params_on_gpu(w.model, false, 8, 1, 1).dense).epsilon(1e-12));
    CHECK(split[11].elements == h);
    CHECK(split[9].elements == 4 * h / 8);
  }
  SUBCASE("Llama 3 70B: two RMSNorms, QKV, the projection, the fused gate and up, the down: 6 tensors") {
    const auto w = spec::load_workload_spec(test::workload("llama3-70b"));
    const auto ts = layer_param_tensors(w.model, false, 4, 1, 1);
    CHECK(ts.size() == 6);
    CHECK(sum(ts, false) == doctest::Approx(layer_params_on_gpu(w.model, false, 4, 1, 1).dense).epsilon(1e-12));
  }
  SUBCASE("MoE and multi-head latent attention: the experts' tensors are the expert share") {
    for (const std::string name : {"deepseek-v3-like", "mixtral-8x7b", "qwen3-30b-a3b"}) {
      CAPTURE(name);
      const auto w = spec::load_workload_spec(test::workload(name));
      const auto ts = layer_param_tensors(w.model, true, 2, 8, 1);
      const auto p = layer_params_on_gpu(w.model, true, 2, 8, 1);
      CHECK(sum(ts, false) == doctest::Approx(p.dense).epsilon(1e-12));
      CHECK(sum(ts, true) == doctest::Approx(p.expert).epsilon(1e-12));
    }
  }
}

TEST_CASE("the head holds the final norm and the vocabulary matrices Megatron keeps there") {
  // GPT-3's tied embedding: none on one stage (the embedding serves), its copy on the last of two;
  // Llama's untied output layer on one stage
  const auto matrices = [](const std::string& name, const std::string& strategy) {
    int n = 0;
    for (const auto& t : head_param_tensors(test::make_job("dgx-h100-superpod", name, strategy)))
      n += t.elements > 1e6 ? 1 : 0;
    return n;
  };
  CHECK(matrices("gpt3-175b", "tp=8,gpus=8") == 0);
  CHECK(matrices("gpt3-175b", "tp=8,pp=2,gpus=16") == 1);
  CHECK(matrices("llama3-70b", "tp=8,gpus=8") == 1);
}

TEST_CASE("the embedding's and the head's tensors add up to theirs") {
  for (const std::string name : {"gpt3-175b", "llama3-70b", "deepseek-v3-like"}) {
    for (const std::string strategy : {"tp=8,pp=1,gpus=8", "tp=2,pp=2,gpus=4,first_stage_layers=30"}) {
      CAPTURE(name);
      CAPTURE(strategy);
      const auto job = test::make_job("dgx-h100-superpod", name, strategy);
      double e = 0, h = 0;
      for (const auto& t : embedding_param_tensors(job)) e += t.elements;
      for (const auto& t : head_param_tensors(job)) h += t.elements;
      CHECK(e == doctest::Approx(embedding_params_on_gpu(job)).epsilon(1e-12));
      CHECK(h == doctest::Approx(head_params_on_gpu(job)).epsilon(1e-12));
    }
  }
}
