// The saved-tensor table and the checkpointing policies against layers derived by hand: what each
// op of a Llama layer keeps for its backward (docs/model.md "Activations as autograd saves them").
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "common/jobs.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/model/saved_tensors.hpp"

using namespace trainsim;
using namespace trainsim::model;

namespace saved_tensors_test {

// Llama 3 8B's layer: h 4096, 32 heads of 128, 8 KV heads, SwiGLU of 14336, RMSNorm, no dropout
spec::ModelSpec llama8b() {
  spec::ModelSpec m;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.mlp = spec::MlpKind::Swiglu;
  m.norm = spec::NormKind::RmsNorm;
  m.position = spec::PositionKind::Rope;
  m.dropout = false;
  m.bias = false;
  return m;
}

constexpr double h = 4096, a = 32, kv = 8, d = 128, f = 14336;
constexpr double kTokens = 2 * 8192;

LayerShape shape(int tp = 1, bool sp = false) {
  return LayerShape{.micro_batch = 2, .seq_len = 8192, .tp = tp, .sp = sp};
}

double per_token(const std::vector<SavedTensor>& t) {
  return total_bytes(t) / kTokens;
}

// What autograd saves per token of a Llama 3 8B layer with flash attention, by hand: norm inputs
// 2h each and their fp32 rstd (4); the QKV GEMM's input 2h; q 2·a·d, k and v 2·kv·d; the fp32
// log-sum-exp 4a; the output projection's input 2·a·d; the MLP's input 2h; SwiGLU's gate and up
// 2·2f; the second GEMM's input 2f
constexpr double kAutogradSaves =
    2 * (2 * h + 4) + 2 * h + 2 * a * d + 2 * 2 * kv * d + 4 * a + 2 * a * d + 2 * h + 2 * 2 * f + 2 * f;

TEST_CASE("a Llama layer with flash attention keeps, per token, what each op saves") {
  const double expected = kAutogradSaves;
  CHECK(per_token(saved_tensors(llama8b(), shape(), {}, false)) == doctest::Approx(expected).epsilon(1e-12));

  SUBCASE("eager PyTorch adds each norm's fp32 upcast and SwiGLU's silu output") {
    const SaveOptions eager{.eager = true};
    CHECK(per_token(saved_tensors(llama8b(), shape(), eager, false)) ==
          doctest::Approx(expected + 2 * 4 * h + 2 * f).epsilon(1e-12));
  }
  SUBCASE("repeat_kv keeps K and V at the query heads' count") {
    const SaveOptions repeat{.repeat_kv = true};
    CHECK(per_token(saved_tensors(llama8b(), shape(), repeat, false)) ==
          doctest::Approx(expected + 2 * 2 * (a - kv) * d).epsilon(1e-12));
  }
  SUBCASE("Transformer Engine's FP8 keeps the linear inputs as 1-byte casts") {
    // the norms' outputs and the second MLP GEMM's input at 1 byte instead of 2; the attention's
    // bf16 output stays (its own backward reads it) and the output projection adds its FP8 cast
    const SaveOptions fp8{.fp8_saved_casts = true};
    CHECK(per_token(saved_tensors(llama8b(), shape(), fp8, false)) ==
          doctest::Approx(expected - (h + h + f) + a * d).epsilon(1e-12));
  }
  SUBCASE("tensor parallelism splits the heads and the MLP; sequence parallelism also the rest") {
    const double replicated = 2 * (2 * h + 4) + 2 * h + 2 * h;
    const double split = expected - replicated;
    CHECK(per_token(saved_tensors(llama8b(), shape(8, false), {}, false)) ==
          doctest::Approx(replicated + split / 8).epsilon(1e-12));
    CHECK(per_token(saved_tensors(llama8b(), shape(8, true), {}, false)) ==
          doctest::Approx(expected / 8).epsilon(1e-12));
  }
}

// The job of a policy, on 8 H100s with FSDP (no tensor or pipeline parallelism)
spec::Job job_of(const std::string& recompute) {
  spec::WorkloadSpec w;
  w.name = "llama8b";
  w.model = llama8b();
  w.training = {.seq_len = 8192, .global_batch = 16, .dtype = spec::Dtype::Bf16, .optimizer = spec::Optimizer::Adam};
  return test::make_job("dgx-h100-superpod", w, "gpus=8,mb=2,zero=3,attention=flash,recompute=" + recompute);
}

TEST_CASE("TorchTitan's op policy keeps the block input, every other matmul's output and attention's") {
  const auto job = job_of("op");
  const auto c = layer_checkpoint(job, job.workload.model, gpu_layer_shape(job), false, false);
  // matmuls as the model issues them: wq(1) wk(2) wv(3) wo(4) w1(5) w3(6) w2(7); the odd ones kept:
  // q 2·a·d, v 2·kv·d, w1 2f, w2 2h; attention's output 2·a·d and log-sum-exp 4a; the block input 2h
  const double kept = 2 * h + 2 * a * d + 2 * kv * d + 2 * f + 2 * h + 2 * a * d + 4 * a;
  CHECK(c.kept / kTokens == doctest::Approx(kept).epsilon(1e-12));
  CHECK_FALSE(c.whole_layer);
  // the layer's backward holds what autograd saves and the kept w2 output, which it does not save
  CHECK((c.kept + c.rebuilt) / kTokens == doctest::Approx(kAutogradSaves + 2 * h).epsilon(1e-12));
  // replayed: wk (its share of the fused QKV GEMM), wo, w3 (half the first MLP GEMM), and the
  // element-wise kernels; never attention
  const auto share = [&](std::string_view op) {
    for (const auto& r : c.replayed)
      if (r.op == op) return r.share;
    return 0.0;
  };
  CHECK(share("qkv") == doctest::Approx(kv / (a + 2 * kv)));
  CHECK(share("out_proj") == 1.0);
  CHECK(share("fc1") == 0.5);
  CHECK(share("fc2") == 0.0);
  CHECK(share("attention") == 0.0);
  CHECK(share("norm1") == 1.0);
  // the recomputed FLOPs: 2·T·h·(kv·d) + 2·T·(a·d)·h + 2·T·h·f per layer
  const auto flops = step_flops(job);
  const double tokens = 16.0 * 8192;
  CHECK((flops.hardware - flops.model) / job.workload.model.layers ==
        doctest::Approx(2 * tokens * h * (kv * d) + 2 * tokens * a * d * h + 2 * tokens * h * f).epsilon(1e-9));
}

TEST_CASE("JAX's dots policy (MaxText's minimal remat) keeps the block input and every weight product's output") {
  const auto job = job_of("dots");
  const auto c = layer_checkpoint(job, job.workload.model, gpu_layer_shape(job), false, false);
  // q 2·a·d, k and v 2·kv·d each, wo's output 2h, w1 and w3 2·2f, w2's output 2h; the block input 2h
  const double kept = 2 * h + 2 * a * d + 2 * 2 * kv * d + 2 * h + 2 * 2 * f + 2 * h;
  CHECK(c.kept / kTokens == doctest::Approx(kept).epsilon(1e-12));
  CHECK_FALSE(c.whole_layer);
  // the layer's backward holds what autograd saves and the kept wo and w2 outputs, which it does not
  CHECK((c.kept + c.rebuilt) / kTokens == doctest::Approx(kAutogradSaves + 2 * h + 2 * h).epsilon(1e-12));
  const auto share = [&](std::string_view op) {
    for (const auto& r : c.replayed)
      if (r.op == op) return r.share;
    return 0.0;
  };
  // no GEMM replayed; the attention kernel and every element-wise one are
  for (const auto* gemm : {"qkv", "out_proj", "fc1", "fc2"}) CHECK(share(gemm) == 0.0);
  CHECK(share("attention") == 1.0);
  CHECK(share("norm1") == 1.0);
  SUBCASE("under TP with SP each product's output is its shard: the heads', the MLP's, or the sequence's") {
    const auto tp = test::make_job("dgx-h100-superpod", job.workload, "gpus=8,tp=8,sp=on,mb=2,recompute=dots");
    const auto shard = layer_checkpoint(tp, tp.workload.model, gpu_layer_shape(tp), false, false);
    CHECK(shard.kept / kTokens == doctest::Approx(kept / 8).epsilon(1e-12));
  }
  // the recomputed FLOPs are the attention core's forward: 4·T·s·a·d per layer (the full square,
  // as docs/model.md "FLOPs" counts it)
  const auto flops = step_flops(job);
  const double tokens = 16.0 * 8192;
  CHECK((flops.hardware - flops.model) / job.workload.model.layers ==
        doctest::Approx(4 * tokens * 8192 * a * d).epsilon(1e-9));
}

TEST_CASE("Megatron's recompute_modules drop what each module makes and replay its kernels") {
  const auto m = llama8b();
  const auto kept = [&](const std::string& modules) {
    const auto job = job_of("selective,recompute_modules=" + modules);
    return layer_checkpoint(job, m, gpu_layer_shape(job), false, false);
  };
  const double all = total_bytes(saved_tensors(m, shape(), {}, false)) / kTokens;
  // the MLP's gate, up and the second GEMM's input: 3·2f
  CHECK(kept("mlp").kept / kTokens == doctest::Approx(all - 3 * 2 * f).epsilon(1e-12));
  CHECK(kept("mlp").rebuilt / kTokens == doctest::Approx(3 * 2 * f).epsilon(1e-12));
  // the norms' outputs (the QKV and MLP inputs) and their statistics
  CHECK(kept("layernorm").kept / kTokens == doctest::Approx(all - 2 * (2 * h + 4)).epsilon(1e-12));
  // with flash attention the core's recomputation drops its log-sum-exp only, and replays the kernel
  CHECK(kept("core_attn").kept / kTokens == doctest::Approx(all - 4 * a).epsilon(1e-12));
  REQUIRE(kept("core_attn").replayed.size() == 1);
  CHECK(kept("core_attn").replayed.front().op == "attention");
  CHECK(kept("layernorm+mlp").kept / kTokens == doctest::Approx(all - 3 * 2 * f - 2 * (2 * h + 4)).epsilon(1e-12));
}

TEST_CASE("every policy trades memory for recomputation: less kept, more FLOPs replayed") {
  // none → selective (attention core) → op → full: activations fall, hardware FLOPs rise
  double last_memory = 1e300;
  double last_flops = 0;
  for (const auto* policy : {"none", "selective", "op", "full"}) {
    const auto job = job_of(policy);
    const double memory = estimate_memory(job).peak().bytes.activations.as_double();
    const double flops = step_flops(job).hardware;
    CAPTURE(policy);
    CHECK(memory < last_memory);
    CHECK(flops > last_flops);
    last_memory = memory;
    last_flops = flops;
  }
}

TEST_CASE("TorchTitan's layer period recomputes the n-th, 2n-th, ... layer of a chunk") {
  const auto job = job_of("full,recompute_period=4");
  int recomputed = 0;
  for (int i = 0; i < 32; ++i) recomputed += spec::recomputes_layer(job.strategy, i) ? 1 : 0;
  CHECK(recomputed == 8);
  CHECK(spec::recomputes_layer(job.strategy, 3));
  CHECK_FALSE(spec::recomputes_layer(job.strategy, 0));
  // a quarter of the layers' forward again
  const auto none = step_flops(job_of("none"));
  const auto full = step_flops(job_of("full"));
  CHECK(step_flops(job).hardware - none.hardware == doctest::Approx((full.hardware - none.hardware) / 4).epsilon(1e-9));
}

TEST_CASE("an MoE layer keeps the router's probabilities, the dispatched tokens and the experts' outputs") {
  auto m = llama8b();
  m.moe = spec::MoeSpec{.experts = 8, .top_k = 2, .expert_ffn_hidden = 1024, .shared_experts = 1, .capacity_factor = 1};
  // attention half as the dense layer; then, per token: the router's input 2h and fp32 probabilities
  // 4·E; top_k copies of the token into the experts (2h each), their gate and up (2·2f_e), the second
  // GEMM's input (2f_e) and their outputs (2h); the shared expert's 3·2f_e
  const double attention = 2 * (2 * h + 4) + 2 * h + 2 * a * d + 2 * 2 * kv * d + 4 * a + 2 * a * d + 2 * h;
  const double fe = 1024;
  const double expected = attention + 4 * 8 + 2 * (2 * h + 3 * 2 * fe + 2 * h) + 3 * 2 * fe;
  CHECK(per_token(saved_tensors(m, shape(), {}, true)) == doctest::Approx(expected).epsilon(1e-12));
}

}  // namespace saved_tensors_test

