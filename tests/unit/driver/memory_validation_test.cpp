// The memory model against measured peaks: TorchTitan's published runs on H100s
// (tests/reference/modern/torchtitan.json, "memory_gib": the largest peak of PyTorch's caching
// allocator over the ranks, torch.cuda.max_memory_reserved). The allocator's reserve excludes the
// CUDA context and NCCL's buffers, which live outside it: the comparison takes the predicted peak
// less model::runtime_memory. Jobs are the regression cases of results/reference/, written from the
// runs' stated settings.
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/model/saved_tensors.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/launch_config.hpp"

using namespace trainsim;

namespace memory_validation_test {

struct Row {
  std::string name;
  double predicted_gib = 0;
  double measured_gib = 0;
  bool fsdp_only = false;  // no tensor or pipeline parallelism: the per-op policy's saved tensors
  double error() const { return predicted_gib / measured_gib - 1; }
};

std::vector<Row> torchtitan_rows() {
  const auto measured = test::load_reference("modern/torchtitan.json").at("rows");
  std::vector<Row> out;
  for (const auto& e : std::filesystem::directory_iterator(test::source_path("results/reference"))) {
    const auto file = e.path().filename().string();
    if (!file.starts_with("torchtitan-llama3.1-")) continue;
    const auto c = spec::load_json_file(e.path().string());
    const auto& run = c.at("run");
    // the case's source names the row by its throughput
    std::smatch match;
    const auto source = c.at("source").get<std::string>();
    REQUIRE(std::regex_search(source, match, std::regex(R"((\d+) tokens/s)")));
    const double tokens = std::stod(match[1]);
    const nlohmann::json* row = nullptr;
    for (const auto& r : measured)
      if (r.contains("memory_gib") && r.value("tokens_per_s_per_gpu", 0.0) == tokens) row = &r;
    REQUIRE(row != nullptr);
    const auto workload = spec::read_workload_spec(run.at("workload"), file);
    const auto strategy = run.at("strategy").get<std::string>();
    spec::Sources sources{.topology = run.at("topology").get<std::string>(), .workload = file, .strategy = "strategy"};
    const auto job = spec::resolve_job(
        spec::load_cluster_spec(test::source_path(run.at("topology").get<std::string>())), workload,
        spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "strategy"), "strategy"), sources);
    const auto report = driver::build_run_report(job);
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    out.push_back({file, static_cast<double>(report.peak_memory - report.runtime_memory.count) / kGiB,
                   row->at("memory_gib").get<double>(),
                   job.strategy.tp == 1 && job.strategy.pp == 1 && job.strategy.cp == 1});
  }
  std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.name < b.name; });
  return out;
}

TEST_CASE("peak memory against TorchTitan's measured reserved peaks on H100") {
  const auto rows = torchtitan_rows();
  REQUIRE(rows.size() == 14);
  double sum = 0;
  for (const auto& r : rows) {
    MESSAGE(fmt::format("{}: predicted {:.1f} GiB, measured {:.1f} GiB ({:+.1f}%)", r.name, r.predicted_gib,
                        r.measured_gib, r.error() * 100));
    sum += std::abs(r.error());
    // every row within 15% (30% before DTensor's loss parallelism was counted at its 16 bytes per
    // logit: Llama 3.1 70B with 16 sequences per rank under TP 8 was -24%, now -12.5%; the worst
    // is now Llama 3.1 405B's pipeline rows, whose micro-batch counts were not published)
    CHECK(std::abs(r.error()) < 0.15);
    // the FSDP runs of Llama 3.1 8B under TorchTitan's per-op checkpointing, whose kept tensors
    // (block inputs, every other matmul's output, attention's output) the model counts op by op,
    // within 8% (eager runs 6-8% low: the allocator's reserve under eager kernels is not modelled)
    if (r.fsdp_only) CHECK(std::abs(r.error()) < 0.08);
  }
  // 4.6% over 14 (6.0% before the loss's cached block was counted: the four CP rows -6.8..-7.4%,
  // now +1.8..+2.6%)
  CHECK(sum / static_cast<double>(rows.size()) < 0.05);
}

