// Megatron-Core's pipeline layouts (strategy key pipeline_layout): the syntax as
// PipelineParallelLayerLayout.parse_str_to_list reads it, checked against the examples Megatron
// documents, and the placement rules as validate_layer_layout states them.
#include <doctest/doctest.h>

#include <stdexcept>

#include "common/paths.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/pipeline_layout.hpp"
#include "trainsim/spec/reader.hpp"

using namespace trainsim;
using namespace trainsim::spec;

namespace {

LayoutStage stage(bool embedding, int layers, int mtp, bool loss) {
  return {.embedding = embedding, .layers = layers, .mtp = mtp, .loss = loss};
}

std::string parse_error(const std::string& text) {
  try {
    parse_pipeline_layout(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

Job layout_job(const std::string& workload, const std::string& strategy) {
  Sources sources{.topology = "t", .workload = workload, .strategy = "s"};
  return resolve_job(load_cluster_spec(test::topology("dgx-h100-superpod")),
                     load_workload_spec(test::workload(workload)),
                     read_strategy_spec(parse_inline_strategy(strategy, "s"), "s"), sources);
}

std::string job_error(const std::string& workload, const std::string& strategy) {
  try {
    layout_job(workload, strategy);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("Megatron's documented layouts parse to the stages its docs list") {
  // parse_str_to_list's docstring: "Ettt|(tt|)*29,m|L" is [E,t,t,t] + [t,t]*29 + [m] + [L]
  const auto doc = parse_pipeline_layout("Ettt|(tt|)*29,m|L");
  REQUIRE(doc.stages.size() == 32);
  CHECK(doc.stages.front() == stage(true, 3, 0, false));
  for (std::size_t v = 1; v <= 29; ++v) CHECK(doc.stages[v] == stage(false, 2, 0, false));
  CHECK(doc.stages[30] == stage(false, 0, 1, false));
  CHECK(doc.stages[31] == stage(false, 0, 0, true));
  // docs/user-guide/features/pipeline_parallel_layout.md: "Et*3|(tt|)*29,m|L" is the same layout
  CHECK(parse_pipeline_layout("Et*3|(tt|)*29,m|L") == doc);
  // Megatron-Bridge's DeepSeek-V3 recipe on PP 8 × VP 4: the module and the loss share the last
  const auto bridge = parse_pipeline_layout("Et|(tt|)*30mL");
  REQUIRE(bridge.stages.size() == 32);
  CHECK(bridge.stages.front() == stage(true, 1, 0, false));
  CHECK(bridge.stages.back() == stage(false, 0, 1, true));
  // the regex's own examples: xy(ab|cd|ef)*2,pq unrolls the group; (|ab)*2 keeps the empty part
  CHECK(parse_pipeline_layout("E(t|t)*2L").stages.size() == 3);  // Et|tt|tL
  CHECK(parse_pipeline_layout("E(t|t)*2L").stages[1] == stage(false, 2, 0, false));
  CHECK(parse_pipeline_layout("Et*0tL").stages.front() == stage(true, 1, 0, true));
}

TEST_CASE("a layout's syntax errors say what is wrong") {
  CHECK(parse_error("Etx|L").starts_with("'x' is not a layer symbol"));
  CHECK(parse_error("Et|L(").starts_with("'(' is not a layer symbol"));
  CHECK(parse_error("tE|L") == "the embedding E must come first, once");
  CHECK(parse_error("Et|EL") == "the embedding E must come first, once");
  CHECK(parse_error("Et|Lt") == "the loss L must come last, once");
  CHECK(parse_error("Etm|tL") == "every transformer layer t must come before the multi-token prediction modules m");
  CHECK(parse_error("E(t|)*999999L").starts_with("a repeat count above"));
}

TEST_CASE("a layout sets vpp and each stage's layers; one the model cannot run is refused") {
  // DeepSeek-V3's 61 layers and its module as Megatron-Bridge lays them out on 8 stages
  const auto j = layout_job("deepseek-v3-like", "tp=2,pp=8,ep=64,gpus=1024,pipeline_layout=Et|(tt|)*30mL");
  CHECK(j.strategy.vpp == 4);
  CHECK(j.strategy.schedule == Schedule::Interleaved);
  CHECK(j.stage_layers == std::vector<int>{7, 8, 8, 8, 8, 8, 8, 6});
  CHECK(chunk_layers(j, 0, 0) == 1);
  CHECK(chunk_layers(j, 7, 2) == 2);
  CHECK(chunk_layers(j, 7, 3) == 0);  // the module and the loss alone
  CHECK(chunk_first_layer(j, 7, 3) == 61);
  // no module in the model: the layout's m has nothing to place
  CHECK(job_error("llama3-8b", "tp=8,pp=2,gpus=16,pipeline_layout=Et*16|t*16mL") ==
        "s: /pipeline_layout: \"Et*16|t*16mL\": 1 multi-token prediction module m, but the model has 0");
  CHECK(job_error("llama3-8b", "tp=8,pp=2,gpus=16,pipeline_layout=Et*16|t*15L") ==
        "s: /pipeline_layout: \"Et*16|t*15L\": 31 transformer layers t, but the model has 32");
  CHECK(job_error("llama3-8b", "tp=8,pp=4,gpus=32,pipeline_layout=Et*16|t*16L")
            .find("2 virtual stages, which pp = 4 "
                  "does not divide") != std::string::npos);
  CHECK(job_error("llama3-8b", "tp=8,pp=3,gpus=24,pipeline_layout=Et*16||t*16L").find("virtual stage 1 is empty") !=
        std::string::npos);
  CHECK(job_error("llama3-8b", "tp=8,pp=2,vpp=1,gpus=16,pipeline_layout=Et*8|t*8|t*8|t*8L") ==
        "s: /vpp: the pipeline_layout's 4 virtual stages are pp·vpp = 2·1: vpp would be 2");
  CHECK(job_error("llama3-8b", "tp=8,pp=2,gpus=16,first_stage_layers=16,pipeline_layout=Et*16|t*16L") ==
        "s: /first_stage_layers: pipeline_layout gives every stage its layers: give it or the outer stages' counts, "
        "not both");
  // Megatron's standalone module (a stage of its own before the loss's) is not modelled
  CHECK(job_error("deepseek-v3-like", "tp=2,pp=16,ep=64,gpus=2048,pipeline_layout=Et*3|(tt|)*29m|L")
            .find("must be in the last virtual stage, beside the loss L") != std::string::npos);
}

TEST_CASE("a layout given with commas prints without them and reads back as the same strategy") {
  const nlohmann::json given = {{"pp", 2}, {"pipeline_layout", "Et*16,|t*16,L"}};
  const auto s = read_strategy_spec(given, "j");
  const auto text = strategy_text(s);
  CHECK(text.find("pipeline_layout=Et*16|t*16L") != std::string::npos);
  CHECK(read_strategy_spec(parse_inline_strategy(text, "t"), "t") == s);
}

TEST_CASE("under DualPipeV a layout's virtual stages go down the V and back") {
  // virtual stage 0 on stage 0, 1 and 2 on stage 1 (its chunks 0 and 1), 3 on stage 0's chunk 1
  const auto j = layout_job("llama3-8b", "tp=8,pp=2,gpus=16,schedule=dualpipev,pipeline_layout=Et*5|t*7|t*9|t*11L");
  CHECK(j.stage_layers == std::vector<int>{16, 16});
  CHECK(chunk_layers(j, 0, 0) == 5);
  CHECK(chunk_layers(j, 1, 0) == 7);
  CHECK(chunk_layers(j, 1, 1) == 9);
  CHECK(chunk_layers(j, 0, 1) == 11);
  CHECK(chunk_first_layer(j, 0, 1) == 21);
  CHECK(head_stage(j) == 0);
}
