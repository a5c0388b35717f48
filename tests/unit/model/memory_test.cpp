#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/model/saved_tensors.hpp"

using namespace trainsim;
using namespace trainsim::model;
using spec::Recompute;
using spec::Schedule;

TEST_CASE("mixed-precision Adam costs 16 bytes per parameter (the seed's 2 + 2 + 4 + 4 + 4)") {
  const auto b = state_bytes_per_param(spec::Dtype::Bf16, spec::Optimizer::Adam);
  CHECK(b.weights == 2);
  CHECK(b.grads == 2);
  CHECK(b.optimizer == 12);
  CHECK(b.total() == 16);
  CHECK(state_bytes_per_param(spec::Dtype::Fp32, spec::Optimizer::Adam).total() == 16);  // 4 + 4 + 8, no master copy
}

TEST_CASE("the ZeRO paper's Table 1, every cell") {
  // reference/zero2020.json: model-state GB per device for 7.5B, 128B and 1T at each dp and stage
  const auto ref = test::load_reference("zero2020.json");
  const auto per_param = state_bytes_per_param(spec::Dtype::Bf16, spec::Optimizer::Adam);
  const double psi[] = {7.5e9, 128e9, 1e12};
  for (const auto& row : ref["table1_gb_per_device"]["rows"]) {
    const auto dp = row[0].get<std::int64_t>();
    for (int model = 0; model < 3; ++model) {
      for (int stage = 1; stage <= 3; ++stage) {
        const double expected = row[static_cast<std::size_t>(1 + model * 3 + stage - 1)].get<double>();
        const double gb = model_state_bytes(psi[model], stage, dp, per_param).total() / 1e9;
        CAPTURE(dp);
        CAPTURE(model);
        CAPTURE(stage);
        // the table rounds to at most three significant figures or two decimals
        CHECK(std::abs(gb - expected) <= std::max(0.005 * expected, 0.05));
      }
    }
  }
}

TEST_CASE("7.5B on 64 GPUs: 120 / 31.4 / 16.6 / 1.9 GB (the seed and ZeRO Figure 1)") {
  const auto ref = test::load_reference("zero2020.json")["figure1_7p5b_64gpus_gb"];
  const auto per_param = state_bytes_per_param(spec::Dtype::Bf16, spec::Optimizer::Adam);
  CHECK(model_state_bytes(7.5e9, 0, 64, per_param).total() / 1e9 == doctest::Approx(ref["baseline"].get<double>()));
  CHECK(model_state_bytes(7.5e9, 1, 64, per_param).total() / 1e9 ==
        doctest::Approx(ref["zero1"].get<double>()).epsilon(0.005));
  CHECK(model_state_bytes(7.5e9, 2, 64, per_param).total() / 1e9 ==
        doctest::Approx(ref["zero2"].get<double>()).epsilon(0.005));
  CHECK(model_state_bytes(7.5e9, 3, 64, per_param).total() / 1e9 ==
        doctest::Approx(ref["zero3"].get<double>()).epsilon(0.02));
}

namespace {

struct Dims {
  double s, b, h, a;
};

LayerShape shape_of(const Dims& d, int tp, bool sp) {
  return LayerShape{
      .micro_batch = static_cast<std::int64_t>(d.b), .seq_len = static_cast<std::int64_t>(d.s), .tp = tp, .sp = sp};
}

spec::ModelSpec gpt_layer(const Dims& d) {
  spec::ModelSpec m;
  m.layers = 1;
  m.hidden = static_cast<std::int64_t>(d.h);
  m.heads = static_cast<int>(d.a);
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = 4 * m.hidden;
  m.vocab = 51200;
  return m;
}

}  // namespace

// The table's bytes Korthikanti et al. count: all but the norms' per-token statistics (fp32 mean
// and reciprocal deviation, 8 bytes per token and norm, which their Table 2 leaves out), and
// without the tensors recomputing `dropped` drops.
double korthikanti_bytes(const std::vector<SavedTensor>& tensors, LayerPart dropped = LayerPart::None) {
  double sum = 0;
  for (const auto& t : tensors)
    if (t.what.find("statistics") == std::string_view::npos && !intersects(t.dropped_by, dropped)) sum += t.bytes;
  return sum;
}