TEST_CASE("fragmentation and NCCL buffers: what each adds, by hand") {
  // Llama 3 8B on 8 H100s, FSDP: one data-parallel ring (2 connections × 24 channels × 12 MiB)
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "framework=torchtitan,gpus=8");
  spec::MemoryTuning t;
  CHECK(model::runtime_memory(job, t, 24) == gib(1) + mib(2 * 24 * 12));
  // tp 8 and dp 2 with pp 2: three rings; ep adds its all-to-all peers
  const auto tp = test::make_job("dgx-h100-superpod", "llama3-8b", "tp=8,pp=2,gpus=32");
  CHECK(model::runtime_memory(tp, t, 24) == gib(1) + mib(3 * 2 * 24 * 12));
  // the fragmentation share of the transient memory, and none of the model states, beside the
  // loss's cached block (TorchTitan's fp32 loss at tp 1: 2 bytes × 8,192 tokens × 128,256 logits)
  const double block = 2.0 * 8192 * 128256;
  t.fragmentation = 0;
  const auto none = model::estimate_memory(job, t, 24).peak().bytes;
  t.fragmentation = 0.1;
  const auto some = model::estimate_memory(job, t, 24).peak().bytes;
  CHECK(none.fragmentation.as_double() == block);
  const auto transient = some.activations + some.buffers - model::runtime_memory(job, t, 24);
  CHECK(some.fragmentation.as_double() == doctest::Approx(0.1 * transient.as_double() + block).epsilon(1e-9));
  CHECK(some.total() - none.total() == some.fragmentation - none.fragmentation);
}

TEST_CASE("the loss's cached block: the bf16 logits' 2 bytes per logit stay reserved under F.cross_entropy(.float())") {
  // Llama 3 8B under TorchTitan on 8 H100s, micro-batch 2 of 8,192 tokens, FSDP: the loss upcasts
  // the bf16 logits; once they are freed their block (2 bytes × 16,384 tokens × 128,256 logits)
  // cannot hold the backward's fp32 tensors, twice its size, and stays cached beside them
  spec::MemoryTuning no_share;
  no_share.fragmentation = 0;
  const double block = 2.0 * 16384 * 128256;
  const auto reserve = [&](const std::string& strategy) {
    const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", strategy);
    driver::RunOptions o;
    o.overrides.set("memory", "fragmentation", 0);
    const auto r = driver::build_run_report(job, o);
    const auto analytic = model::estimate_memory(job, no_share).peak().bytes.fragmentation.as_double();
    return std::pair{static_cast<double>(r.peak_memory - r.live_peak_memory), analytic};
  };
  const auto [upcast, upcast_analytic] = reserve("framework=torchtitan,gpus=8,mb=2,recompute=full");
  CHECK(upcast == doctest::Approx(block).epsilon(1e-9));
  CHECK(upcast_analytic == doctest::Approx(block).epsilon(1e-9));
  // Megatron's vocab-parallel loss writes the gradient over its fp32 softmax and casts it back into
  // the logits' block; flash-attn's fused loss stays in bf16: nothing stays cached
  CHECK(reserve("framework=torchtitan,gpus=8,mb=2,recompute=full,loss=vocab_parallel").first == 0);
  CHECK(reserve("framework=torchtitan,gpus=8,mb=2,recompute=full,loss=fused").first == 0);
}

}  // namespace memory_validation_test

namespace memory_validation_test {

TEST_CASE("Transformer Engine's FP8 weight copies are in the simulated peak, and the breakdown sums to it") {
  // Megatron-Core keeps each weight's FP8 copy and its transpose all step: 2 bytes per parameter of
  // the GPU (docs/model.md "FP8"), held from the first forward, so in the engine's pools too
  const auto memory = [](const std::string& fp8) {
    const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,zero=1,mb=1,fp8=" + fp8);
    const auto r = driver::build_run_report(job);
    const auto j = report::to_json(r);
    std::int64_t sum = 0;
    for (const auto& [part, bytes] : j.at("memory").items()) sum += bytes.get<std::int64_t>();
    CHECK(sum == r.peak_memory);
    return std::pair{j.at("memory").at("buffers").get<double>(), r.params_per_gpu};
  };
  const auto [bf16_buffers, params] = memory("off");
  const auto [fp8_buffers, same_params] = memory("tensorwise");
  CHECK(fp8_buffers - bf16_buffers == doctest::Approx(2 * params).epsilon(1e-6));
}

}  // namespace memory_validation_test

