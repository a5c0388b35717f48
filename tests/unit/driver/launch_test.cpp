// Launch configurations (Megatron-LM arguments, TorchTitan TOMLs) against the hand-written
// strategies of the regression cases in results/reference/: the launch lines below are written
// from the settings the papers and repositories state for those runs (Narayanan et al. 2021 Table
// 1; Megatron-LM 2020's 8B run; Korthikanti et al. 2022 Table 3; NeMo 24.07's Llama 3 70B recipe
// layout; TorchTitan's llama3_70b.toml with the 2D table's settings). Each must give the same
// strategy and the same report; only the report's list of preset-assumed keys may differ, since a
// launch states keys the hand-written strategy left to the preset.
#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/launch_config.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using nlohmann::json;

namespace launch_test {

struct Case {
  json run;  // the regression case's run: topology, workload, strategy
};

json regression_case(const std::string& name) {
  return spec::load_json_file(test::source_path("results/reference/" + name + ".json")).at("run");
}

spec::WorkloadSpec case_workload(const json& run) {
  const auto& w = run.at("workload");
  return w.is_string() ? spec::load_workload_spec(test::source_path(w.get<std::string>()))
                       : spec::read_workload_spec(w, "inline");
}

spec::ClusterSpec case_cluster(const json& run) {
  return spec::load_cluster_spec(test::source_path(run.at("topology").get<std::string>()));
}

// The report without the preset-assumed keys (what a launch states explicitly is not assumed) and
// without warnings (a launch names what it does not model; the launch tests check those).
std::string report_text(const spec::Job& job) {
  auto j = report::to_json(driver::build_run_report(job));
  j["strategy"].erase("assumed");
  j.erase("warnings");
  return j.dump();
}

void check_same(const std::string& name, const spec::LaunchConfig& launch, const std::string& extra) {
  CAPTURE(name);
  const auto run = regression_case(name);
  const auto cluster = case_cluster(run);
  const auto workload = case_workload(run);
  const auto launched = spec::resolve_launch(
      launch, extra.empty() ? json::object() : spec::parse_inline_strategy(extra, "extra"), workload,
      cluster.num_devices());
  const auto strategy_text = run.at("strategy").get<std::string>();
  const auto hand = spec::read_strategy_spec(spec::parse_inline_strategy(strategy_text, "hand"), "hand");
  CHECK(launched.strategy == hand);
  auto unwarned = launched.workload;
  unwarned.warnings = workload.warnings;
  CHECK(unwarned == workload);
  const spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
  const auto a = spec::resolve_job(cluster, launched.workload, launched.strategy, sources);
  const auto b = spec::resolve_job(cluster, workload, hand, sources);
  CHECK(report_text(a) == report_text(b));
}

TEST_CASE("Megatron-LM launch lines give the hand-written strategies and reports") {
  // Narayanan et al. 2021 Table 1, 145.6B: 192 nodes of 8, tp 8, pp 8, interleaved with 2 chunks
  // of 5 layers per stage, micro-batch 2, batch 2,304, full recomputation
  check_same("megatron2021-t1-145.6b", spec::read_megatron_args(R"(
      torchrun --nnodes 192 --nproc_per_node 8 pretrain_gpt.py \
        --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 \
        --num-layers-per-virtual-pipeline-stage 5 \
        --num-layers 80 --hidden-size 12288 --num-attention-heads 96 \
        --seq-length 2048 --max-position-embeddings 2048 \
        --micro-batch-size 2 --global-batch-size 2304 --checkpoint-activations \
        --lr 6.0e-5 --min-lr 6.0e-6 --lr-decay-style cosine --train-iters 10000 \
        --data-path my-gpt_text_document --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt)",
                                                                "t1"),
             "framework=megatron-2021");
  // Megatron-LM 2020, the 8.3B model on one DGX-2H node: tp 8, micro-batch 16, recomputation
  check_same("megatron2020-8b-tp8", spec::read_megatron_args(R"(
      torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8
        --num-layers 42 --hidden-size 4096 --num-attention-heads 32 --seq-length 1024
        --micro-batch-size 16 --global-batch-size 16 --checkpoint-activations)",
                                                             "2020"),
             "framework=megatron-2021");
  // Korthikanti et al. 2022 Table 3, 175B: tp 8, pp 8, 3 chunks per stage (96 layers), sequence
  // parallelism with selective recomputation
  check_same("korthikanti-175b-sp-plus-selective", spec::read_megatron_args(R"(
      torchrun --nnodes 8 --nproc_per_node 8 pretrain_gpt.py \
        --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 \
        --num-layers-per-virtual-pipeline-stage 4 --sequence-parallel --recompute-activations \
        --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 \
        --micro-batch-size 1 --global-batch-size 64)",
                                                                            "korthikanti"),
             "framework=megatron-2021");
  // NeMo 24.07's Llama 3 70B on 64 H100s: tp 4, pp 4, cp 2, 5 virtual stages, sequence parallel
  check_same("nemo2407-llama3-70b-64gpus", spec::read_megatron_args(R"(
      torchrun --nnodes 8 --nproc_per_node 8 pretrain_gpt.py \
        --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --context-parallel-size 2 \
        --virtual-pipeline-model-parallel-size 5 --sequence-parallel \
        --micro-batch-size 1 --global-batch-size 128 --seq-length 8192)",
                                                                    "nemo"),
             "framework=nemo");
  // Megatron-Bridge 25.09's DeepSeek-V3 on 1,024 H100s: its layout sets 4 virtual stages of 8 and
  // the interleaved schedule, as Megatron-LM's arguments.py derives them
  check_same("bridge-25.09-h100-deepseek-v3-1024gpus",
             spec::read_megatron_args(R"(
      torchrun --nnodes 128 --nproc_per_node 8 pretrain_gpt.py \
        --tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 8 \
        --pipeline-model-parallel-layout "Et|(tt|)*30mL" \
        --expert-model-parallel-size 64 --expert-tensor-parallel-size 1 --moe-shared-expert-overlap \
        --recompute-granularity selective --micro-batch-size 1 --global-batch-size 8192 --seq-length 4096)",
                                      "bridge"),
             "framework=nemo,fp8=tensorwise,grad_reduce_dtype=bf16,loss=fused_inplace,"
             "recompute_modules=mla_up_proj+mlp,dispatcher=deepep");
}