namespace saved_tensors_test {

TEST_CASE("Megatron-LM's theoretical activation memory: equal for GPT, off by what it ignores for Llama") {
  // megatron/training/theoretical_memory_usage.py (SP with selective recomputation): per layer
  // s·b·h·(18 + 4·ffn/h)/tp, which assumes GeLU, multi-head attention and two dropout masks
  const auto megatron = [](double tokens, double hidden, double ffn, double tp) {
    return tokens * hidden * (18 + 4 * ffn / hidden) / tp;
  };
  const auto kept = [](const spec::ModelSpec& m, const LayerShape& s) {
    double sum = 0;
    for (const auto& t : saved_tensors(m, s, {}, false))
      if (t.what.find("statistics") == std::string_view::npos && !intersects(t.dropped_by, LayerPart::CoreAttn))
        sum += t.bytes;
    return sum;
  };
  const LayerShape sp{.micro_batch = 1, .seq_len = 2048, .tp = 8, .sp = true};
  spec::ModelSpec gpt;
  gpt.hidden = 12288;
  gpt.heads = 96;
  gpt.kv_heads = 96;
  gpt.head_dim = 128;
  gpt.ffn_hidden = 4 * 12288;
  gpt.mlp = spec::MlpKind::Gelu;
  gpt.dropout = true;
  CHECK(kept(gpt, sp) == doctest::Approx(megatron(2048, 12288, 4 * 12288, 8)).epsilon(1e-12));
  // Llama 3 8B: SwiGLU's gate (+2·ffn), no dropout masks (−2h), GQA's narrower K and V (−4h(1 − kv/a))
  const double diff = 2 * f - 2 * h - 4 * h * (1 - kv / a);
  CHECK(kept(llama8b(), sp) - megatron(2048, h, f, 8) == doctest::Approx(2048 * diff / 8).epsilon(1e-12));
}

}  // namespace saved_tensors_test