namespace memory_validation_test {

// llm-foundry's throughput tables (tests/reference/llmfoundry_benchmarks.json): Composer with FSDP1 on
// 8 to 512 A100 40/80 GB and H100 80 GB, 125M to 70B MPT models. Each row ran, so each is a memory
// measurement: it fitted.
spec::Job llmfoundry_job(const nlohmann::json& row, const nlohmann::json& models) {
  const auto& m = models.at(row.at("model").get<std::string>());
  spec::WorkloadSpec w;
  w.name = "mpt-" + row.at("model").get<std::string>();
  w.model.layers = m.at("n_layers").get<int>();
  w.model.hidden = m.at("d_model").get<std::int64_t>();
  w.model.heads = m.at("n_heads").get<int>();
  w.model.kv_heads = w.model.heads;
  w.model.head_dim = w.model.hidden / w.model.heads;
  w.model.ffn_hidden = m.at("expansion_ratio").get<std::int64_t>() * w.model.hidden;
  w.model.vocab = 50368;  // models._shared.vocab_size
  w.model.mlp = spec::MlpKind::Gelu;
  w.model.norm = spec::NormKind::LayerNorm;
  w.model.position = spec::PositionKind::Learned;
  w.model.bias = true;
  w.model.tied_embeddings = true;
  w.model.dropout = false;
  w.training = {.seq_len = row.at("seq_len").get<std::int64_t>(),
                .global_batch = row.at("global_batch").get<std::int64_t>(),
                .dtype = spec::Dtype::Bf16,
                .optimizer = spec::Optimizer::Adam};
  const auto gpu = row.at("gpu").get<std::string>();
  const std::string topology = gpu == "a100_40gb"   ? "a100-40gb-roce"
                               : gpu == "a100_80gb" ? "dgx-a100-superpod"
                                                    : "dgx-h100-superpod";
  const auto sharding = row.at("fsdp").get<std::string>();
  const int zero = sharding == "FULL_SHARD" ? 3 : sharding == "SHARD_GRAD_OP" ? 2 : 0;
  auto strategy = fmt::format("framework=composer,gpus={},mb={},zero={},recompute={}", row.at("gpus").get<int>(),
                              row.at("micro_batch").get<int>(), zero,
                              row.at("activation_checkpointing").get<bool>() ? "full" : "none");
  if (row.at("precision").get<std::string>().find("fp8") != std::string::npos) strategy += ",fp8=tensorwise";
  return test::make_job(topology, w, strategy);
}

TEST_CASE("every llm-foundry benchmark run fits its GPU, and the tables' largest runs use most of it" * doctest::test_suite("volume")) {
  const auto ref = test::load_reference("llmfoundry_benchmarks.json");
  std::map<std::string, double> largest;  // per table, the largest peak as a share of the device
  int rows = 0;
  for (const auto& row : ref.at("rows")) {
    const auto job = llmfoundry_job(row, ref.at("models"));
    const auto r = driver::build_run_report(job);
    const double share = static_cast<double>(r.peak_memory) / r.device_memory.as_double();
    CAPTURE(row.at("table").get<std::string>());
    CAPTURE(spec::strategy_text(job.strategy));
    CAPTURE(row.at("model").get<std::string>());
    CAPTURE(row.at("seq_len").get<int>());
    CHECK(r.fits);
    auto& l = largest[row.at("table").get<std::string>()];
    l = std::max(l, share);
    ++rows;
  }
  CHECK(rows == 216);
  // the micro-batches were chosen to fill the devices: a model that left half of each idle at the
  // largest run of a table would be as wrong as one that overflowed
  for (const auto& [table, share] : largest) {
    MESSAGE(fmt::format("{}: largest peak {:.0f}% of the device", table, share * 100));
    CHECK(share > 0.7);
  }
}

}  // namespace memory_validation_test