TEST_CASE("Megatron's embedding and loss counted in the pipeline split give the recipe's layout") {
  // Megatron-Bridge's Qwen3-235B-A22B on 256 H100s: 94 layers with the embedding and the loss
  // counted are 96 slots, 3 in each of PP 8 × VP 4 virtual stages (the strategy is compared, not
  // simulated: the row takes seconds)
  const auto run = launch_test::regression_case("bridge-26.04-h100-qwen3-235b-a22b-256gpus");
  const auto launched = spec::resolve_launch(
      spec::read_megatron_args(R"(
      torchrun --nnodes 32 --nproc_per_node 8 pretrain_gpt.py \
        --tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 8 \
        --virtual-pipeline-model-parallel-size 4 \
        --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \
        --expert-model-parallel-size 32 --expert-tensor-parallel-size 1 --overlap-moe-expert-parallel-comm \
        --micro-batch-size 1 --global-batch-size 8192 --seq-length 4096)",
                               "qwen3"),
      spec::parse_inline_strategy(
          "framework=nemo,fp8=tensorwise,grad_reduce_dtype=bf16,loss=fused_inplace,tp_overlap=off", "extra"),
      launch_test::case_workload(run), 1024);
  const auto hand =
      spec::read_strategy_spec(spec::parse_inline_strategy(run.at("strategy").get<std::string>(), "hand"), "hand");
  CHECK(launched.strategy == hand);
  REQUIRE(launched.strategy.pipeline_layout);
  CHECK(launched.strategy.pipeline_layout->text == "Et*2|(t*3|)*30t*2L");
  // slots that do not split evenly are Megatron's assertion, exit 2
  CHECK_THROWS_WITH_AS(spec::resolve_launch(spec::read_megatron_args("--pipeline-model-parallel-size 3 "
                                                                     "--account-for-loss-in-pipeline-split",
                                                                     "m"),
                                            nlohmann::json::object(), launch_test::case_workload(run), 1024),
                       doctest::Contains("95 layers (with the embedding and the loss counted) do not split evenly"),
                       SpecError);
}