namespace saved_tensors_test {

TEST_CASE("Megatron's uniform method keeps one input per group of N layers and rebuilds a group at once") {
  // 7.5B GPT (36 layers, h 4096, 32 heads, s 2048), unfused attention with dropout, tp 4 without SP,
  // one micro-batch in flight (no pipeline): per layer and micro-batch the input x = 2sbh and the
  // whole table T = sbh(10 + 24/t + 5as/(ht)) plus the two LayerNorms' statistics (8 bytes per token
  // each, replicated). Full recomputation of every layer holds 36·x + (T − x); groups of N hold
  // 36·x/N + (N·T − x): the group's other layers are rebuilt whole beside the rebuilt first one.
  const auto w = spec::load_workload_spec(test::workload("megatron2021-7.5b"));
  const auto job = [&](const std::string& extra) {
    return test::make_job("dgx-a100-superpod", w,
                          "tp=4,gpus=64,mb=4,attention=unfused,framework=megatron-2021,recompute=full" + extra);
  };
  // (the 7.5B model's h = 4096 and a = 32 are the Llama dimensions above)
  const double s = 2048, b = 4, t = 4;
  const double sbh = s * b * h;
  const double x = 2 * sbh;
  const double T = sbh * (10 + 24 / t + 5 * a * s / (h * t)) + 2 * 8 * s * b;
  const auto activations = [&](const std::string& extra) {
    return estimate_memory(job(extra)).peak().bytes.activations.as_double();
  };
  const double full = activations("");
  for (const int n : {2, 3, 4}) {
    CAPTURE(n);
    const double uniform = activations(fmt::format(",recompute_layers={},recompute_method=uniform", n));
    CHECK(uniform - full == doctest::Approx(36 * (x / n - x) + (n - 1) * T).epsilon(1e-9));
  }
  // the same forward replayed: equal hardware FLOPs
  CHECK(step_flops(job(",recompute_layers=4,recompute_method=uniform")).hardware == step_flops(job("")).hardware);
}

}  // namespace saved_tensors_test