namespace memory_validation_test {

TEST_CASE("FP8 parameters (fp8_param_gather) hold 1 byte per weight and its FP8 transpose, not 2 + 2") {
  const auto memory = [](const std::string& gather) {
    const auto job =
        test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,zero=1,mb=1,fp8=tensorwise,fp8_param_gather=" + gather);
    const auto r = driver::build_run_report(job);
    return std::pair{report::to_json(r).at("memory"), r.params_per_gpu};
  };
  const auto [off, params] = memory("off");
  const auto [on, same] = memory("on");
  CHECK(on.at("params").get<double>() == doctest::Approx(params).epsilon(1e-6));
  CHECK(off.at("params").get<double>() == doctest::Approx(2 * params).epsilon(1e-6));
  CHECK(off.at("buffers").get<double>() - on.at("buffers").get<double>() == doctest::Approx(params).epsilon(1e-6));
}

}  // namespace memory_validation_test

namespace memory_validation_test {

TEST_CASE("published out-of-memory reports do not fit, and the runs that replaced them do") {
  // tests/reference/oom_reports.json: each row a configuration reported to OOM or to run
  const auto ref = test::load_reference("oom_reports.json");
  for (const auto& row : ref.at("rows")) {
    CAPTURE(row.at("name").get<std::string>());
    nlohmann::json w;
    if (row.contains("workload_case"))
      w = spec::load_json_file(test::source_path(row.at("workload_case").get<std::string>())).at("run").at("workload");
    else if (row.contains("workload_inline"))
      w = row.at("workload_inline");
    else
      w = spec::load_json_file(test::source_path(row.at("workload").get<std::string>()));
    if (row.contains("seq_len")) w["training"]["seq_len"] = row.at("seq_len");
    if (row.contains("global_batch")) w["training"]["global_batch"] = row.at("global_batch");
    const auto workload = spec::read_workload_spec(w, "workload");
    const auto topology = row.at("topology").get<std::string>();
    const auto strategy = row.at("strategy").get<std::string>();
    spec::Sources sources{.topology = topology, .workload = "workload", .strategy = "strategy"};
    const auto job = spec::resolve_job(
        spec::load_cluster_spec(test::source_path(topology)), workload,
        spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "strategy"), "strategy"), sources);
    CHECK(driver::build_run_report(job).fits == row.at("ran").get<bool>());
  }
}