TEST_CASE("a TorchTitan TOML gives the hand-written strategy and report") {
  // TorchTitan's Llama 3.1 70B 2D run: FSDP over what remains, tp 8 with float8 and compile, full
  // activation checkpointing, 16 sequences of 8,192 per rank
  const auto toml = R"(
[job]
description = "Llama 3 70B training"
[model]
name = "llama3"
flavor = "70B"
converters = ["float8"]
[optimizer]
name = "AdamW"
lr = 1.5e-4
[training]
local_batch_size = 16
seq_len = 8192
steps = 1000
[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
[activation_checkpoint]
mode = "full"
[compile]
enable = true
[float8]
enable_fsdp_float8_all_gather = true
)";
  check_same("torchtitan-llama3.1-70b-256gpus-2d", spec::read_torchtitan_toml(toml, "llama3_70b.toml"), "gpus=256");
  const auto launch = spec::read_torchtitan_toml(toml, "llama3_70b.toml");
  // the flavour gives the model: TorchTitan's Llama 3 70B
  REQUIRE(launch.model.has_value());
  CHECK(launch.model->ffn_hidden == 28672);
  // compiled with job_config.py's default components, model and loss: the loss's compilation and
  // the FP8 all-gather are not modelled, and named
  REQUIRE(launch.warnings.size() == 1);
  CHECK(launch.warnings[0] == "llama3_70b.toml: not read or not modelled, assumed not to change the cost: /compile/components \"loss\" "
                              "(priced eager), /float8/enable_fsdp_float8_all_gather");
}

TEST_CASE("launch configurations: bad input names the argument; what is not understood is listed") {
  CHECK_THROWS_WITH_AS(spec::read_megatron_args("--bf16 --fp16", "m"), "m: --bf16 and --fp16 contradict each other",
                       SpecError);
  CHECK_THROWS_WITH_AS(spec::read_megatron_args("--tensor-model-parallel-size eight", "m"),
                       "m: --tensor-model-parallel-size eight: expected an integer in [1, 1048576]", SpecError);
  CHECK_THROWS_WITH_AS(
      spec::read_megatron_args("--virtual-pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4",
                               "m"),
      doctest::Contains("contradict each other"), SpecError);
  CHECK_THROWS_WITH_AS(spec::read_megatron_args(
                           "--pipeline-model-parallel-layout 'Et|tL' --num-layers-per-virtual-pipeline-stage 1", "m"),
                       "m: give no more than one of --num-layers-per-virtual-pipeline-stage, "
                       "--num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout",
                       SpecError);
  CHECK_THROWS_WITH_AS(spec::read_megatron_args("--recompute-num-layers 2", "m"),
                       "m: --recompute-method and --recompute-num-layers need --recompute-granularity full", SpecError);
  // Megatron's recompute methods as trainsim's keys: block counts the first N layers, uniform groups of N
  const auto uniform = spec::read_megatron_args(
      "--recompute-granularity full --recompute-method uniform --recompute-num-layers 2", "m");
  CHECK(uniform.strategy.at("recompute_method") == "uniform");
  CHECK(uniform.strategy.at("recompute_layers") == 2);
  const auto per_layer = spec::read_megatron_args(
      "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1", "m");
  CHECK_FALSE(per_layer.strategy.contains("recompute_method"));
  const auto block = spec::read_megatron_args(
      "--recompute-granularity full --recompute-method block --recompute-num-layers 5", "m");
  CHECK_FALSE(block.strategy.contains("recompute_method"));
  CHECK(block.strategy.at("recompute_layers") == 5);
  // Transformer Engine's activation offloading: the layers offloaded, none by Megatron's default
  CHECK(spec::read_megatron_args("--cpu-offloading --cpu-offloading-num-layers 6", "m").strategy.at("offload_layers") ==
        6);
  CHECK_FALSE(spec::read_megatron_args("--cpu-offloading", "m").strategy.contains("offload_layers"));
  // the two MoE overlaps: shared experts beside the dispatch, and combined 1F1B
  CHECK(spec::read_megatron_args("--moe-shared-expert-overlap", "m").strategy.at("ep_overlap") == "on");
  CHECK(spec::read_megatron_args("--overlap-moe-expert-parallel-comm", "m").strategy.at("overlap_moe_comm") == "on");
  CHECK_THROWS_WITH_AS(spec::read_megatron_args("--cpu-offloading-num-layers 6", "m"),
                       "m: --cpu-offloading-num-layers needs --cpu-offloading", SpecError);
  const auto odd = spec::read_megatron_args("--tensor-model-parallel-size 2 --use-cpu-initialization --moe-grouped-gemm "
                                            "--lr 1e-4 --save /ckpt",
                                            "m");
  REQUIRE(odd.warnings.size() == 1);
  CHECK(odd.warnings[0] == "m: argument(s) not understood, assumed not to change the cost: --moe-grouped-gemm "
                           "--use-cpu-initialization");
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml("[parallelism\ntensor_parallel_degree = 2\n", "t.toml"),
                       doctest::Contains("t.toml: invalid TOML"), SpecError);
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml("[parallelism]\ntensor_parallel_degree = \"two\"\n", "t.toml"),
                       doctest::Contains("t.toml: /parallelism/tensor_parallel_degree"), SpecError);
  // a model from arguments alone, as a workload file writes it
  const auto launch = spec::read_megatron_args(
      "--num-layers 80 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --global-batch-size 2304 "
      "--vocab-size 51200 --bf16",
      "m");
  const auto built = spec::resolve_launch(launch, json::object(), std::nullopt, 8).workload;
  const auto file = spec::load_workload_spec(test::workload("megatron2021-145.6b"));
  CHECK(built.model == file.model);
  CHECK(built.training == file.training);
  // Megatron-Core's --mtp-num-layers: the multi-token prediction modules
  const auto mtp = spec::read_megatron_args(
      "--num-layers 80 --hidden-size 12288 --num-attention-heads 96 --vocab-size 51200 --mtp-num-layers 1", "m");
  REQUIRE(mtp.model.has_value());
  CHECK(mtp.model->mtp_layers == 1);
  CHECK(launch.model->mtp_layers == 0);
  // a launch line whose modules contradict the workload file's is refused, as its layers are
  CHECK_THROWS_WITH_AS(
      spec::resolve_launch(mtp, json::object(), spec::load_workload_spec(test::workload("megatron2021-145.6b")), 8),
      doctest::Contains("the multi-token prediction modules (--mtp-num-layers) 1 contradicts"), SpecError);
  // shell words: quotes, escapes, continuations, comments
  CHECK(spec::split_command_line("a \"b c\" 'd e' f\\ g \\\n h # comment\n i", "s") ==
        std::vector<std::string>{"a", "b c", "d e", "f g", "h", "i"});
}