namespace saved_tensors_test {

// LoRA (Hu et al. 2021) on Llama 3 8B: rank 16 beside the QKV and output projections, every base
// weight frozen.
spec::Job lora_job(const std::vector<spec::LoraModule>& modules, double dropout = 0, const std::string& extra = "") {
  auto job = job_of("none");
  auto w = job.workload;
  w.training.lora = spec::LoraSpec{.rank = 16, .modules = modules, .dropout = dropout};
  return test::make_job("dgx-h100-superpod", w, "gpus=8,mb=2,zero=1,attention=flash,recompute=none" + extra);
}

TEST_CASE("LoRA adapters hold rank x (in + out) per adapted linear layer, split over the tensor-parallel ranks") {
  const auto m = llama8b();
  const spec::LoraSpec all{
      .rank = 16,
      .modules = {spec::LoraModule::Qkv, spec::LoraModule::OutProj, spec::LoraModule::Fc1, spec::LoraModule::Fc2}};
  // q, k and v fused: h in, (a + 2·kv)·d out; the output projection a·d in, h out; SwiGLU's w1 and w3
  // fused: h in, 2f out; w2 f in, h out
  const double per_layer = 16 * ((h + (a + 2 * kv) * d) + (a * d + h) + (h + 2 * f) + (f + h));
  CHECK(model::lora_params_on_gpu(m, all, 1) == doctest::Approx(per_layer).epsilon(1e-12));
  // under TP 8 NeMo's adapters split both matrices: an eighth of each on every GPU
  CHECK(model::lora_params_on_gpu(m, all, 8) == doctest::Approx(per_layer / 8).epsilon(1e-12));
}

TEST_CASE("under LoRA every weight is held, gradients and optimizer states only for the adapters") {
  const auto job = lora_job({spec::LoraModule::Qkv, spec::LoraModule::OutProj});
  const double adapters = 32 * 16 * ((h + (a + 2 * kv) * d) + (a * d + h));
  const double weights = static_cast<double>(model::count_params(job.workload.model, 8192).total());
  const auto e = estimate_memory(job, {}, 1).stages.at(0).bytes;
  // bf16 weights (2 bytes), fp32 gradients (Megatron's main_grad: the megatron-core preset reduces
  // in fp32), fp32 master weights and Adam's moments (12) sharded over 8 (ZeRO-1)
  CHECK(static_cast<double>(e.params.count) == doctest::Approx(2 * (weights + adapters)).epsilon(1e-6));
  CHECK(static_cast<double>(e.grads.count) == doctest::Approx(4 * adapters).epsilon(1e-6));
  CHECK(static_cast<double>(e.optimizer.count) == doctest::Approx(12 * adapters / 8).epsilon(1e-6));
}

TEST_CASE("under LoRA the step computes no weight gradient of the frozen model") {
  const auto full = job_of("none");
  const auto lora = lora_job({spec::LoraModule::Qkv, spec::LoraModule::OutProj});
  // every weight product's gradient, 2·T·(its weights): the layers' linear weights and the output
  // layer; the adapters add their own products, 2·T·r·(in + out) each forward, for the input's
  // gradient and for their weights'
  const double tokens = 16.0 * 8192;
  const double linear = 32 * (h * (a + 2 * kv) * d + a * d * h + h * 2 * f + f * h) + 128256 * h;
  const double adapters = 32 * 3 * 2 * tokens * 16 * ((h + (a + 2 * kv) * d) + (a * d + h));
  CHECK(step_flops(full).model - step_flops(lora).model ==
        doctest::Approx(2 * tokens * linear - adapters).epsilon(1e-9));
}

TEST_CASE("under LoRA a frozen linear layer saves no input; an adapter keeps A's input and output") {
  const auto per_token_of = [](const spec::Job& job) {
    return per_token(saved_tensors(job.workload.model, gpu_layer_shape(job), save_options(job), false));
  };
  // the MLP's frozen GEMMs drop their inputs (2h and 2f); the QKV projection's input stays for its
  // adapter, the attention's output for the attention; A's outputs, 2·rank each, are added
  const auto plain = lora_job({spec::LoraModule::Qkv, spec::LoraModule::OutProj});
  CHECK(per_token_of(plain) == doctest::Approx(kAutogradSaves - 2 * h - 2 * f + 2 * (2 * 16)).epsilon(1e-12));
  // dropout on the adapters' inputs keeps each one's dropped copy (2 bytes) and mask (1) instead
  const auto dropout = lora_job({spec::LoraModule::Qkv, spec::LoraModule::OutProj}, 0.1);
  CHECK(per_token_of(dropout) ==
        doctest::Approx(kAutogradSaves - 2 * h - 2 * f + 2 * (2 * 16) + h + 3 * a * d).epsilon(1e-12));
}

}  // namespace saved_tensors_test

