#include <doctest/doctest.h>

#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/strategy_spec.hpp"

using namespace trainsim;
using namespace trainsim::spec;
using nlohmann::json;

namespace {
StrategySpec inline_strategy(const std::string& text) {
  return read_strategy_spec(parse_inline_strategy(text, "s"), "s");
}
std::string strategy_error(const std::string& text) {
  try {
    inline_strategy(text);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("the docs/cli.md inline strategy parses") {
  const auto s = inline_strategy("tp=8,pp=8,dp=16,zero=1,mb=1,schedule=1f1b,vpp=1,sp=on,recompute=selective");
  CHECK(s.tp == 8);
  CHECK(s.pp == 8);
  CHECK(s.dp == 16);
  CHECK(s.zero == 1);
  CHECK(s.sp);
  CHECK(s.schedule == Schedule::OneFOneB);
  CHECK(s.recompute == Recompute::Selective);
}

TEST_CASE("defaults are those of docs/cli.md") {
  const auto s = read_strategy_spec(json::object(), "s.json");
  CHECK(s.tp == 1);
  CHECK(!s.sp);
  CHECK(s.pp == 1);
  CHECK(!s.dp);
  CHECK(s.zero == 0);
  CHECK(s.schedule == Schedule::OneFOneB);
  CHECK(order_text(s.order) == "tp-cp-dp-pp");
}

TEST_CASE("a JSON strategy file accepts booleans for sp") {
  CHECK(read_strategy_spec(json::parse(R"({"tp": 2, "sp": true})"), "s.json").sp);
}

TEST_CASE("inline strategies report malformed items") {
  CHECK(strategy_error("tp=8,,pp=2") == "s: item 2 is empty; expected key=value pairs separated by commas");
  CHECK(strategy_error("tp8") == "s: \"tp8\" is not of the form key=value");
  CHECK(strategy_error("tp=8,tp=4") == "s: /tp: duplicate key");
  CHECK(strategy_error("tp=x") == "s: /tp: expected an integer in [1, 1048576], got \"x\"");
  CHECK(strategy_error("zero=4") == "s: /zero: 4 is out of range; expected an integer in [0, 3]");
  CHECK(strategy_error("tq=8") == "s: /tq: unknown key \"tq\" (did you mean \"tp\"?)");
  CHECK(strategy_error("schedule=1fb1") ==
        "s: /schedule: \"1fb1\" is not valid; expected one of: gpipe, 1f1b, interleaved, zb-h1, dualpipev (did you "
        "mean \"1f1b\"?)");
  CHECK(strategy_error("tp=100000000000000000000000000000") ==
        "s: /tp: 1e+29 is out of range; expected an integer in [1, 1048576]");
}

TEST_CASE("rank order is a permutation of the parallel dimensions") {
  CHECK(order_text(inline_strategy("order=tp-dp-cp-pp").order) == "tp-dp-cp-pp");
  CHECK(order_text(inline_strategy("order=tp-cp-ep-dp-pp").order) == "tp-cp-ep-dp-pp");
  CHECK(strategy_error("order=tp-dp-pp") ==
        "s: /order: \"tp-dp-pp\" lacks cp; expected a permutation of tp, cp, dp, pp (and optionally ep)");
  CHECK(strategy_error("order=tp-tp-cp-dp-pp") == "s: /order: \"tp\" appears twice in \"tp-tp-cp-dp-pp\"");
  CHECK(strategy_error("order=tp-xx-dp-pp") ==
        "s: /order: \"xx\" is not a parallel dimension; expected a permutation such as \"tp-cp-dp-pp\" (ep may be "
        "added)");
}

TEST_CASE("strategy_text reads back as the same strategy") {
  for (const char* text : {"tp=8", "tp=8,sp=on,pp=8,dp=16,zero=1,mb=2,schedule=interleaved,vpp=3,recompute=selective",
                           "tp=4,cp=16,pp=16,dp=8,first_stage_layers=7,last_stage_layers=7,attention=unfused",
                           "tp=1,ep=8,pp=4,gpus=256,zero=3,recompute=full,order=tp-cp-dp-ep-pp", "pp=2,schedule=zb-h1",
                           "schedule=gpipe"}) {
    const auto s = inline_strategy(text);
    CAPTURE(text);
    CHECK(inline_strategy(strategy_text(s)) == s);
  }
  CHECK(strategy_text(inline_strategy("pp=2,tp=8,sp=on,dp=4")) ==
        "tp=8,sp=on,pp=2,dp=4,zero=0,mb=1,schedule=1f1b,recompute=none");
}

TEST_CASE("a key given over a named framework preset wins, and the strategy says which it overrode") {
  const auto s = inline_strategy("framework=composer,tp=1,optimizer_impl=fused,bias_grad=fused,zero=3,compile=on");
  CHECK(s.optimizer_impl == OptimizerImpl::Fused);  // given, not Composer's for_loop
  CHECK(s.bias_grad_fused);
  REQUIRE(s.overrides.keys.size() == 2);  // zero=3 and compile=on are the preset's own values
  CHECK(s.overrides.keys[0].key == "optimizer_impl");
  CHECK(s.overrides.keys[0].given == "fused");
  CHECK(s.overrides.keys[0].preset == "for_loop");
  CHECK(s.overrides.keys[1].key == "bias_grad");
  CHECK(s.overrides.keys[1].preset == "separate");
  CHECK_FALSE(s.assumed.contains("optimizer_impl"));
  // the loss the preset would pick depends on tp: TorchTitan's under TP is loss_parallel
  const auto tt = inline_strategy("framework=torchtitan,tp=2,loss=upcast");
  REQUIRE(tt.overrides.keys.size() == 1);
  CHECK(tt.overrides.keys[0].preset == "loss_parallel");
  // without a named framework nothing is overridden: megatron-core's defaults are the keys' own
  CHECK(inline_strategy("tp=1,optimizer_impl=foreach").overrides.keys.empty());
}

TEST_CASE("deepspeed-2021 sets DeepSpeed 0.3's ZeRO-3 keys; a key given over them wins and is named") {
  const auto ds = inline_strategy("framework=deepspeed-2021,zero=3");
  CHECK(ds.zero3_gather == Zero3Gather::Parameter);
  CHECK(ds.zero3_sync);
  CHECK(ds.zero3_list_io);
  CHECK(ds.zero3_persistence_threshold == 100'000);  // stage3_param_persistence_threshold's default
  CHECK(ds.assumed.contains("zero3_gather"));
  CHECK(ds.assumed.contains("zero3_persistence_threshold"));
  const auto given = inline_strategy("framework=deepspeed-2021,zero=3,zero3_gather=unit,zero3_sync=off");
  CHECK(given.zero3_gather == Zero3Gather::Unit);
  REQUIRE(given.overrides.keys.size() == 2);
  CHECK(given.overrides.keys[0].key == "zero3_gather");
  CHECK(given.overrides.keys[0].preset == "parameter");
  CHECK(given.overrides.keys[1].key == "zero3_sync");
  CHECK(inline_strategy(strategy_text(given)) == given);
  // PyTorch FSDP's defaults elsewhere: one gather per unit, asynchronous, flat buffers, no threshold
  const auto fsdp = inline_strategy("framework=torchtitan");
  CHECK(fsdp.zero3_gather == Zero3Gather::Unit);
  CHECK_FALSE(fsdp.zero3_sync);
  CHECK_FALSE(fsdp.zero3_list_io);
  CHECK(fsdp.zero3_persistence_threshold == 0);
}

TEST_CASE("deepspeed gathers module by module; its overlap_comm applies under ZeRO-3 only") {
  const auto ds = inline_strategy("framework=deepspeed");
  CHECK(ds.zero == 3);
  CHECK(ds.zero3_gather == Zero3Gather::Module);
  CHECK_FALSE(ds.zero3_sync);
  CHECK_FALSE(ds.zero3_list_io);
  CHECK(ds.zero3_max_reuse_distance == 1'000'000'000);  // stage3_max_reuse_distance's default
  CHECK(ds.overlap_grad_reduce);
  // DeepSpeed's overlap_comm defaults to on for stage 3 only
  const auto zero1 = inline_strategy("framework=deepspeed,zero=1");
  CHECK_FALSE(zero1.overlap_grad_reduce);
  CHECK_FALSE(inline_strategy("framework=deepspeed-2021,zero=2").overlap_grad_reduce);
  CHECK(inline_strategy(strategy_text(zero1)) == zero1);
  // the ZeRO-3 keys are not listed as assumed where they do not apply
  CHECK_FALSE(zero1.assumed.contains("zero3_gather"));
  CHECK_FALSE(zero1.assumed.contains("zero3_persistence_threshold"));
  // overlap_grad_reduce=on given with ZeRO-1 overrides the preset's off there (as zero=1 its 3)
  const auto given = inline_strategy("framework=deepspeed,zero=1,overlap_grad_reduce=on");
  REQUIRE(given.overrides.keys.size() == 2);
  CHECK(given.overrides.keys[0].key == "zero");
  CHECK(given.overrides.keys[1].key == "overlap_grad_reduce");
  CHECK(given.overrides.keys[1].preset == "off");
}