// TorchTitan's own TOMLs, copied under tests/reference/launch/torchtitan/ (README.md there gives
// each file's commit): what TorchTitan runs from them, read from its job_config.py.
spec::LaunchConfig titan(const std::string& file) {
  return spec::load_torchtitan_toml(test::reference("launch/torchtitan/" + file));
}

std::string warnings_of(const spec::LaunchConfig& launch) {
  std::string out;
  for (const auto& w : launch.warnings) out += w + "\n";
  return out;
}

TEST_CASE("TorchTitan's TOMLs: converters as a string or a list enable FP8; [float8] keys are named") {
  // llama3_405b.toml of April 2025 writes converters = "float8", of February 2026 ["float8"];
  // job_config.py splits a string list on commas (string_list), so both apply the float8 converter
  const auto string_form = titan("llama3_405b-2025-04.toml");
  const auto list_form = titan("llama3_405b-2026-02.toml");
  CHECK(string_form.strategy.at("fp8") == "tensorwise");
  CHECK(list_form.strategy.at("fp8") == "tensorwise");
  // the 2025 file's [float8] settings tune the converter's cast: not modelled, named
  for (const auto* key : {"/float8/enable_fsdp_float8_all_gather", "/float8/precompute_float8_dynamic_scale_for_fsdp",
                          "/float8/filter_fqns"})
    CHECK(warnings_of(string_form).find(key) != std::string::npos);
  // the 2026 file's [quantize.linear.float8] is named as a table not read
  CHECK(warnings_of(list_form).find("/quantize") != std::string::npos);
  // without the converter, [float8]'s settings do nothing in TorchTitan: llama3_8b.toml comments
  // the converter out
  const auto eight = titan("llama3_8b-2025-04.toml");
  CHECK_FALSE(eight.strategy.contains("fp8"));
  CHECK(warnings_of(eight).find("/float8") == std::string::npos);
  // a list of several converters names the ones not modelled
  const auto mixed = spec::read_torchtitan_toml("[model]\nconverters = \"float8, mx\"\n", "t.toml");
  CHECK(mixed.strategy.at("fp8") == "tensorwise");
  CHECK(warnings_of(mixed).find("/model/converters \"mx\"") != std::string::npos);
  CHECK_THROWS_WITH_AS(spec::read_torchtitan_toml("[model]\nconverters = 8\n", "t.toml"),
                       doctest::Contains("t.toml: /model/converters: expected a list of strings"), SpecError);
}

