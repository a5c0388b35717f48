#include <doctest/doctest.h>

#include "common/paths.hpp"
#include "trainsim/model/kernel_model.hpp"
#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/cluster_spec.hpp"

using namespace trainsim;
using namespace trainsim::model;

namespace {
// The A100 of the shipped topology with the built-in (A100) tunables.
KernelContext a100(spec::AttentionImpl attention = spec::AttentionImpl::Flash) {
  static const auto cluster = spec::load_cluster_spec(test::topology("dgx-a100-superpod"));
  return {.device = &cluster.device, .attention = attention, .tuning = {}};
}
Op gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  const double f = 2.0 * m * n * k;
  return Op{.name = "g", .shape = Gemm{m, n, k, 1}, .fwd_flops = f, .bwd_data_flops = f, .bwd_weight_flops = f};
}
}  // namespace

TEST_CASE("a large bf16 GEMM on A100 reaches the measured 253.7 TFLOP/s (cuBLASLt, 8192³)") {
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  ctx.tuning.sustained_fraction = 1.0;  // a microbenchmark, not a sustained training step
  const auto t = kernel_time(gemm(8192, 8192, 8192), Pass::Forward, ctx);
  CHECK(2.0 * 8192 * 8192 * 8192 / t.seconds() / 1e12 == doctest::Approx(253.7).epsilon(0.01));
}

TEST_CASE("wave quantisation: one more tile than SMs costs a second wave") {
  // 108 tiles of 128×256 fill one wave on 108 SMs; 109 take two
  const auto tm = 128, tn = 256;
  const double full = gemm_efficiency(tm * 108, tn, 4096, 1, 108, {}, 0.82);
  const double one_more = gemm_efficiency(tm * 109, tn, 4096, 1, 108, {}, 0.82);
  CHECK(one_more < full * 0.6);
  CHECK(gemm_efficiency(tm * 216, tn, 4096, 1, 108, {}, 0.82) == doctest::Approx(full));
}

TEST_CASE("split-K: one output tile with a deep K is cut into slices that fill the SMs") {
  // 128×256 output = one tile; K = 65536 gives up to 256 slices of 256, the SMs take 108:
  // one full wave of slices 65536/108 deep, then an fp32 reduction of the 108 partials
  const spec::KernelTuning t;
  const double slice = 65536.0 / 108;
  CHECK(gemm_efficiency(128, 256, 65536, 1, 108, t, t.gemm_ceiling) == doctest::Approx(t.gemm_ceiling * slice / (slice + 64)));
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  const double flops = 2.0 * 128 * 256 * 65536;
  const double compute = flops / (312e12 * ctx.tuning.sustained_fraction * t.gemm_ceiling * slice / (slice + 64));
  const double hbm = 2039e9 * 0.83;
  const double operands = 2.0 * (128 * 65536 + 65536 * 256 + 128 * 256) / hbm;  // memory-bound here
  const double reduce = 2.0 * 4 * 128 * 256 * 108 / hbm;
  CHECK(operands > compute);
  CHECK(kernel_time(gemm(128, 256, 65536), Pass::Forward, ctx).seconds() ==
        doctest::Approx(operands + reduce).epsilon(1e-6));
  // slices stay at least 256 deep: K = 1024 allows 4
  CHECK(gemm_efficiency(128, 256, 1024, 1, 108, t, t.gemm_ceiling) == doctest::Approx(t.gemm_ceiling * 4.0 / 108 * 256 / (256 + 64)));
  // enough tiles for the SMs: no split
  CHECK(gemm_efficiency(128 * 108, 256, 65536, 1, 108, t, t.gemm_ceiling) == doctest::Approx(t.gemm_ceiling * 65536 / (65536 + 64.0)));
}

TEST_CASE("a GEMM with a tiny dimension is memory-bound") {
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  const auto op = gemm(8, 12288, 12288);  // 8 tokens through a 12288² weight
  const double weight_bytes = 2.0 * 12288 * 12288;
  CHECK(kernel_time(op, Pass::Forward, ctx).seconds() >= weight_bytes / (2039e9 * 0.83) * 0.99);
}

TEST_CASE("element-wise kernels run at the achievable HBM bandwidth") {
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  const Op op{.name = "norm", .shape = Elementwise{1e9}, .fwd_bytes = 1e9, .bwd_bytes = 1.5e9};
  CHECK(kernel_time(op, Pass::Forward, ctx).seconds() == doctest::Approx(1e9 / (2039e9 * 0.83)));
  CHECK(kernel_time(op, Pass::BackwardData, ctx).seconds() == doctest::Approx(1.5e9 / (2039e9 * 0.83)));
  CHECK(kernel_time(op, Pass::BackwardWeight, ctx) == Duration::zero());
}

