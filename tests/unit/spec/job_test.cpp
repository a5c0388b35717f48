#include <doctest/doctest.h>

#include "common/paths.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/reader.hpp"

using namespace trainsim;
using namespace trainsim::spec;

namespace {

Job job(const std::string& topology, const std::string& workload, const std::string& strategy) {
  Sources sources{.topology = topology, .workload = workload, .strategy = "s"};
  return resolve_job(load_cluster_spec(test::topology(topology)), load_workload_spec(test::workload(workload)),
                     read_strategy_spec(parse_inline_strategy(strategy, "s"), "s"), sources);
}

std::string error_of(const std::string& topology, const std::string& workload, const std::string& strategy) {
  try {
    job(topology, workload, strategy);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("dp is derived from the devices when left out") {
  const auto j = job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024");
  CHECK(j.gpus == 1024);
  CHECK(j.dp == 16);
  CHECK(j.micro_batches == 96);  // 1536 / (16 · 1)
  CHECK(j.stage_layers == std::vector<int>(8, 12));
}

TEST_CASE("gpus follow from an explicit dp") {
  const auto j = job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,dp=2");
  CHECK(j.gpus == 128);
}

TEST_CASE("uneven first and last stages: Llama 3 405B's 7 + 14×8 + 7") {
  const auto j = job("h100-roce-llama3", "llama3-405b", "tp=8,pp=16,dp=128,first_stage_layers=7,last_stage_layers=7");
  REQUIRE(j.stage_layers.size() == 16);
  CHECK(j.stage_layers.front() == 7);
  CHECK(j.stage_layers[1] == 8);
  CHECK(j.stage_layers.back() == 7);
  CHECK(j.gpus == 16384);
}

TEST_CASE("each cross-field rule has its own message") {
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=5,gpus=960") ==
        "s: /tp: 5 does not divide heads (96) of workload \"gpt3-175b\"\n"
        "s: /tp: 5 and kv_heads (96) must divide one another\ns: /tp: 5 does not divide ffn_hidden (49152)");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,dp=16,gpus=512") ==
        "s: /dp: tp·cp·pp·dp = 8·1·8·16 = 1024 but gpus = 512");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=8192") ==
        "s: /gpus: 8192 GPUs requested but topology \"dgx-a100-superpod\" has 4480 devices");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=7,gpus=56") ==
        "s: /pp: pp·vpp = 7·1 = 7 does not divide layers (96): give the outer stages their own counts, e.g. "
        "first_stage_layers=13,last_stage_layers=13 (13 + 5×14 + 13 = 96)");
  // the uneven layouts that were run: Llama 3 405B's 126 layers on 16 stages as 7 + 14×8 + 7 (Dubey
  // et al. 2024), DeepSeek-V3's 61 on 16 as 3 + 14×4 + 2 (docs/model.md)
  CHECK(error_of("h100-roce-llama3", "llama3-405b", "tp=8,pp=16,gpus=2048") ==
        "s: /pp: pp·vpp = 16·1 = 16 does not divide layers (126): give the outer stages their own counts, e.g. "
        "first_stage_layers=7,last_stage_layers=7 (7 + 14×8 + 7 = 126)");
  CHECK(error_of("h100-roce-llama3", "deepseek-v3-like", "pp=16,ep=64,gpus=2048").find(
            "first_stage_layers=3,last_stage_layers=2 (3 + 14×4 + 2 = 61)") != std::string::npos);
  CHECK(error_of("h100-roce-llama3", "deepseek-v3-like", "pp=16,ep=64,gpus=2048,first_stage_layers=3,last_stage_layers=2") ==
        "no error");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,dp=16,mb=7") ==
        "s: /mb: global batch 1536 is not divisible by dp·mb = 16·7 = 112");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,ep=2,gpus=16") ==
        "s: /ep: 2 needs a mixture-of-experts model; workload \"gpt3-175b\" has none");
  CHECK(error_of("dgx-a100-superpod", "mixtral-8x7b", "tp=1,ep=3,gpus=32") ==
        "s: /ep: 3 does not divide experts (8)\n"
        "s: /ep: 3 does not divide dp·cp = 32: experts are sharded within the data-parallel ranks (or fold "
        "them over tp with etp=1)");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,cp=3,gpus=24") ==
        "s: /cp: seq_len 2048 is not divisible by 2·cp = 6 (causal load-balanced chunks)");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=4,vpp=2,gpus=32") ==
        "s: /vpp: vpp = 2 needs schedule=interleaved or dualpipev");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=1,schedule=interleaved,vpp=2,gpus=8") ==
        "s: /schedule: interleaved needs pp of at least 2");
  CHECK(error_of("gb200-nvl72", "llama3-8b", "tp=4,gpus=64,segment=19") ==
        "s: /segment: 19 hosts per node requested, but a node of topology \"gb200-nvl72\" has 18 (hosts of 4 "
        "devices)");
  CHECK(error_of("gb200-nvl72", "llama3-8b", "tp=8,gpus=32,segment=16") ==
        "s: /segment: 32 GPUs are not whole segments of 16 hosts (64 devices): Slurm allocates a multiple of the "
        "segment");
  CHECK(error_of("gb200-nvl72", "llama3-8b", "tp=4,gpus=512,segment=16") == "no error");
  CHECK(error_of("gb200-nvl72", "llama3-8b", "tp=4,gpus=576,segment=16") ==
        "s: /gpus: 576 GPUs requested but segment=16 leaves 512 of topology \"gb200-nvl72\"'s 576 devices");
  // a segment of the whole domain: Slurm still allocates whole segments
  CHECK(error_of("gb200-nvl72", "llama3-8b", "tp=4,gpus=32,segment=18") ==
        "s: /segment: 32 GPUs are not whole segments of 18 hosts (72 devices): Slurm allocates a multiple of the "
        "segment");
  CHECK(error_of("tpu-v5p-pod", "llama3-8b", "tp=4,gpus=64,segment=1") ==
        "s: /segment: a torus is allocated in whole slices: segment takes hosts of nodes (scale-up domains)");
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024,first_stage_layers=90") ==
        "s: /first_stage_layers: first 90 + last 0 layers leave 6 layers for the other 7 stages, which is not an even "
        "positive split");
}