TEST_CASE("the saved tensors of a GPT-3 layer sum to every formula of Korthikanti Table 2") {
  // reference/korthikanti2022.json, activation_bytes_per_layer_table2, on the configurations of Table 3:
  // Megatron-LM's unfused attention, dropout, GeLU, LayerNorm
  const auto ref = test::load_reference("korthikanti2022.json");
  const SaveOptions unfused{.fused_attention = false};
  for (const auto& cfg : ref["configs_table3"]) {
    const Dims d{2048, cfg["micro_batch"].get<double>(), cfg["hidden"].get<double>(), cfg["heads"].get<double>()};
    const double t = cfg["tp"].get<double>();
    const int tp = static_cast<int>(t);
    const auto m = gpt_layer(d);
    const double sbh = d.s * d.b * d.h;
    const auto table = [&](int degree, bool sp) { return saved_tensors(m, shape_of(d, degree, sp), unfused, false); };
    CAPTURE(cfg["model"].get<std::string>());
    // s·b·h·(34 + 5as/h) with no parallelism
    CHECK(korthikanti_bytes(table(1, false)) == doctest::Approx(sbh * (34 + 5 * d.a * d.s / d.h)).epsilon(1e-12));
    // tensor parallel: sbh(10 + 24/t + 5as/(ht))
    CHECK(korthikanti_bytes(table(tp, false)) ==
          doctest::Approx(sbh * (10 + 24 / t + 5 * d.a * d.s / (d.h * t))).epsilon(1e-12));
    // tensor + sequence parallel: sbh/t·(34 + 5as/h)
    CHECK(korthikanti_bytes(table(tp, true)) == doctest::Approx(sbh / t * (34 + 5 * d.a * d.s / d.h)).epsilon(1e-12));
    // tensor + sequence parallel + selective recompute (the attention core): 34·sbh/t
    CHECK(korthikanti_bytes(table(tp, true), LayerPart::CoreAttn) == doctest::Approx(34 * sbh / t).epsilon(1e-12));
    // full recompute keeps the layer input: 2sbh
    double input = 0;
    for (const auto& x : table(tp, false))
      if (x.layer_input) input += x.bytes;
    CHECK(input == doctest::Approx(2 * sbh).epsilon(1e-12));
    // the statistics Korthikanti leave out: 2 LayerNorms × 8 bytes per token
    CHECK(total_bytes(table(1, false)) - korthikanti_bytes(table(1, false)) ==
          doctest::Approx(2 * 8 * d.s * d.b).epsilon(1e-12));
  }
}

TEST_CASE("the pipeline holds p micro-batches on the first 1F1B stage and m under GPipe") {
  // Korthikanti §4.2.3: L/p layers × p micro-batches = L layers' worth on the first stage
  CHECK(inflight_layer_microbatches(Schedule::OneFOneB, 0, 8, 1, 64, 12) == 8 * 12);
  CHECK(inflight_layer_microbatches(Schedule::OneFOneB, 7, 8, 1, 64, 12) == 1 * 12);
  CHECK(inflight_layer_microbatches(Schedule::OneFOneB, 0, 8, 1, 3, 12) == 3 * 12);  // fewer micro-batches than stages
  CHECK(inflight_layer_microbatches(Schedule::GPipe, 0, 8, 1, 64, 12) == 64 * 12);
}

TEST_CASE("interleaving multiplies the first stage's activations by 1 + (p−1)/(p·v)") {
  // Korthikanti §4.2.3: the first stage holds L·(1 + (p−1)/(p·m)) layers' worth, m the interleaving stages
  for (const int p : {2, 4, 8, 35}) {
    for (const int v : {2, 3, 4}) {
      const int stage_layers = 4 * v;
      const double layers = p * stage_layers;
      CAPTURE(p);
      CAPTURE(v);
      CHECK(inflight_layer_microbatches(Schedule::Interleaved, 0, p, v, 1000, stage_layers) ==
            doctest::Approx(layers * (1.0 + (p - 1.0) / (p * v))).epsilon(1e-12));
    }
  }
}

TEST_CASE("chunks of their own sizes are held as the interleaved schedule runs them") {
  // Megatron's order on p = 2, v = 2, forward steps on chunks 0 0 1 1 0 0 1 1 ..., backward steps on
  // 1 1 0 0 1 1 ...: stage 0 runs (p − 1)·2 + (v − 1)·p = 4 warm-up forwards (6 + 6 + 2 + 2 layers of
  // chunks of 6 and 2), then a forward and a backward in turn: +6 (22) −2 +6 (26) −2 +2 (26) −6 ...
  // the peak, 26, comes after the first backward. Stage 1 (chunks of 2 and 6): 2 + 2, then +6 (10)
  // −6 +2 (6) −6 ...
  CHECK(inflight_layer_microbatches(Schedule::Interleaved, 0, 2, 8, std::vector<int>{6, 2}) == 26);
  CHECK(inflight_layer_microbatches(Schedule::Interleaved, 1, 2, 8, std::vector<int>{2, 6}) == 10);
  // equal chunks: the stage's layers times the chunks in flight over vpp, as before
  CHECK(inflight_layer_microbatches(Schedule::Interleaved, 0, 4, 64, std::vector<int>{3, 3, 3}) ==
        inflight_layer_microbatches(Schedule::Interleaved, 0, 4, 3, 64, 9));
  CHECK(inflight_layer_microbatches(Schedule::OneFOneB, 0, 8, 64, std::vector<int>{12}) == 8 * 12);
}