TEST_CASE("TorchTitan's [compile]: only \"model\" among the components compiles the blocks") {
  // deepseek_v3_671b.toml: enable = true, components = ["loss"]: the blocks run eager
  const auto deepseek = titan("deepseek_v3_671b-2026-02.toml");
  CHECK(deepseek.strategy.at("compile") == "off");
  CHECK(warnings_of(deepseek).find("/compile/components \"loss\"") != std::string::npos);
  // llama3_405b.toml of 2026: components = ["model", "loss"]
  CHECK(titan("llama3_405b-2026-02.toml").strategy.at("compile") == "on");
  // the 2025 layout's [training] compile = true
  CHECK(titan("llama3_405b-2025-04.toml").strategy.at("compile") == "on");
  const auto compile = [](const std::string& table) {
    return spec::read_torchtitan_toml("[compile]\n" + table, "t.toml").strategy.at("compile");
  };
  CHECK(compile("enable = true\n") == "on");  // job_config.py's default components: model and loss
  CHECK(compile("enable = false\ncomponents = [\"model\"]\n") == "off");
  CHECK(compile("components = [\"model\"]\n") == "off");  // enable defaults to false
  CHECK(compile("enable = true\ncomponents = \"model,loss\"\n") == "on");
  CHECK(compile("enable = true\ncomponents = []\n") == "off");
  CHECK_THROWS_WITH_AS(compile("enable = true\ncomponents = [\"graph\"]\n"),
                       "t.toml: /compile/components: \"graph\": expected model or loss", SpecError);
}

TEST_CASE("TorchTitan's zero-bubble schedules run, as zb-h1 with one stage per rank, and say so") {
  const auto read = [](const std::string& schedule) {
    return spec::read_torchtitan_toml(
        "[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = \"" + schedule + "\"\n", "t.toml");
  };
  for (const auto* schedule : {"ZBVZeroBubble", "InterleavedZeroBubble"}) {
    CAPTURE(schedule);
    const auto config = read(schedule);
    CHECK(config.strategy.at("schedule") == "zb-h1");
    CHECK_FALSE(config.strategy.contains("vpp"));  // zb-h1 takes no virtual stages: was refused
    CHECK(warnings_of(config).find(fmt::format("pipeline schedule {} is simulated as zb-h1 with one stage per rank",
                                               schedule)) != std::string::npos);
  }
  // the looped ones keep their two stages per rank
  CHECK(read("LoopedBFS").strategy.at("vpp") == 2);
  CHECK(read("Interleaved1F1B").strategy.at("vpp") == 2);
  // DualPipeV: its V of two stages per rank
  const auto v = read("DualPipeV");
  CHECK(v.strategy.at("schedule") == "dualpipev");
  CHECK(v.strategy.at("vpp") == 2);
  CHECK(warnings_of(v).find("pipeline schedule DualPipeV is simulated as dualpipev") != std::string::npos);
}

TEST_CASE("TorchTitan's disable_loss_parallel: the plain fp32 loss under TP; the preset's loss parallel otherwise") {
  const auto read = [](const std::string& text) { return spec::read_torchtitan_toml(text, "t.toml").strategy; };
  // parallelism.disable_loss_parallel (job_config.py, default false) turns DTensor's loss off
  const auto off = read("[parallelism]\ntensor_parallel_degree = 8\ndisable_loss_parallel = true\n");
  CHECK(off.at("loss") == "upcast");
  CHECK_FALSE(read("[parallelism]\ntensor_parallel_degree = 8\n").contains("loss"));
  // without TP there are no sharded logits: the flag changes nothing
  CHECK_FALSE(read("[parallelism]\ndisable_loss_parallel = true\n").contains("loss"));
}

