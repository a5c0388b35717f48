#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/jobs.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/layer_ops.hpp"

using namespace trainsim;
using namespace trainsim::model;

namespace {
const Op& find(const std::vector<Op>& ops, std::string_view name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return ops.front();
}
}  // namespace

TEST_CASE("Megatron tensor parallelism splits the GEMMs' columns and rows") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=64,mb=2");
  const auto ops = layer_ops(job.workload.model, gpu_layer_shape(job), false);
  const std::int64_t tokens = 2 * 2048;
  CHECK(std::get<Gemm>(find(ops, "qkv").shape) ==
        Gemm{.m = tokens, .n = 3 * 12288 / 8, .k = 12288, .linear = true, .bias = true});
  CHECK(std::get<Gemm>(find(ops, "out_proj").shape) ==
        Gemm{.m = tokens, .n = 12288, .k = 12288 / 8, .linear = true, .bias = true});
  CHECK(std::get<Gemm>(find(ops, "fc1").shape) ==
        Gemm{.m = tokens, .n = 4 * 12288 / 8, .k = 12288, .linear = true, .bias = true});
  CHECK(std::get<Gemm>(find(ops, "fc2").shape) ==
        Gemm{.m = tokens, .n = 12288, .k = 4 * 12288 / 8, .linear = true, .bias = true});
  const auto core = std::get<AttentionCore>(find(ops, "attention").shape);
  CHECK(core.heads == 12);
  CHECK(core.q_len == 2048);
}

TEST_CASE("a layer's FLOPs on one GPU are the whole layer's divided by tp") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,gpus=8");
  auto whole_shape = gpu_layer_shape(job);
  whole_shape.tp = 1;
  const auto part = sum_flops(layer_ops(job.workload.model, gpu_layer_shape(job), false)).total();
  const auto whole = sum_flops(layer_ops(job.workload.model, whole_shape, false)).total();
  CHECK(part * 8 == doctest::Approx(whole).epsilon(1e-12));
}

TEST_CASE("the backward splits into activation (B) and weight (W) gradients of equal size for GEMMs") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "gpus=1");
  for (const auto& op : layer_ops(job.workload.model, gpu_layer_shape(job), false)) {
    if (op_class(op.shape) != OpClass::Gemm) continue;
    CHECK(op.bwd_data_flops == op.fwd_flops);
    CHECK(op.bwd_weight_flops == op.fwd_flops);
  }
  const auto ops = layer_ops(job.workload.model, gpu_layer_shape(job), false);
  const auto& attn = find(ops, "attention");
  CHECK(attn.bwd_data_flops == 2 * attn.fwd_flops);
  CHECK(attn.bwd_weight_flops == 0);
}

TEST_CASE("sequence parallelism divides the element-wise work by tp") {
  const auto off = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,gpus=8");
  const auto on = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,gpus=8,sp=on");
  const auto a = find(layer_ops(off.workload.model, gpu_layer_shape(off), false), "norm1");
  const auto b = find(layer_ops(on.workload.model, gpu_layer_shape(on), false), "norm1");
  CHECK(a.fwd_bytes == doctest::Approx(8 * b.fwd_bytes));
}

TEST_CASE("context parallelism gives each rank a slice of queries against all keys") {
  const auto job = test::make_job("h100-roce-llama3", "llama3-405b-128k",
                                  "tp=8,cp=16,pp=16,gpus=16384,mb=1,first_stage_layers=7,last_stage_layers=7");
  const auto ops = layer_ops(job.workload.model, gpu_layer_shape(job), false);
  const auto core = std::get<AttentionCore>(find(ops, "attention").shape);
  CHECK(core.q_len == 131072 / 16);
  CHECK(core.kv_len == 131072);
  CHECK(core.heads == 16);
}

TEST_CASE("the scale-up domains a token's experts lie in: DeepEP's network copies, against a Monte Carlo") {
  // routing drawn at random: the token's group_top_k groups uniformly, then its top_k experts
  // uniformly among theirs; experts spread over the domains in order (a group on consecutive ranks)
  std::mt19937_64 rng(7);
  // the first `k` of `v` drawn uniformly without replacement (a partial Fisher-Yates shuffle)
  const auto draw = [&](std::vector<int>& v, int k) {
    for (int i = 0; i < k; ++i) {
      std::uniform_int_distribution<std::size_t> pick(static_cast<std::size_t>(i), v.size() - 1);
      std::swap(v[static_cast<std::size_t>(i)], v[pick(rng)]);
    }
  };
  const auto simulated = [&](spec::MoeSpec moe, int domains) {
    const int per_group = moe.experts / moe.groups;
    const int per_domain = moe.experts / domains;
    double total = 0;
    constexpr int kSamples = 50000;
    std::vector<int> groups(static_cast<std::size_t>(moe.groups));
    std::iota(groups.begin(), groups.end(), 0);
    std::vector<int> candidates;
    std::set<int> hit;
    for (int n = 0; n < kSamples; ++n) {
      draw(groups, moe.group_top_k);
      candidates.clear();
      for (int g = 0; g < moe.group_top_k; ++g)
        for (int e = 0; e < per_group; ++e) candidates.push_back(groups[static_cast<std::size_t>(g)] * per_group + e);
      draw(candidates, moe.top_k);
      hit.clear();
      for (int k = 0; k < moe.top_k; ++k) hit.insert(candidates[static_cast<std::size_t>(k)] / per_domain);
      total += static_cast<double>(hit.size());
    }
    return total / kSamples;
  };
  spec::MoeSpec v3{.experts = 256, .top_k = 8, .expert_ffn_hidden = 2048, .groups = 8, .group_top_k = 4};
  spec::MoeSpec free = v3;
  free.groups = free.group_top_k = 1;
  for (const int domains : {2, 4, 8, 16, 32}) {
    CAPTURE(domains);
    CHECK(expected_domains_per_token(free, domains) == doctest::Approx(simulated(free, domains)).epsilon(0.01));
    CHECK(expected_domains_per_token(v3, domains) == doctest::Approx(simulated(v3, domains)).epsilon(0.01));
    // DeepSeek-V3's node-limited routing: at most 4 groups' domains, never more than unlimited
    CHECK(expected_domains_per_token(v3, domains) <= expected_domains_per_token(free, domains) + 1e-12);
  }
  // one expert per token reaches one domain; one domain is all; 8 groups on 8 domains reach at most 4
  free.top_k = 1;
  CHECK(expected_domains_per_token(free, 16) == doctest::Approx(1.0));
  CHECK(expected_domains_per_token(v3, 1) == 1.0);
  CHECK(expected_domains_per_token(v3, 8) < 4.0);
}

TEST_CASE("biases on every linear layer of a GPT block, on q, k and v alone for Qwen2's") {
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8");
  auto m = job.workload.model;
  m.bias = false;
  m.qkv_bias = true;
  const auto ops = layer_ops(m, gpu_layer_shape(job), false);
  CHECK(std::get<Gemm>(find(ops, "qkv").shape).bias);
  for (const auto* name : {"out_proj", "fc1", "fc2"}) CHECK_FALSE(std::get<Gemm>(find(ops, name).shape).bias);
  m.bias = true;
  for (const auto* name : {"qkv", "out_proj", "fc1", "fc2"})
    CHECK(std::get<Gemm>(find(layer_ops(m, gpu_layer_shape(job), false), name).shape).bias);
}