TEST_CASE("ZeRO stages shrink memory monotonically and recompute shrinks activations") {
  const auto w = spec::load_workload_spec(test::workload("megatron2021-7.5b"));
  Bytes last{std::numeric_limits<std::int64_t>::max()};
  for (const int zero : {0, 1, 2, 3}) {
    const auto job = test::make_job("dgx-a100-superpod", w, fmt::format("zero={},gpus=64,mb=8", zero));
    const auto m = estimate_memory(job).peak().bytes;
    CHECK(m.params + m.grads + m.optimizer < last);
    last = m.params + m.grads + m.optimizer;
  }
  Bytes prev{std::numeric_limits<std::int64_t>::max()};
  for (const auto* recompute : {"none", "selective", "full"}) {
    const auto job = test::make_job("dgx-a100-superpod", w,
                                    fmt::format("tp=4,gpus=64,mb=8,attention=unfused,recompute={}", recompute));
    const auto a = estimate_memory(job).peak().bytes.activations;
    CHECK(a < prev);
    prev = a;
  }
  // flash attention never stores the a·s² scores: recomputing its core drops only the fp32
  // log-sum-exp, 4 bytes per query row and head (b·s·a/t), in every layer-micro-batch held: the
  // peak is at the loss (its logits outweigh any layer's backward working set), where all are held
  const auto flash = test::make_job("dgx-a100-superpod", w, "tp=4,gpus=64,mb=8,recompute=none");
  const auto selective = test::make_job("dgx-a100-superpod", w, "tp=4,gpus=64,mb=8,recompute=selective");
  const double lse = 4.0 * 8 * 2048 * (w.model.heads / 4);
  const double held = w.model.layers;  // one micro-batch in flight without a pipeline
  CHECK(estimate_memory(flash).peak().bytes.activations.as_double() -
            estimate_memory(selective).peak().bytes.activations.as_double() ==
        doctest::Approx(held * lse).epsilon(1e-6));
}

TEST_CASE("the peak stage of a 1F1B pipeline is the first one for a uniform model") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024,recompute=selective,sp=on");
  const auto estimate = estimate_memory(job);
  CHECK(estimate.peak_stage == 0);
  CHECK(estimate.stages[0].bytes.activations > estimate.stages[7].bytes.activations);
}

TEST_CASE(
    "Liger's fused linear cross entropy: one chunk of logits and the saved gradients, not the micro-batch's logits") {
  // Llama 3 8B, micro-batch 2 of 8,192 tokens (T = 16,384), h = 4,096, V = 128,256: Liger's chunk is
  // next_power_of_2(cdiv(T, cdiv(V, h))) = next_power_of_2(cdiv(16,384, 32)) = 512 tokens
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,mb=2,loss=fused_linear");
  const auto& m = job.workload.model;
  const auto shape = model::gpu_layer_shape(job);
  CHECK(spec::loss_chunk_tokens(spec::LossImpl::FusedLinear, 16384, 128256, 4096) == 512);
  CHECK(spec::loss_chunk_tokens(spec::LossImpl::Fused, 16384, 128256, 4096) == 16384);
  const double inputs = 2.0 * 16384 * 4096 * 2;    // the final norm's input and output
  const double chunk = 2.0 * 512 * 128256;         // one chunk's bf16 logits, its gradient in place
  const double input_grad = 2.0 * 16384 * 4096;    // saved for the backward
  const double weight_grad = 2.0 * 128256 * 4096;  // the output layer's, bf16
  CHECK(model::head_activation_bytes(m, shape) == inputs + chunk + input_grad + weight_grad);
  // flash-attn's fused loss holds the micro-batch's logits and their gradient: 4 bytes per logit
  const auto fused = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,mb=2,loss=fused");
  CHECK(model::head_activation_bytes(m, model::gpu_layer_shape(fused)) == inputs + 4.0 * 16384 * 128256);
  // over the whole vocabulary only: under tensor parallelism the logits are shards
  CHECK_THROWS_WITH_AS(test::make_job("dgx-h100-superpod", "llama3-8b", "tp=2,gpus=8,loss=fused_linear"),
                       doctest::Contains("/loss: fused_linear is Liger's fused linear cross entropy"), SpecError);
}

TEST_CASE("a forward beside another micro-batch's backward holds the loss's tensors and the working set together") {
  // one stage: 1F1B frees the head before any layer's backward (the larger of the two counts);
  // combined 1F1B runs a forward, head included, beside a backward (both count): the difference is
  // the smaller of the two, at most the head's tensors
  const auto w = spec::load_workload_spec(test::workload("qwen3-30b-a3b"));
  const auto plain = test::make_job("dgx-h100-superpod", w, "ep=8,gpus=8,mb=1");
  const auto paired = test::make_job("dgx-h100-superpod", w, "ep=8,gpus=8,mb=1,overlap_moe_comm=on");
  const double extra = estimate_memory(paired).peak().bytes.activations.as_double() -
                       estimate_memory(plain).peak().bytes.activations.as_double();
  CHECK(extra > 0);
  CHECK(extra <= head_activation_bytes(w.model, gpu_layer_shape(plain)) * (1 + 1e-12));
}