TEST_CASE("a TorchTitan TOML's seq_len and batch are used; a flag that contradicts them names both values") {
  // llama3_8b.toml of April 2025: batch_size = 1, seq_len = 8192, tp 1, FSDP over the rest; on 64
  // GPUs the global batch is 1 × 64
  const auto launch = titan("llama3_8b-2025-04.toml");
  const auto t = spec::launch_training(launch, json::object(), {}, 64);
  CHECK(t.seq_len == 8192);
  CHECK(t.global_batch == 64);
  // the same values on the command line agree
  CHECK(spec::launch_training(launch, json::object(), {.seq_len = 8192, .global_batch = 64}, 64).global_batch == 64);
  CHECK_THROWS_WITH_AS(spec::launch_training(launch, json::object(), {.seq_len = 4096}, 64),
                       doctest::Contains("llama3_8b-2025-04.toml: /training/seq_len 8192 conflicts with --seq-len 4096"),
                       SpecError);
  CHECK_THROWS_WITH_AS(spec::launch_training(launch, json::object(), {.global_batch = 128}, 64),
                       doctest::Contains("/training/batch_size 1 × data-parallel degree 64 = global batch 64 conflicts "
                                         "with --global-batch 128"),
                       SpecError);
  // a Hugging Face config takes them: no --seq-len or --global-batch needed
  const auto hf = spec::load_workload_spec(test::source_path("workloads/hf/llama-3.1-8b/config.json"),
                                           spec::launch_training(launch, json::object(), {}, 8));
  CHECK(hf.training.seq_len == 8192);
  CHECK(hf.training.global_batch == 8);
  // global_batch_size (gradient accumulation) states the batch; a TOML that states none takes the flag
  const auto global = spec::read_torchtitan_toml("[training]\nlocal_batch_size = 2\nglobal_batch_size = 64\n", "g.toml");
  CHECK_THROWS_WITH_AS(spec::launch_training(global, json::object(), {.global_batch = 32}, 8),
                       doctest::Contains("g.toml: /training/global_batch_size 64 conflicts with --global-batch 32"),
                       SpecError);
  const auto none = spec::read_torchtitan_toml("[parallelism]\ntensor_parallel_degree = 8\n", "n.toml");
  CHECK(spec::launch_training(none, json::object(), {.global_batch = 32}, 64).global_batch == 32);
}

// NVIDIA's Megatron-LM example scripts, copied under tests/reference/launch/megatron/ (README.md
// there gives the commit): the settings each script states, in its own text.
spec::LaunchConfig megatron_script(const std::string& file) {
  return spec::load_megatron_args(test::reference("launch/megatron/" + file));
}

TEST_CASE("Megatron-LM's example scripts: bash arrays, variables and conditionals expanded as bash does") {
  // train_gpt3_175b_distributed.sh: GPUS_PER_NODE=8, NUM_NODES=1 through DISTRIBUTED_ARGS; the
  // model, training and parallel arrays expanded unquoted into the torchrun line
  const auto gpt = megatron_script("train_gpt3_175b_distributed.sh");
  CHECK(gpt.strategy.at("tp") == 8);
  CHECK(gpt.strategy.at("pp") == 16);
  CHECK(gpt.strategy.at("mb") == 1);
  CHECK(gpt.strategy.at("gpus") == 8);
  CHECK(gpt.training.seq_len == 2048);
  CHECK(gpt.training.global_batch == 1536);
  CHECK(gpt.training.dtype == "fp16");
  REQUIRE(gpt.model);
  CHECK(gpt.model->layers == 96);
  CHECK(gpt.model->hidden == 12288);
  CHECK(gpt.model->heads == 96);
  // its quoted batch-size schedule is one array element, split into words by the unquoted expansion
  REQUIRE(gpt.warnings.size() == 1);
  CHECK(gpt.warnings[0].ends_with("assumed not to change the cost: --step-batch-size-schedule"));

  // train_llama3_8b_h100_fp8.sh: ${1:-...} defaults, DTYPE="fp8" taking the if [[ ]] branch whose
  // quoted elements ("--fp8-format hybrid") split into words, TRAINING_ARGS+=("${DDP_ARGS[@]}"),
  // the MOCK data branch (--vocab-size 128256), [ ! -f pretrain_gpt.py ] not taken
  const auto llama = megatron_script("train_llama3_8b_h100_fp8.sh");
  CHECK(llama.strategy.at("tp") == 1);
  CHECK(llama.strategy.at("cp") == 1);
  CHECK(llama.strategy.at("gpus") == 8);
  CHECK(llama.strategy.at("fp8") == "tensorwise");
  CHECK(llama.strategy.at("zero") == 1);
  CHECK(llama.strategy.at("overlap_grad_reduce") == "on");
  CHECK(llama.strategy.at("overlap_param_gather") == "on");
  CHECK(llama.strategy.at("grad_reduce_dtype") == "bf16");
  CHECK(llama.strategy.at("fp8_param_gather") == "on");
  CHECK(llama.strategy.at("loss") == "vocab_parallel");  // --cross-entropy-loss-fusion, impl 'native'
  CHECK(llama.training.seq_len == 8192);
  CHECK(llama.training.global_batch == 128);
  CHECK(llama.training.dtype == "bf16");
  REQUIRE(llama.model);
  CHECK(llama.model->layers == 32);
  CHECK(llama.model->hidden == 4096);
  CHECK(llama.model->ffn_hidden == 14336);
  CHECK(llama.model->kv_heads == 8);
  CHECK(llama.model->vocab == 128256);
  CHECK(llama.model->mlp == spec::MlpKind::Swiglu);
  CHECK(llama.model->norm == spec::NormKind::RmsNorm);
}