// Hopper's FP8 GEMMs take only TN operands, so Transformer Engine keeps a transposed FP8 copy of
// each weight beside the FP8 copy; Blackwell's take every layout and TE writes no transpose
// (non_tn_fp8_gemm_supported(): compute capability >= 10). Per parameter of the GPU: 2 bytes on
// H100 and 1 on B200 beside bf16 weights; 1 and 0 beside FP8 weights (fp8_param_gather).
TEST_CASE("FP8 weight copies by GEMM layout: the transpose only where FP8 GEMMs take TN operands alone") {
  const auto held = [](const std::string& topology, const std::string& extra) {
    const auto buffers = [&](const std::string& fp8) {
      const auto job = test::make_job(topology, "llama3-8b", "gpus=8,zero=1,mb=1,fp8=" + fp8);
      const auto r = driver::build_run_report(job);
      return std::pair{report::to_json(r).at("memory").at("buffers").get<double>(),
                       static_cast<double>(r.params_per_gpu)};
    };
    const auto [off, params] = buffers("off");
    return (buffers("tensorwise" + extra).first - off) / params;
  };
  CHECK(held("dgx-h100-superpod", "") == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(held("dgx-b200", "") == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(held("dgx-h100-superpod", ",fp8_param_gather=on") == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(held("dgx-b200", ",fp8_param_gather=on") == doctest::Approx(0.0).epsilon(1e-6));
}

// Not kept (ROCm Transformer Engine's keep_fp8_weight_transpose_cache=False, Megatron's
// disable_parameter_transpose_cache): the transpose is built before each backward data GEMM and
// freed after it, so the stage holds one weight's transpose at a time, Llama 3 8B's largest at
// TP 1 its fused gate and up projection (4,096 x 2 x 14,336 bytes), instead of one per parameter.
TEST_CASE("FP8 weight transposes not kept: one layer's largest weight's transpose instead of the stage's") {
  const auto stage = [](const std::string& topology, const std::string& extra) {
    const auto job = test::make_job(topology, "llama3-8b", "gpus=8,zero=1,mb=1,fp8=tensorwise" + extra);
    return model::estimate_memory(job).stages.at(0);
  };
  const auto kept = stage("dgx-h100-superpod", "");
  const auto built = stage("dgx-h100-superpod", ",fp8_transpose_cache=off");
  const double params = kept.params;  // TP 1: every parameter of the stage, 1 byte each
  const double largest = 4096.0 * 2 * 14336;
  CHECK(static_cast<double>(kept.held_buffers.count - built.held_buffers.count) == doctest::Approx(params));
  CHECK(static_cast<double>(built.bytes.buffers.count) ==
        doctest::Approx(static_cast<double>(kept.bytes.buffers.count) - params + largest));
  // the simulated step sees the transposes go: its held buffers at the peak drop by the same
  const auto reported = [](const std::string& extra) {
    const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,zero=1,mb=1,fp8=tensorwise" + extra);
    return report::to_json(driver::build_run_report(job)).at("memory").at("buffers").get<double>();
  };
  CHECK(reported("") - reported(",fp8_transpose_cache=off") == doctest::Approx(params));
  // with a pipeline, stage 0 peaks inside a layer's backward, where that layer's transpose is held:
  // the drop is the stage's parameters less the one weight
  const auto at_peak = [](const std::string& extra) {
    const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,pp=2,zero=1,mb=1,fp8=tensorwise" + extra);
    return std::pair{report::to_json(driver::build_run_report(job)), model::estimate_memory(job).stages.at(0).params};
  };
  const auto [piped, stage_params] = at_peak("");
  const auto built_piped = at_peak(",fp8_transpose_cache=off").first;
  REQUIRE(built_piped.at("memory_peak").at("phase") == "backward");
  CHECK(piped.at("memory").at("buffers").get<double>() - built_piped.at("memory").at("buffers").get<double>() ==
        doctest::Approx(stage_params - largest));
  // on Blackwell there is no transpose to keep
  CHECK(stage("dgx-b200", ",fp8_transpose_cache=off").bytes.buffers == stage("dgx-b200", "").bytes.buffers);
}

// NVIDIA's Megatron-Bridge performance tables (the bridge-* regression cases of results/reference/,
// each a run NVIDIA timed): every one ran on its GPUs, so every one must fit.
// The regression cases whose name starts with `prefix` that fit their GPUs, simulated.
int runs_that_fit(const std::string& prefix) {
  int rows = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path("results/reference"))) {
    if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
    const auto run = spec::load_json_file(entry.path().string()).at("run");
    CAPTURE(entry.path().filename().string());
    const spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
    // a shipped topology's path, or the topology inline (a device on another's platform)
    const auto& topology = run.at("topology");
    auto job = spec::resolve_job(
        topology.is_string() ? spec::load_cluster_spec(test::source_path(topology.get<std::string>()))
                             : spec::read_cluster_spec(topology, "t"),
        spec::read_workload_spec(run.at("workload"), "w"),
        spec::read_strategy_spec(spec::parse_inline_strategy(run.at("strategy").get<std::string>(), "s"), "s"),
        sources);
    driver::prepare_job(job, {});  // as `trainsim run`
    const auto r = driver::build_run_report(job);
    CHECK(r.fits);
    ++rows;
  }
  return rows;
}

TEST_CASE("every Megatron-Bridge performance run fits its GPUs" * doctest::test_suite("volume")) {
  CHECK(runs_that_fit("bridge-") == 21);
}

// MLPerf Training v5.1's Llama 3.1 8B runs (four MI355X and two MI350X systems, one 64-H100
// system, three B200 systems of 8-64 GPUs; no recomputation, FP8 weights, bf16 gradients) ran:
// each fits.
TEST_CASE("every MLPerf Llama 3.1 8B run fits its GPUs" * doctest::test_suite("volume")) {
  CHECK(runs_that_fit("mlperf51-llama31-8b-") == 10);
}

// MLPerf's Llama 2 70B LoRA on AMD Instinct (v5.0 and v5.1: 8 MI300X, MI325X or MI355X, and
// MangoBoost's 16 and 32 MI300X with CP): 69 B frozen FP8 weights on every GPU (TP 1), whose FP8
// transposes Megatron's disable_parameter_transpose_cache keeps from being resident. They ran.
TEST_CASE("every MLPerf Llama 2 70B LoRA run on AMD Instinct fits its GPUs" * doctest::test_suite("volume")) {
  CHECK(runs_that_fit("mlperf50-llama2-70b-lora-") + runs_that_fit("mlperf51-llama2-70b-lora-") == 7);
}

// The job of a regression case, its strategy with `from` replaced by `to`, resolved as `trainsim
// run` resolves it but without remat_to_fit.
spec::Job case_job(const std::string& name, const std::string& from = "", const std::string& to = "") {
  const auto run = spec::load_json_file(test::source_path("results/reference/" + name + ".json")).at("run");
  const spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
  auto strategy = run.at("strategy").get<std::string>();
  if (!from.empty()) strategy.replace(strategy.find(from), from.size(), to);
  return spec::resolve_job(spec::read_cluster_spec(run.at("topology"), "t"),
                           spec::read_workload_spec(run.at("workload"), "w"),
                           spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
}

TEST_CASE("remat_to_fit: the fewest whole layers per chunk whose recomputation fits, each costing its forward") {
  // MaxText 32B on a v5p-128 (recompute=dots, 65,536 tokens per chip): the dots policy keeps 44 KB
  // per token and layer, 86 GiB over 32 layers, at the edge of the chip's 95.74 GiB
  const auto t = driver::RunOptions{}.tunables(case_job("maxtext-v5p-32b-1xv5p-128").cluster).values;
  const auto live = [&](const spec::Job& j) {
    return model::estimate_memory(j, t.memory, t.collectives.channels).live_peak();
  };
  auto job = case_job("maxtext-v5p-32b-1xv5p-128");
  const auto device = job.cluster.device.memory;
  const auto before = live(job);
  REQUIRE(before > device);
  const auto fitted = model::apply_remat_to_fit(job, t.memory, t.collectives.channels);
  const int n = job.strategy.remat_layers;
  REQUIRE(n >= 1);
  CHECK(fitted.live_peak() <= device);
  CHECK(fitted.live_peak() == live(job));
  auto fewer = job;
  fewer.strategy.remat_layers = n - 1;
  CHECK(live(fewer) > device);  // the fewest
  // each layer recomputed whole keeps its input only (as full recomputation's): the live peak falls
  // by what the dots policy kept beyond the input, n times over, less one layer's worth that the
  // replay rebuilds during its backward
  auto full = case_job("maxtext-v5p-32b-1xv5p-128", "recompute=dots", "recompute=full");
  const auto& m = job.workload.model;
  const auto shape = model::gpu_layer_shape(job);
  const double dots = model::layer_checkpoint(job, m, shape, false, false).kept;
  const double whole = model::layer_checkpoint(full, m, shape, false, true).kept;
  CHECK(model::layer_checkpoint(job, m, shape, false, true).kept == whole);
  const auto drop = static_cast<double>((before - fitted.live_peak()).count);
  CHECK(drop >= (n - 1) * (dots - whole));
  CHECK(drop <= n * (dots - whole));
  // the hardware FLOPs gain a forward of each recomputed layer, less the dots policy's replay there
  auto plain = job;
  plain.strategy.remat_layers = 0;
  const double layer_fwd = model::sum_flops(model::layer_ops(m, {.micro_batch = 512, .seq_len = 2048}, false)).fwd;
  const double replay =
      model::replayed_fwd_flops(model::layer_ops(m, {.micro_batch = 512, .seq_len = 2048}, false),
                                model::layer_checkpoint(plain, m, {.micro_batch = 512, .seq_len = 2048}, false, false));
  CHECK(model::step_flops(job).hardware - model::step_flops(plain).hardware ==
        doctest::Approx(n * (layer_fwd - replay)).epsilon(1e-9));
  // where even every layer recomputed would not fit, or every layer is recomputed already, the
  // compiler has nothing that fits it: no layer is named, and the plan does not fit
  auto tiny = case_job("maxtext-v5p-32b-1xv5p-128");
  tiny.cluster.device.memory = Bytes{std::int64_t{8} << 30};
  model::apply_remat_to_fit(tiny, t.memory, t.collectives.channels);
  CHECK(tiny.strategy.remat_layers == 0);
  full.cluster.device.memory = live(full) - Bytes{1};
  model::apply_remat_to_fit(full, t.memory, t.collectives.channels);
  CHECK(full.strategy.remat_layers == 0);
  // off (PyTorch's way), the same plan does not fit and nothing is recomputed
  auto off = case_job("maxtext-v5p-32b-1xv5p-128", "recompute=dots", "recompute=dots,remat_to_fit=off");
  model::apply_remat_to_fit(off, t.memory, t.collectives.channels);
  CHECK(off.strategy.remat_layers == 0);
  CHECK(live(off) > device);
}

// MaxText's v5p runs (32B-1T on one and two slices): XLA fits each program in the chip's 95.74 GiB,
// rematerialising beyond the remat policy where it must (remat_to_fit, MaxText's default); they ran.
TEST_CASE("every MaxText run on TPU v5p fits its chips" * doctest::test_suite("volume")) {
  CHECK(runs_that_fit("maxtext-v5p-") == 16);
}

}  // namespace memory_validation_test

namespace memory_validation_test {

// PyTorch's caching allocator frees its unsplit cached blocks and retries a cudaMalloc that failed
// (c10/cuda/CUDACachingAllocator.cpp): what it reserves beyond the live tensors is not needed to
// run, so the live tensors decide the verdict and the reserve only puts a plan at risk.
TEST_CASE("the live tensors decide whether a plan fits; the allocator's reserve only puts it at risk") {
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8,zero=1,mb=1");
  for (const bool simulate : {false, true}) {
    CAPTURE(simulate);
    driver::RunOptions options;
    options.simulate = simulate;
    const auto base = driver::build_run_report(job, options);
    const auto live = base.live_peak_memory;
    const auto peak = base.peak_memory;
    REQUIRE(live > 0);
    REQUIRE(peak > live);  // the reserve is a share of what the step allocates and frees
    if (!simulate) {
      // the analytic live peak is the stages' largest sum of model states, activations and buffers
      std::int64_t largest = 0;
      for (const auto& s : base.memory.stages) {
        const auto& b = s.bytes;
        largest = std::max(largest, (b.params + b.grads + b.optimizer + b.activations + b.buffers).count);
      }
      CHECK(live == largest);
    }
    std::vector<std::unique_ptr<spec::Job>> jobs;  // a report points at its job
    const auto on = [&](std::int64_t device) {
      jobs.push_back(std::make_unique<spec::Job>(job));
      jobs.back()->cluster.device.memory = Bytes{device};
      return driver::build_run_report(*jobs.back(), options);
    };
    const auto between = on((live + peak) / 2);  // the live tensors fit, the reserve does not
    CHECK(between.fits);
    CHECK(between.memory_at_risk);
    CHECK(report::to_table(between).find("fit if the allocator gives back its reserve: at risk") != std::string::npos);
    const auto below = on(live - 1);
    CHECK_FALSE(below.fits);
    const auto roomy = on(static_cast<std::int64_t>(static_cast<double>(peak) / 0.9));
    CHECK(roomy.fits);
    CHECK_FALSE(roomy.memory_at_risk);
  }
}

// Megatron-LM's Llama 3 8B FP8 example on 8 H100s (tests/reference/launch/megatron/, copied from
// Megatron-LM's examples with its commit in README.md there) is NVIDIA's published recipe for
// that machine: it ran, so it must fit.
TEST_CASE("Megatron-LM's Llama 3 8B FP8 example fits 8 H100s") {
  const auto launch = spec::load_megatron_args(test::reference("launch/megatron/train_llama3_8b_h100_fp8.sh"));
  const auto cluster = spec::load_cluster_spec(test::source_path("topologies/dgx-h100-superpod.json"));
  const auto launched = spec::resolve_launch(launch, nlohmann::json::object(), std::nullopt, cluster.num_devices());
  const spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
  const auto job = spec::resolve_job(cluster, launched.workload, launched.strategy, sources);
  const auto r = driver::build_run_report(job);
  CHECK(r.fits);
  MESSAGE(fmt::format("peak {:.2f} GiB, live {:.2f} GiB of {:.2f}", static_cast<double>(r.peak_memory) / (1 << 30),
                      static_cast<double>(r.live_peak_memory) / (1 << 30), r.device_memory.as_double() / (1 << 30)));
}

}  // namespace memory_validation_test