TEST_CASE("a bias gradient is a reduction over the output gradient unless the GEMM's epilogue computes it") {
  // dW = Xᵀ·dY, and where the layer has a bias, db = Σ_rows dY: read m·n bf16 elements once
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  Op op = gemm(8192, 3072, 768);
  const auto plain = kernel_time(op, Pass::BackwardWeight, ctx).seconds();
  std::get<Gemm>(op.shape).bias = true;
  CHECK(kernel_time(op, Pass::BackwardWeight, ctx).seconds() == doctest::Approx(plain));  // fused (TE)
  ctx.separate_bias_grad = true;
  const double reduction = 2.0 * 8192 * 3072 / (2039e9 * 0.83);
  CHECK(kernel_time(op, Pass::BackwardWeight, ctx).seconds() == doctest::Approx(plain + reduction));
  CHECK(kernel_launches(op, Pass::BackwardWeight, ctx) == 2);
  // the data gradient and the forward do not change; frozen weights (LoRA) freeze the bias too
  CHECK(weight_grad_bytes(op, ctx) == 2.0 * 8192 * 3072);
  ctx.frozen_weights = true;
  CHECK(weight_grad_bytes(op, ctx) == 0);
}

TEST_CASE("a norm's weight gradient reads its input and output gradient again as a kernel of its own") {
  // LayerNorm over T×h: dx reads x and dy and writes dx (6 bytes per element in bf16); γ and β
  // sum x̂·dy and dy over the tokens, a second pass over x and dy (4 bytes) unless the dx kernel
  // keeps per-block partial sums (Transformer Engine)
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  const double elements = 8192.0 * 4096;
  const Op op{.name = "norm1",
              .shape = Elementwise{4 * elements},
              .fwd_bytes = 4 * elements,
              .bwd_bytes = 6 * elements,
              .wgrad_bytes = 4 * elements};
  CHECK(kernel_time(op, Pass::BackwardWeight, ctx) == Duration::zero());
  CHECK(kernel_launches(op, Pass::BackwardWeight, ctx) == 0);
  ctx.separate_norm_grad = true;
  CHECK(kernel_time(op, Pass::BackwardWeight, ctx).seconds() == doctest::Approx(4 * elements / (2039e9 * 0.83)));
  CHECK(kernel_launches(op, Pass::BackwardWeight, ctx) == 1);
  CHECK(kernel_time(op, Pass::BackwardData, ctx).seconds() == doctest::Approx(6 * elements / (2039e9 * 0.83)));
}

TEST_CASE("flash attention computes half of a causal square; unfused attention is slower at long sequences") {
  auto ctx = a100();
  ctx.tuning.kernel_gap = Duration::zero();
  AttentionCore core{.batch = 1, .heads = 16, .q_len = 8192, .kv_len = 8192, .head_dim = 128, .causal = true};
  const double full_flops = 4.0 * 16 * 8192.0 * 8192 * 128;
  const Op op{.name = "attention", .shape = core, .fwd_flops = full_flops, .bwd_data_flops = 2 * full_flops};
  const double fwd = kernel_time(op, Pass::Forward, ctx).seconds();
  const double peak = 312e12 * ctx.tuning.sustained_fraction;
  CHECK(fwd == doctest::Approx(full_flops * 0.5 / (peak * 0.55)));
  CHECK(kernel_time(op, Pass::BackwardData, ctx).seconds() == doctest::Approx(2.5 * full_flops * 0.5 / (peak * 0.40)));
  auto unfused = a100(spec::AttentionImpl::Unfused);
  unfused.tuning.kernel_gap = Duration::zero();
  CHECK(kernel_time(op, Pass::Forward, unfused).seconds() > fwd);
}

TEST_CASE("a busier expert's grouped GEMMs take at most its extra tokens' time") {
  // DeepSeek-V3's expert_fc1 on one rank of EP 64 (4 local experts of 2,048 × 2 inputs, h 7168):
  // 8,192 tokens an expert balanced; the busiest rank's 1.3 times as many are no unaligned shape
  spec::ModelSpec m{
      .layers = 4, .hidden = 7168, .heads = 128, .ffn_hidden = 18432, .vocab = 1024, .mlp = spec::MlpKind::Swiglu};
  m.moe = spec::MoeSpec{.experts = 256, .top_k = 8, .expert_ffn_hidden = 2048};
  LayerShape shape{.micro_batch = 1, .seq_len = 4096, .ep = 64};
  auto ctx = a100();
  ctx.tuning.unaligned_efficiency = 0.7;  // the A100 fit's (devices/a100-sxm4-80gb.json)
  const auto time = [&](double load) {
    shape.routed_load = load;
    for (const auto& op : layer_ops(m, shape, true))
      if (op.name == "expert_fc1") return kernel_time(op, Pass::Forward, ctx).seconds();
    return 0.0;
  };
  const double balanced = time(1.0);
  for (const double load : {1.1, 1.3, 1.7}) {
    CAPTURE(load);
    CHECK(time(load) > balanced);
    CHECK(time(load) <= balanced * load * 1.05);  // within a partly filled last wave
  }
}