TEST_CASE("launch scripts: variables with defaults, arrays, continuations, torchrun forms") {
  const auto read = [](const std::string& text) { return spec::read_megatron_args(text, "s.sh"); };
  const auto a = read(R"(#!/bin/bash
TP=4
NUM_LAYERS=${NUM_LAYERS:-32}
PP=${PP-2}
ARGS=(
    --tensor-model-parallel-size $TP   # a comment
    --pipeline-model-parallel-size ${PP}
)
EXTRA=("--micro-batch-size 2" --sequence-parallel)
export CUDA_DEVICE_MAX_CONNECTIONS=1
python -m torch.distributed.run --nnodes=2 --nproc_per_node=8 pretrain_gpt.py \
    "${ARGS[@]}" ${EXTRA[@]} \
    --num-layers $NUM_LAYERS --hidden-size 4096 --num-attention-heads 32 --vocab-size 32000 \
    --seq-length $((1024 * 2)) --global-batch-size 64
)");
  CHECK(a.strategy.at("tp") == 4);
  CHECK(a.strategy.at("pp") == 2);
  CHECK(a.strategy.at("mb") == 2);
  CHECK(a.strategy.at("sp") == "on");
  CHECK(a.strategy.at("gpus") == 16);  // --nnodes=2 × --nproc_per_node=8
  CHECK(a.model->layers == 32);
  CHECK(a.training.seq_len == 2048);
  // torchrun's space-separated form, and an if/else
  const auto b = read("N=2\nif [[ $N -gt 1 ]]; then\n  TP=8\nelse\n  TP=1\nfi\n"
                      "torchrun --nnodes $N --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size $TP");
  CHECK(b.strategy.at("tp") == 8);
  CHECK(b.strategy.at("gpus") == 16);
}

TEST_CASE("launch scripts: $(( )) as bash computes it") {
  const auto last = [](const std::string& expr) {
    return spec::launch_script_words("N=3\ntorchrun pretrain_gpt.py --x $((" + expr + "))", "s.sh").back();
  };
  CHECK(last("2 + 3") == "5");
  CHECK(last("2 * (3 + 1) - -1") == "9");
  CHECK(last("7 % 3 + 10 / 2") == "6");
  CHECK(last("N * ${N} - $N") == "6");
  CHECK(last("-7 / 2") == "-3");  // C's division, as bash's
  CHECK(last("9223372036854775806 + 1") == "9223372036854775807");
}