TEST_CASE("a dtype the device has no peak for is a workload error") {
  CHECK(error_of("tpu-v4-pod", "llama3-8b", "tp=4,gpus=4") == "no error");
  Sources sources{.topology = "tpu.json", .workload = "w.json", .strategy = "s"};
  auto workload = load_workload_spec(test::workload("llama3-8b"));
  workload.training.dtype = Dtype::Fp16;
  CHECK_THROWS_WITH_AS(
      resolve_job(load_cluster_spec(test::topology("tpu-v4-pod")), workload, StrategySpec{.gpus = 512}, sources),
      "w.json: /training/dtype: fp16 has no peak_flops entry for device \"TPU-v4\" in tpu.json", SpecError);
}

TEST_CASE("absurd parallel degrees are bad input, never arithmetic overflow") {
  CHECK(error_of("dgx-a100-superpod", "gpt3-175b", "tp=1048576,pp=1048576,cp=1048576") ==
        "s: /cp: seq_len 2048 is not divisible by 2·cp = 2097152 (causal load-balanced chunks)\n"
        "s: /pp: pp·vpp = 1048576·1 = 1048576 does not divide layers (96)\n"
        "s: /tp: tp·cp·pp = 1048576·1048576·1048576 = 1152921504606846976, but topology "
        "\"dgx-a100-superpod\" has 4480 devices\n"
        "s: /tp: 1048576 does not divide heads (96) of workload \"gpt3-175b\"\n"
        "s: /tp: 1048576 and kv_heads (96) must divide one another\n"
        "s: /tp: 1048576 does not divide ffn_hidden (49152)");
}
