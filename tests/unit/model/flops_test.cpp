#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/model/flops.hpp"

using namespace trainsim;
using namespace trainsim::model;

TEST_CASE("model FLOPs of a GPT equal the Megatron-LM closed form exactly") {
  for (const auto* name :
       {"gpt3-175b", "megatron2021-1.7b", "megatron2021-529.6b", "korthikanti-22b", "megatron2020-8b"}) {
    CAPTURE(name);
    const auto w = spec::load_workload_spec(test::workload(name));
    const auto job = test::make_job("dgx-a100-superpod", w, "gpus=1");
    CHECK(step_flops(job).model == doctest::Approx(megatron_formula_flops(w, false)).epsilon(1e-12));
  }
}

TEST_CASE("full recomputation adds one forward pass of the layers: Megatron's 96·…(V/16lh) form") {
  const auto w = spec::load_workload_spec(test::workload("gpt3-175b"));
  const auto job = test::make_job("dgx-a100-superpod", w, "tp=8,pp=8,gpus=64,recompute=full");
  const auto f = step_flops(job);
  CHECK(f.hardware == doctest::Approx(megatron_formula_flops(w, true)).epsilon(1e-12));
  CHECK(f.model == doctest::Approx(megatron_formula_flops(w, false)).epsilon(1e-12));
}

TEST_CASE("selective recomputation repeats only the attention core forward") {
  const auto w = spec::load_workload_spec(test::workload("gpt3-175b"));
  const auto job = test::make_job("dgx-a100-superpod", w, "tp=8,pp=8,gpus=64,recompute=selective");
  const auto f = step_flops(job);
  const double B = 1536, s = 2048, l = 96, h = 12288;
  CHECK(f.hardware - f.model == doctest::Approx(4 * B * s * s * h * l).epsilon(1e-12));
}

TEST_CASE("the Megatron formula reproduces the published TFLOP/s of reference/megatron2020_tp_scaling.json") {
  // The reference's note: 96·B·s·l·h²(1 + s/6h + V/16lh) over the iteration time gives 149.8 TFLOP/s
  // for 1B on 1 GPU. Check every row: formula / (gpus · time) against the table.
  const auto ref = test::load_reference("megatron2020_tp_scaling.json");
  for (const auto& row : ref["tensor_parallel_rows"]) {
    const std::string model = row["model"];
    CAPTURE(model);
    const auto w = spec::load_workload_spec(
        test::workload("megatron2020-" + std::string(1, static_cast<char>(std::tolower(model[0]))) + "b"));
    const double tflops =
        megatron_formula_flops(w, true) / (row["gpus"].get<double>() * row["iteration_ms"].get<double>() * 1e-3) / 1e12;
    CHECK(tflops == doctest::Approx(row["tflops_per_gpu"].get<double>()).epsilon(0.005));
  }
}

TEST_CASE("GQA and SwiGLU change the FLOPs the way their shapes say") {
  const auto w = spec::load_workload_spec(test::workload("llama3-8b"));
  const auto job = test::make_job("dgx-h100-superpod", w, "gpus=1");
  const double B = 512, s = 8192, l = 32, h = 4096, kv = 1024, f = 14336, V = 128256;
  // per token and layer forward: Q and O (2·2h²), K and V (2·2·h·kv), SwiGLU (3·2·h·f), attention (4·s·h)
  const double layer = 2 * (2 * h * h + 2 * h * kv + 3 * h * f) + 4 * s * h;
  const double expected = 3 * B * s * (l * layer + 2 * h * V);
  CHECK(step_flops(job).model == doctest::Approx(expected).epsilon(1e-12));
  // PaLM's count (Chowdhery et al. 2022, appendix B): 6N for the weights a token passes through
  // (all but the input embedding) plus 12·l·s·h for non-causal attention
  const double non_embedding = 8.03e9 - V * h;
  CHECK(step_flops(job).per_token == doctest::Approx(6 * non_embedding + 12 * l * s * h).epsilon(1e-3));
}

TEST_CASE("MoE FLOPs count top_k experts per token, not the capacity padding") {
  const auto w = spec::load_workload_spec(test::workload("mixtral-8x7b"));
  auto padded = w;
  padded.model.moe->capacity_factor = 1.5;
  const auto a = step_flops(test::make_job("dgx-h100-superpod", w, "ep=8,gpus=8"));
  const auto b = step_flops(test::make_job("dgx-h100-superpod", padded, "ep=8,gpus=8"));
  CHECK(a.model == doctest::Approx(b.model).epsilon(1e-12));
  const double B = 1024, s = 4096, l = 32, h = 4096, kv = 1024, f = 14336, V = 32000, E = 8;
  const double layer = 2 * (2 * h * h + 2 * h * kv + 2 * 3 * h * f + h * E) + 4 * s * h;
  CHECK(a.model == doctest::Approx(3 * B * s * (l * layer + 2 * h * V)).epsilon(1e-12));
}