TEST_CASE("launch scripts: a construct trainsim does not expand is an error naming it and its line") {
  const auto error = [](const std::string& text) {
    try {
      spec::read_megatron_args(text, "s.sh");
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error("for i in 1 2; do echo $i; done\ntorchrun pretrain_gpt.py") ==
        "s.sh: line 1: `for` is not supported in a launch script (variables, arrays, if [[ ]] and one launch command "
        "are)");
  CHECK(error("NODES=$(scontrol show hostnames)\ntorchrun --nnodes $NODES pretrain_gpt.py") ==
        "s.sh: line 1: command substitution $(scontrol show hostnames) is not supported");
  CHECK(error("source env.sh\ntorchrun pretrain_gpt.py") ==
        "s.sh: line 1: \"source\" is not a command trainsim reads (a launch script may set variables and arrays, test "
        "them with if [[ ]], and run torchrun, python -m torch.distributed.run or pretrain_gpt.py once)");
  CHECK(error("A=(1 2)\n\ntorchrun pretrain_gpt.py --num-layers ${#A[@]}") ==
        "s.sh: line 3: ${#A[@]} is not supported");
  CHECK(error("torchrun pretrain_gpt.py | tee log") ==
        "s.sh: line 1: \"|\" (a pipe, redirection, list or subshell) in the launch command is not supported");
  CHECK(error("torchrun --nnodes 1:4 --nproc_per_node 8 pretrain_gpt.py") ==
        "s.sh: torchrun --nnodes \"1:4\": expected a number of nodes (an elastic range such as 1:4 has no one world "
        "size: give -s gpus=N)");
  // bash would pass nothing for an unset variable, and the argument would lose its value unseen
  CHECK(error("ARGS=(--tensor-model-parallel-size $TP)\ntorchrun pretrain_gpt.py ${ARGS[@]}") ==
        "s.sh: line 1: $TP is not set: give it a value in the script (or write ${TP:-DEFAULT})");
  // a default's word cut at its closing brace inside a single quote (found by fuzzing: it looped)
  CHECK(error("torchrun pretrain_gpt.py ${X-'a}") == "s.sh: line 1: an unclosed single quote in 'a");
  CHECK(error("A=\"${X:-'a}\"\ntorchrun pretrain_gpt.py") == "s.sh: line 1: an unclosed single quote in 'a");
  // an unclosed ${ (inside double quotes the tokenizer does not bracket it), in a word and in $(( ))
  // (which looped as well)
  CHECK(error("X=8\ntorchrun pretrain_gpt.py \"${X\"") == "s.sh: line 2: an unterminated ${ in ${X\"");
  CHECK(error("X=1\ntorchrun pretrain_gpt.py $((${X))") == "s.sh: line 2: an unterminated ${ in $((${X))");
  // 64-bit arithmetic that would wrap (or trap: INT64_MIN / -1), and nesting past 64 levels (the
  // stack ran out at 200,000 parentheses)
  CHECK(error("torchrun pretrain_gpt.py $(( (-9223372036854775807-1) / -1 ))") ==
        "s.sh: line 1: arithmetic overflow in $(( ))");
  CHECK(error("torchrun pretrain_gpt.py $(( 9223372036854775807 + 1 ))") ==
        "s.sh: line 1: arithmetic overflow in $(( ))");
  CHECK(error("torchrun pretrain_gpt.py $((" + std::string(100000, '(') + "1" + std::string(100000, ')') + "))") ==
        "s.sh: line 1: expansions nested deeper than 64 levels are not supported");
  CHECK(error("torchrun pretrain_gpt.py $((" + std::string(100000, '-') + "1))") ==
        "s.sh: line 1: expansions nested deeper than 64 levels are not supported");
  CHECK(error("echo hello\n") ==
        "s.sh: line 1: no launch command (torchrun, python -m torch.distributed.run, or pretrain_gpt.py)");
}

}  // namespace launch_test

TEST_CASE("a sequence longer than the config's max_position_embeddings is noted, not refused") {
  // workloads/hf/llama-3.1-8b/config.json: max_position_embeddings 131072
  const auto at = [](std::int64_t seq) {
    const auto w = spec::load_workload_spec(test::source_path("workloads/hf/llama-3.1-8b/config.json"),
                                            {.seq_len = seq, .global_batch = 8, .dtype = "bf16", .optimizer = "adamw"});
    return test::make_job("dgx-h100-superpod", w, "gpus=64,tp=8,cp=8").warnings;
  };
  const auto note = [](const std::vector<std::string>& warnings) {
    return std::any_of(warnings.begin(), warnings.end(),
                       [](const std::string& w) { return w.find("max_position_embeddings") != std::string::npos; });
  };
  CHECK(note(at(262144)));
  CHECK_FALSE(note(at(131072)));
}
