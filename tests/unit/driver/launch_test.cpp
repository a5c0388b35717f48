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

// The report without the preset-assumed keys (what a launch states explicitly is not assumed).
std::string report_text(const spec::Job& job) {
  auto j = report::to_json(driver::build_run_report(job));
  j["strategy"].erase("assumed");
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
  CHECK(launched.workload == workload);
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
  CHECK(launch.warnings.empty());
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
  CHECK_THROWS_WITH_AS(spec::read_megatron_args("--recompute-num-layers 2", "m"),
                       "m: --recompute-method and --recompute-num-layers need --recompute-granularity full", SpecError);
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
  // shell words: quotes, escapes, continuations, comments
  CHECK(spec::split_command_line("a \"b c\" 'd e' f\\ g \\\n h # comment\n i", "s") ==
        std::vector<std::string>{"a", "b c", "d e", "f g", "h", "i"});
}

}  // namespace launch_test