namespace saved_tensors_test {

TEST_CASE("a LoRA adapter is priced as the memory-bound kernels it runs beside its layer") {
  const auto job = lora_job({spec::LoraModule::Qkv}, 0.1);
  const auto ops = layer_ops(job.workload.model, gpu_layer_shape(job), false);
  const auto adapter = std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.name == "qkv_lora"; });
  REQUIRE(adapter != ops.end());
  CHECK((adapter - 1)->name == "qkv");  // right after the layer it adapts
  // per token, bf16: dropout reads h and writes h and its 1-byte mask; A reads h; B writes out;
  // the add reads out twice and writes it. Backward: the output gradient read twice, the dropped
  // input read, the input gradient written and added (read twice, written), the dropout's backward
  const double out = (a + 2 * kv) * d;
  const double drop = (2 * 2 + 1) * h;
  CHECK(adapter->fwd_bytes / kTokens == doctest::Approx(drop + 2 * h + 2 * out + 3 * 2 * out).epsilon(1e-12));
  CHECK(adapter->bwd_bytes / kTokens == doctest::Approx(2 * 2 * out + 2 * h + 2 * h + 3 * 2 * h + drop).epsilon(1e-12));
  CHECK(adapter->fwd_flops / kTokens == doctest::Approx(2 * 16 * (h + out)).epsilon(1e-12));
}

}  // namespace saved_tensors_test
