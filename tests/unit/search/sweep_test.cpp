#include <doctest/doctest.h>

#include <set>

#include <fmt/format.h>

#include "common/clusters.hpp"
#include "common/paths.hpp"
#include "common/workloads.hpp"
#include "search/space.hpp"
#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/lower/bound.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace {

const spec::Sources kSources{"test-topology", "test-workload", "--fix"};

search::SweepResult run_sweep(const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload,
                              search::SweepOptions options) {
  return search::sweep(cluster, workload, kSources, options);
}

// The answer: which plans the search simulated on its way depends on the bound and the shards.
std::string dump(const search::SweepResult& r) {
  auto j = search::to_json(r);
  j.erase("simulated");
  j.erase("exhaustive");
  return j.dump(2);
}

search::SweepOptions options_for(std::vector<std::int64_t> gpus, std::size_t top = 5) {
  search::SweepOptions o;
  o.gpus = std::move(gpus);
  o.top = top;
  o.threads = 2;
  return o;
}

}  // namespace

TEST_CASE("the compute bound never exceeds the simulated step") {
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  const driver::ClusterModel model(cluster, {});
  const auto owned = model.cost_model();
  auto& costs = *owned;
  struct Case {
    spec::WorkloadSpec workload;
    const char* strategy;
    int remat_layers = 0;  // the compiler's whole layers per chunk (remat_to_fit's resolution)
  };
  const std::vector<Case> cases = {
      {test::gpt3_layers(8, 64), "tp=8,gpus=32,zero=1,mb=1"},
      {test::gpt3_layers(8, 64), "tp=8,sp=on,pp=4,gpus=32,mb=1"},
      {test::gpt3_layers(8, 64), "tp=4,pp=4,gpus=32,mb=1,schedule=interleaved,vpp=2,recompute=full"},
      {test::gpt3_layers(8, 64), "tp=8,pp=4,gpus=32,mb=2,schedule=zb-h1"},
      {test::gpt3_layers(8, 64), "tp=2,gpus=32,zero=3,mb=1,recompute=full"},
      {test::gpt3_layers(8, 64), "tp=16,pp=2,gpus=32,mb=1"},  // tensor parallelism across nodes
      {test::tiny_gpt(8, 64, 8192), "tp=2,sp=on,cp=4,gpus=32,mb=1"},
      {test::tiny_gpt(8, 64, 8192), "tp=2,sp=on,cp=4,cp_comm=ring,pp=2,gpus=32,mb=1"},
      {test::tiny_moe(), "ep=8,gpus=32,ep_overlap=on"},
      {test::tiny_moe(), "tp=2,ep=4,pp=2,gpus=32,zero=1,mb=1"},
      {test::tiny_gpt(8, 64), "pp=8,gpus=32,mb=1,schedule=gpipe"},
      {test::gpt3_layers(8, 64), "tp=8,pp=4,vpp=2,gpus=32,mb=1,schedule=dualpipev"},
      {test::tiny_moe(), "ep=4,pp=2,vpp=2,gpus=8,zero=1,mb=1,schedule=dualpipev,overlap_moe_comm=on"},
      {test::tiny_moe(), "ep=4,pp=2,vpp=2,gpus=8,zero=1,mb=1,schedule=interleaved,overlap_moe_comm=on"},
      {test::tiny_moe(), "ep=4,pp=2,vpp=2,gpus=8,zero=1,mb=1,schedule=dualpipev"},
      {test::gpt3_layers(8, 64), "tp=8,sp=on,tp_overlap=on,gpus=32,mb=1"},  // stretched, chunked GEMMs
      // chunks of 1 and 2 layers on the first stage; block recomputation and the compiler's
      {test::gpt3_layers(8, 64),
       "tp=8,pp=2,vpp=2,gpus=32,mb=1,schedule=interleaved,first_stage_layers=3,recompute=full,recompute_layers=1"},
      {test::gpt3_layers(8, 64),
       "tp=8,pp=2,vpp=2,gpus=32,mb=1,schedule=interleaved,first_stage_layers=3,recompute=dots", 1},
      {test::gpt3_layers(8, 64), "tp=8,gpus=32,mb=1,recompute=selective", 3},
  };
  for (const auto& c : cases) {
    // data-parallel traffic overlapped with compute, as the bound leaves it out
    const std::string strategy =
        std::string(c.strategy) + ",overlap_grad_reduce=on,overlap_param_gather=on,grad_reduce_dtype=bf16";
    CAPTURE(strategy);
    auto job = spec::resolve_job(cluster, c.workload,
                                 spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), kSources);
    job.strategy.remat_layers = c.remat_layers;
    const driver::RunOptions run;
    const auto lowering = run.lowering(run.tunables(cluster).values);
    const double bound = lower::step_time_lower_bound(job, costs, lowering).seconds();
    const auto report = driver::build_run_report(job, run, &costs);
    CHECK(bound <= report.simulation->step_time_s);
    // and it is a useful bound, not zero: compute is most of these steps
    CHECK(bound >= 0.4 * report.simulation->step_time_s);
    // the kernels' bound, which screens before it, never passes it
    const double kernels = lower::kernel_lower_bound(job, lowering).seconds();
    CHECK(kernels <= bound);
    CHECK(kernels >= 0.25 * bound);
  }
}

TEST_CASE("the compiler's layers are counted chunk by chunk, as the lowering numbers them") {
  // 8 layers over pp 2 × vpp 2 with 3 on the first stage: its chunks hold 1 and 2 layers (the short
  // one first), the last stage's 3 and 2; two layers per chunk recomputed: 1 + 2 and 2 + 2
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  auto job = spec::resolve_job(
      cluster, test::gpt3_layers(8, 64),
      spec::read_strategy_spec(
          spec::parse_inline_strategy(
              "tp=8,pp=2,vpp=2,gpus=32,mb=1,schedule=interleaved,first_stage_layers=3,recompute=dots", "s"),
          "s"),
      kSources);
  REQUIRE(spec::chunk_layers(job, 0, 0) + spec::chunk_layers(job, 0, 1) == 3);
  job.strategy.remat_layers = 2;
  CHECK(spec::recomputed_layers(job, 0) == 3);
  CHECK(spec::recomputed_layers(job, 1) == 4);
}

TEST_CASE("the kernels' bound: each stage's GEMMs for every micro-batch, at least their FLOPs at the peak") {
  // pp = 1, no attention kernel counted under context parallelism: the bound is the step's GEMMs,
  // forward, backward (data and weight) and the recomputed forward, one after another; each GEMM
  // takes at least its FLOPs at the device's bf16 peak, 2·m·n·k forward and twice that backward
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  const auto workload = test::gpt3_layers(8, 64);
  const auto& m = workload.model;
  const driver::RunOptions run;
  const auto lowering = run.lowering(run.tunables(cluster).values);
  const auto job_of = [&](const std::string& strategy) {
    return spec::resolve_job(cluster, workload,
                             spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), kSources);
  };
  const auto plain = job_of("cp=2,gpus=32,mb=1");
  const auto full = job_of("cp=2,gpus=32,mb=1,recompute=full");
  const double plain_s = lower::kernel_lower_bound(plain, lowering).seconds();
  const double full_s = lower::kernel_lower_bound(full, lowering).seconds();
  // per token and layer: q, k, v, output projection and the MLP's two GEMMs
  const double h = static_cast<double>(m.hidden);
  const double ffn = static_cast<double>(m.ffn_hidden);
  const double tokens = static_cast<double>(plain.micro_batches) * static_cast<double>(workload.training.seq_len) / 2;
  const double gemm_flops = 2.0 * tokens * m.layers * (4 * h * h + 2 * h * ffn);
  const double peak = cluster.device.peak_flops.at(spec::Dtype::Bf16).flop_per_s;
  CHECK(plain_s >= 3 * gemm_flops / peak);
  CHECK(plain_s <= 3 * gemm_flops / (0.5 * peak));  // and these GEMMs are large: not far above it
  // full recomputation repeats the forward: at least its FLOPs again
  CHECK(full_s >= plain_s + gemm_flops / peak);
}

TEST_CASE("the bound waits for a group straddling two racks, as the simulation does") {
  // tp 16 on 128 GB200s: the group of ranks 64–79 spans two racks (8 GPUs on each)
  const auto rack = spec::load_cluster_spec(test::topology("gb200-nvl72"));
  const auto job = spec::resolve_job(
      rack, test::gpt3_layers(4, 64),
      spec::read_strategy_spec(
          spec::parse_inline_strategy("tp=16,sp=on,gpus=128,zero=1,mb=1,overlap_grad_reduce=on", "s"), "s"),
      kSources);
  const driver::ClusterModel model(topo::reachable_part(job.cluster, job.gpus), {});
  const auto costs = model.cost_model();
  const driver::RunOptions run;
  auto lowering = run.lowering(run.tunables(rack).values);
  const double first_group = lower::step_time_lower_bound(job, *costs, lowering).seconds();
  lowering.distinct_groups = driver::straddling_groups(job);
  REQUIRE(lowering.distinct_groups.size() == 1);
  CHECK(lowering.distinct_groups.front().rank == 64);
  const double both = lower::step_time_lower_bound(job, *costs, lowering).seconds();
  const double step = driver::build_run_report(job, run, costs.get()).simulation->step_time_s;
  CHECK(both > 1.05 * first_group);  // the straddling group's all-reduces cross the network
  CHECK(both <= step);
}

TEST_CASE("the bound counts the gradient reduction that waits for the end of the backward") {
  // Megatron-Core's defaults: the data-parallel all-reduce starts once the backward has ended, and
  // the optimizer step once it has ended, so both extend the step beyond the compute
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  const driver::ClusterModel model(cluster, {});
  const auto owned = model.cost_model();
  const auto workload = test::gpt3_layers(8, 64);
  const driver::RunOptions run;
  const auto bound_and_step = [&](const std::string& strategy) {
    const auto job = spec::resolve_job(
        cluster, workload, spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), kSources);
    const double bound =
        lower::step_time_lower_bound(job, *owned, run.lowering(run.tunables(cluster).values)).seconds();
    return std::pair{bound, driver::build_run_report(job, run, owned.get()).simulation->step_time_s};
  };
  for (const char* zero : {"0", "1"}) {
    CAPTURE(zero);
    const std::string base = fmt::format("tp=8,gpus=32,mb=1,zero={}", zero);
    const auto [deferred, deferred_step] = bound_and_step(base + ",overlap_grad_reduce=off");
    const auto [overlapped, overlapped_step] = bound_and_step(base + ",overlap_grad_reduce=on");
    CHECK(deferred <= deferred_step);
    CHECK(overlapped <= overlapped_step);
    // each rank all-reduces (or reduce-scatters and, later, gathers) at least its layers' 12·h²/tp
    // bf16 gradients over the 4 data-parallel ranks, one 200 Gb/s NIC each: a ring moves
    // 2·(n−1)/n of them through every NIC, a reduce-scatter half of that
    const double grads = 8 * 12.0 * 12288 * 12288 / 8 * 2;
    const double nic = 200e9 / 8;
    const double share = std::string(zero) == "0" ? 2 * 3.0 / 4 : 3.0 / 4;
    CHECK(deferred - overlapped >= share * grads / nic);
  }
}

TEST_CASE("under ZeRO-3 the bound counts every gather and reduce-scatter of the data-parallel stream") {
  // 16 micro-batches on 4 data-parallel ranks: each layer's parameters are gathered for every
  // micro-batch and its gradients reduce-scattered, one collective after another on one stream,
  // which here takes longer than the compute
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  const driver::ClusterModel model(cluster, {});
  const auto owned = model.cost_model();
  const auto workload = test::gpt3_layers(8, 64);
  const std::string strategy = "tp=8,gpus=32,zero=3,mb=1";
  const auto job = spec::resolve_job(
      cluster, workload, spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), kSources);
  REQUIRE(job.micro_batches == 16);
  const driver::RunOptions run;
  const double bound = lower::step_time_lower_bound(job, *owned, run.lowering(run.tunables(cluster).values)).seconds();
  const double step = driver::build_run_report(job, run, owned.get()).simulation->step_time_s;
  CHECK(bound <= step);
  // a layer's 12·h²/tp parameters in bf16 (gradients at least as wide), gathered and reduce-scattered
  // over 4 ranks through one 200 Gb/s NIC each: (n−1)/n of them each way
  const double layer = 12.0 * 12288 * 12288 / 8 * 2;
  const double one = 3.0 / 4 * layer / (200e9 / 8);
  CHECK(bound >= 16 * 8 * 2 * one);
}

TEST_CASE("the bound counts the pipeline's bubble as the schedule makes it") {
  // 4 stages and 4 micro-batches of 16: 1F1B idles (p − 1)/(m + p − 1) = 3/7 of the step on each
  // stage, and no pass can start before the one whose output it takes, so the critical path
  // through the passes is (m + p − 1)(F + B) and the bound nearly the simulated step (the flow-shop
  // terms alone, the first forward and the last backward through the other stages, leave 3 B out)
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  const driver::ClusterModel model(cluster, {});
  const auto owned = model.cost_model();
  for (const char* schedule : {"1f1b", "zb-h1"}) {
    CAPTURE(schedule);
    const auto job = spec::resolve_job(
        cluster, test::gpt3_layers(8, 64),
        spec::read_strategy_spec(
            spec::parse_inline_strategy(fmt::format("tp=8,pp=4,gpus=32,mb=16,schedule={}", schedule), "s"), "s"),
        kSources);
    REQUIRE(job.micro_batches == 4);
    const driver::RunOptions run;
    const double bound =
        lower::step_time_lower_bound(job, *owned, run.lowering(run.tunables(cluster).values)).seconds();
    const auto report = driver::build_run_report(job, run, owned.get());
    const double step = report.simulation->step_time_s;
    CHECK(bound <= step);
    CHECK(bound >= 0.97 * step);
    CHECK(report.simulation->bubble_fraction >= (std::string(schedule) == "1f1b" ? 0.35 : 0.2));
  }
}

TEST_CASE("the bounded search finds exactly what simulating every candidate finds" * doctest::test_suite("volume")) {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_gpt(8, 64);
  auto options = options_for({16}, 8);
  const auto bounded = run_sweep(cluster, workload, options);
  options.exhaustive = true;
  const auto exhaustive = run_sweep(cluster, workload, options);
  CHECK(dump(bounded) == dump(exhaustive));
  CHECK(bounded.stats.simulated < exhaustive.stats.simulated);
  CHECK(exhaustive.stats.simulated + exhaustive.stats.bounded_out == exhaustive.candidates);
  REQUIRE(bounded.top.size() == 8);
  for (std::size_t i = 1; i < bounded.top.size(); ++i)
    CHECK(bounded.top[i - 1].step_time_s <= bounded.top[i].step_time_s);
}

TEST_CASE("the answer does not depend on the thread count") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_moe();
  auto options = options_for({16});
  options.threads = 1;
  const auto one = dump(run_sweep(cluster, workload, options));
  options.threads = 2;
  CHECK(dump(run_sweep(cluster, workload, options)) == one);
  options.threads = 5;
  CHECK(dump(run_sweep(cluster, workload, options)) == one);
}

TEST_CASE("shards merged give the unsharded answer") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_gpt(8, 64);
  const auto options = options_for({8, 16});
  const auto whole = run_sweep(cluster, workload, options);
  std::vector<search::SweepResult> parts;
  std::vector<std::string> sources;
  for (int s = 0; s < 3; ++s) {
    auto o = options;
    o.shard = s;
    o.shards = 3;
    const auto part = run_sweep(cluster, workload, o);
    // as `sweep merge` reads them: through their JSON
    parts.push_back(search::sweep_from_json(search::to_json(part), fmt::format("shard{}.json", s)));
    sources.push_back(fmt::format("shard{}.json", s));
  }
  CHECK(parts[0].enumerated + parts[1].enumerated + parts[2].enumerated == whole.enumerated);
  CHECK(dump(search::merge_sweeps(parts, sources)) == dump(whole));
  // byte for byte, with the plans every sweep simulates: a shard's bound is looser, so each shard
  // simulates more, and the merge keeps those whose bound reaches the K-th best
  std::size_t simulated_by_shards = 0;
  for (const auto& p : parts) simulated_by_shards += p.simulated.size();
  CHECK(simulated_by_shards >= whole.simulated.size());
  CHECK(search::to_json(search::merge_sweeps(parts, sources)).dump(2) == search::to_json(whole).dump(2));

  SUBCASE("a missing shard is an error") {
    parts.pop_back();
    sources.pop_back();
    CHECK_THROWS_WITH_AS(search::merge_sweeps(parts, sources), "sweep merge: shards 2 of 3 are missing", SpecError);
  }
  SUBCASE("a shard twice with the same answer (a rerun) counts once; with another answer it is an error") {
    parts.push_back(parts[1]);
    sources.push_back("shard1-rerun.json");
    CHECK(search::to_json(search::merge_sweeps(parts, sources)).dump(2) == search::to_json(whole).dump(2));
    parts.back().enumerated += 1;
    CHECK_THROWS_WITH_AS(search::merge_sweeps(parts, sources),
                         "shard1-rerun.json: /shard/index: shard 1 of 3 appears twice, with different answers (also "
                         "shard1.json)",
                         SpecError);
    parts[2] = parts[1];
    parts.pop_back();
    sources.pop_back();
    CHECK_THROWS_WITH_AS(search::merge_sweeps(parts, sources), "sweep merge: shards 2 of 3 are missing", SpecError);
  }
  SUBCASE("shards of sweeps with other inputs are refused by their fingerprint") {
    parts[0].fingerprint = "0123456789abcdef";
    parts[1].fingerprint = parts[2].fingerprint = "fedcba9876543210";
    CHECK_THROWS_WITH_AS(search::merge_sweeps(parts, sources),
                         "shard1.json: /shard/fingerprint: differs from shard0.json: the results come from different "
                         "sweeps",
                         SpecError);
  }
  SUBCASE("results of another sweep are refused") {
    parts[1].workload = "other";
    CHECK_THROWS_WITH_AS(search::merge_sweeps(parts, sources),
                         "shard1.json: /workload: differs from shard0.json: the results come from different sweeps",
                         SpecError);
  }
}

TEST_CASE("pinned keys restrict the space and every candidate is distinct") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_gpt(8, 64);
  auto options = options_for({16}, 50);
  const auto free = search::enumerate_space(cluster, workload, options);
  std::set<std::string> seen;
  for (const auto& c : free) CHECK(seen.insert(spec::strategy_text(c.strategy)).second);
  options.fixed = spec::parse_inline_strategy("tp=2,zero=1", "--fix");
  const auto pinned = search::enumerate_space(cluster, workload, options);
  CHECK(pinned.size() < free.size());
  REQUIRE(!pinned.empty());
  for (const auto& c : pinned) {
    CHECK(c.strategy.tp == 2);
    CHECK(c.strategy.zero == 1);
    CAPTURE(spec::strategy_text(c.strategy));
    // every pinned candidate is one of the free space's, but for ZeRO without data parallelism,
    // which the free space leaves out and a pin asks for
    const auto dp = c.gpus / (c.strategy.tp * c.strategy.cp * c.strategy.pp);
    if (dp > 1) CHECK(seen.contains(spec::strategy_text(c.strategy)));
  }
  // and the sweep ranks only those
  const auto ranked = run_sweep(cluster, workload, options);
  for (const auto& p : ranked.top) {
    CHECK(p.strategy.starts_with("tp=2,"));
    CHECK(p.strategy.find(",zero=1,") != std::string::npos);
  }
}

TEST_CASE("what does not fit is pruned with its reason, and nothing ranked exceeds memory") {
  // GPT-3's layer shape: 8 layers do not fit one 80 GiB GPU unsharded
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::gpt3_layers(8, 32);
  const auto r = run_sweep(cluster, workload, options_for({16}));
  CHECK(r.out_of_memory > 0);
  CHECK(r.enumerated == r.invalid + r.out_of_memory + r.candidates);
  std::int64_t counted = 0;
  for (const auto& f : r.pruned) counted += f.count;
  CHECK(counted == r.invalid + r.out_of_memory);
  // nothing ranked enters the memory headroom
  for (const auto& p : r.top)
    CHECK(static_cast<double>(p.peak_memory) <=
          cluster.device.memory.as_double() * (1 - driver::RunOptions::kDefaultMemoryHeadroom));
  bool states = false;
  for (const auto& f : r.pruned) states = states || f.reason.starts_with("model states exceed device memory");
  CHECK(states);
}

TEST_CASE("ranking by cost weighs the devices used") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_gpt(8, 64);
  auto options = options_for({4, 16}, 1);
  const auto by_time = run_sweep(cluster, workload, options);
  options.objective = search::Objective::Cost;
  const auto by_cost = run_sweep(cluster, workload, options);
  REQUIRE(by_time.top.size() == 1);
  REQUIRE(by_cost.top.size() == 1);
  // more devices finish sooner; fewer waste less on communication per token
  CHECK(by_time.top[0].gpus == 16);
  CHECK(by_cost.top[0].gpus == 4);
  CHECK(by_cost.top[0].gpu_hours_per_mtoken < by_time.top[0].gpu_hours_per_mtoken);
  CHECK(by_time.top[0].step_time_s < by_cost.top[0].step_time_s);
}

TEST_CASE("a sweep result reads back with its errors located") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto r = run_sweep(cluster, test::tiny_gpt(8, 64), options_for({16}, 2));
  auto j = nlohmann::json::parse(dump(r));
  CHECK(dump(search::sweep_from_json(j, "r.json")) == dump(r));
  j["top"][1]["step_time_s"] = -1;
  j["counts"].erase("invalid");
  CHECK_THROWS_WITH_AS(search::sweep_from_json(j, "r.json"),
                       "r.json: /counts/invalid: missing; expected an integer in [0, 1125899906842624]\n"
                       "r.json: /top/1/step_time_s: -1 is out of range; expected a positive value of at most 1e+30",
                       SpecError);
}

TEST_CASE("plans with more micro-batches than a simulation takes are pruned, not fatal") {
  const auto cluster = test::fat_tree_cluster(1, 8, true, 2);
  auto workload = test::gpt3_layers(2, 2048);
  workload.training.global_batch = 1 << 30;  // ≥ 2^27 micro-batches per pipeline at dp ≤ 8
  const auto r = run_sweep(cluster, workload, options_for({8}));
  CHECK(r.top.empty());
  CHECK(std::any_of(r.pruned.begin(), r.pruned.end(), [](const auto& f) {
    return f.reason.starts_with("more micro-batches × layers per pipeline than a simulation takes");
  }));
}

TEST_CASE("a plan in the memory headroom is ranked and flagged, not pruned") {
  // published runs use the device to the last few percent (docs/validation.md "Memory"): the
  // headroom warns, only a plan that does not fit is pruned
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::gpt3_layers(8, 32);
  auto options = options_for({16});
  const auto usual = run_sweep(cluster, workload, options);
  REQUIRE_FALSE(usual.top.empty());
  // a headroom that the largest of the top plans enters
  double largest = 0;
  for (const auto& p : usual.top) largest = std::max(largest, static_cast<double>(p.peak_memory));
  const double usable = 0.99 * largest / cluster.device.memory.as_double();
  options.run.memory_headroom = 1 - usable;
  const auto wide = run_sweep(cluster, workload, options);
  CHECK(wide.out_of_memory == usual.out_of_memory);
  REQUIRE(wide.top.size() == usual.top.size());
  bool flagged = false;
  for (std::size_t i = 0; i < wide.top.size(); ++i) {
    const auto& p = wide.top[i];
    CHECK(p.strategy == usual.top[i].strategy);
    CHECK(static_cast<double>(p.peak_memory) <= cluster.device.memory.as_double());
    CHECK(p.memory_at_risk == (static_cast<double>(p.peak_memory) > cluster.device.memory.as_double() * usable));
    flagged = flagged || p.memory_at_risk;
  }
  CHECK(flagged);
}

TEST_CASE("micro-batches: every size that divides a replica's batch, not only powers of two") {
  // 288 sequences over 16 replicas: 18 each, so 1, 2, 3, 6, 9 and 18 (llm-foundry's MPT-350M run
  // used 18, below)
  const auto cluster = spec::load_cluster_spec(test::source_path("topologies/a100-40gb-roce.json"));
  const auto workload = test::tiny_gpt(8, 288);
  auto options = options_for({16});
  options.fixed = spec::parse_inline_strategy("tp=1,pp=1,cp=1,zero=3,recompute=full", "--fix");
  std::set<std::int64_t> mbs;
  for (const auto& c : search::enumerate_space(cluster, workload, options)) mbs.insert(c.strategy.mb);
  CHECK(mbs == std::set<std::int64_t>{1, 2, 3, 6, 9, 18});
}

TEST_CASE("a sweep at the edge of memory keeps the plan that ran") {
  // llm-foundry's MPT-350M on 16 A100 40GB at sequence 2,048 ran FSDP with 18 sequences per GPU and no
  // checkpointing (tests/reference/llmfoundry_benchmarks.json, A100 40GB table): 96% of the device
  // by the model, inside the default 5% headroom. The sweep must rank it, flagged, not prune it.
  const auto cluster = spec::load_cluster_spec(test::source_path("topologies/a100-40gb-roce.json"));
  const auto workload = spec::read_workload_spec(
      nlohmann::json::parse(R"({"name": "mpt-350m", "model": {"kind": "transformer", "layers": 24, "hidden": 1024,
        "heads": 16, "ffn_hidden": 4096, "vocab": 50368, "mlp": "gelu", "bias": true, "norm": "layernorm",
        "position": "learned", "tied_embeddings": true, "dropout": false},
        "training": {"seq_len": 2048, "global_batch": 288, "dtype": "bf16", "optimizer": "adamw"}})"),
      "mpt-350m");
  auto options = options_for({16}, 1000);
  // the micro-batch left free: the search enumerates 18 (a divisor of the 18 sequences per GPU, not
  // a power of two) and ranks it
  options.fixed = spec::parse_inline_strategy("framework=composer,tp=1,pp=1,cp=1,zero=3", "--fix");
  options.exhaustive = true;
  const auto r = run_sweep(cluster, workload, options);
  const auto ran = std::find_if(r.top.begin(), r.top.end(),
                                [](const search::Plan& p) { return p.strategy.find(",mb=18,") != std::string::npos; });
  REQUIRE(ran != r.top.end());
  CHECK(ran->memory_at_risk);
}

TEST_CASE("a MaxText sweep keeps the plan that ran, which fits only by XLA's rematerialisation") {
  // MaxText's 32B on one v5p-128 (results/reference/maxtext-v5p-32b-1xv5p-128.json): tp 4, the
  // fsdp axis over 16, 32 sequences per tensor-parallel group in one pass, the dots policy. Its
  // analytic peak passes the chip's 95.74 GiB unless XLA recomputes some layers; with remat_to_fit
  // (MaxText's preset) the sweep ranks it, without it the screen prunes it.
  const auto run =
      spec::load_json_file(test::source_path("results/reference/maxtext-v5p-32b-1xv5p-128.json")).at("run");
  const auto cluster = spec::read_cluster_spec(run.at("topology"), "t");
  const auto workload = spec::read_workload_spec(run.at("workload"), "w");
  const auto ran = [&](const std::string& fix) {
    auto options = options_for({64}, 1000);
    options.fixed = spec::parse_inline_strategy(fix, "--fix");
    options.exhaustive = true;
    const auto r = run_sweep(cluster, workload, options);
    return std::any_of(r.top.begin(), r.top.end(), [](const search::Plan& p) {
      return p.strategy.find(",dp=16,zero=3,mb=32,") != std::string::npos;
    });
  };
  CHECK(ran("framework=maxtext,tp=4,sp=on,pp=1,recompute=dots"));
  CHECK_FALSE(ran("framework=maxtext,tp=4,sp=on,pp=1,recompute=dots,remat_to_fit=off"));
}

TEST_CASE("the memory screen prunes by the live tensors, not by the allocator's reserve") {
  // PyTorch's caching allocator gives its cache back when memory runs out (docs/model.md "Fits"):
  // on a device between the best plan's live tensors and its peak with the reserve (both by the
  // analytic estimate the screen reads), that plan is still a candidate and still the best
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::gpt3_layers(8, 32);
  const auto usual = run_sweep(cluster, workload, options_for({16}));
  REQUIRE_FALSE(usual.top.empty());
  const auto& best = usual.top.front();
  const auto job = spec::resolve_job(
      cluster, workload, spec::read_strategy_spec(spec::parse_inline_strategy(best.strategy, "s"), "s"), kSources);
  driver::RunOptions analytic;
  analytic.simulate = false;
  const auto estimate = driver::build_run_report(job, analytic);
  REQUIRE(estimate.live_peak_memory < estimate.peak_memory);
  auto smaller = cluster;
  smaller.device.memory = Bytes{(estimate.live_peak_memory + estimate.peak_memory) / 2};
  const auto r = run_sweep(smaller, workload, options_for({16}));
  REQUIRE_FALSE(r.top.empty());
  CHECK(r.top.front().strategy == best.strategy);
  CHECK(r.top.front().step_time_s == best.step_time_s);
  CHECK(r.out_of_memory >= usual.out_of_memory);
  // the analytic verdict on that device: fits, at risk
  auto j = job;
  j.cluster.device.memory = smaller.device.memory;
  const auto on_smaller = driver::build_run_report(j, analytic);
  CHECK(on_smaller.fits);
  CHECK(on_smaller.memory_at_risk);
}

TEST_CASE("ZeRO-3 is also tried sharded inside a scale-up domain and replicated across (HSDP)") {
  // 4 nodes of 8: with tp 2 a node holds 4 of the 16 dp ranks, the shard group hybrid sharding uses
  const auto cluster = test::fat_tree_cluster(4, 8, true, 2);
  const auto workload = test::tiny_gpt(8, 64);
  auto options = options_for({32});
  options.fixed = spec::parse_inline_strategy("tp=2,pp=1,cp=1,mb=1,recompute=none", "--fix");
  std::set<std::pair<int, std::int64_t>> seen;  // (zero, shard group; 0 for the whole dp group)
  for (const auto& c : search::enumerate_space(cluster, workload, options))
    seen.insert({c.strategy.zero, c.strategy.zero_group.value_or(0)});
  CHECK(seen.contains({3, 0}));
  CHECK(seen.contains({3, 4}));
  for (const auto& [zero, group] : seen) CHECK((group == 0 || zero == 3));  // ZeRO-1/2 are not split
  // a group as large as the job is no hybrid: with tp 8 a node holds one dp rank, nothing to group
  options.fixed = spec::parse_inline_strategy("tp=8,pp=1,cp=1,mb=1,recompute=none", "--fix");
  for (const auto& c : search::enumerate_space(cluster, workload, options)) CHECK(!c.strategy.zero_group);
  // a pinned group is kept as pinned
  options.fixed = spec::parse_inline_strategy("tp=2,pp=1,cp=1,mb=1,recompute=none,zero=3,zero_group=8", "--fix");
  for (const auto& c : search::enumerate_space(cluster, workload, options)) CHECK(c.strategy.zero_group == 8);
}

TEST_CASE("a multislice TPU job tries ZeRO-3 inside a slice and data parallelism across slices") {
  const auto cluster = test::multislice_cluster({4, 4}, 2);
  const auto workload = test::tiny_gpt(8, 64);
  auto options = options_for({32});
  options.fixed = spec::parse_inline_strategy("tp=1,pp=1,cp=1,mb=1,recompute=none,zero=3", "--fix");
  std::set<std::int64_t> groups;
  for (const auto& c : search::enumerate_space(cluster, workload, options))
    groups.insert(c.strategy.zero_group.value_or(0));
  CHECK(groups == std::set<std::int64_t>{0, 16});  // the whole job, or one slice's 16 chips
}

TEST_CASE("combined 1F1B is tried for MoE layouts where Megatron-Core runs it, and only there") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_moe();
  auto options = options_for({16});
  options.fixed = spec::parse_inline_strategy("tp=1,cp=1,mb=1,zero=1", "--fix");
  bool with_pp1 = false, with_interleaved = false;
  for (const auto& c : search::enumerate_space(cluster, workload, options)) {
    const auto& s = c.strategy;
    CAPTURE(spec::strategy_text(s));
    if (!s.overlap_moe_comm) continue;
    CHECK(s.ep > 1);
    CHECK_FALSE(s.ep_overlap);
    CHECK((s.pp == 1 || s.schedule == spec::Schedule::Interleaved));
    CHECK(s.recompute != spec::Recompute::Full);
    with_pp1 = with_pp1 || s.pp == 1;
    with_interleaved = with_interleaved || s.schedule == spec::Schedule::Interleaved;
  }
  CHECK(with_pp1);
  CHECK(with_interleaved);
  // a dense model never gets it
  for (const auto& c : search::enumerate_space(cluster, test::tiny_gpt(8, 64), options))
    CHECK_FALSE(c.strategy.overlap_moe_comm);
}

TEST_CASE("DualPipeV is tried where the framework runs it, with 2·pp micro-batches, and paired under MoE") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_moe();  // 4 layers, a batch of 32
  auto options = options_for({16});
  options.fixed = spec::parse_inline_strategy("framework=torchtitan,tp=1,cp=1,pp=2,zero=1", "--fix");
  bool dualpipev = false, paired = false;
  for (const auto& c : search::enumerate_space(cluster, workload, options)) {
    const auto& s = c.strategy;
    if (s.schedule != spec::Schedule::DualPipeV) continue;
    dualpipev = true;
    CAPTURE(spec::strategy_text(s));
    CHECK(s.vpp == 2);
    CHECK(workload.training.global_batch / (c.gpus / s.pp * s.mb) >= 2 * s.pp);  // micro-batches per pipeline
    paired = paired || s.overlap_moe_comm;
  }
  CHECK(dualpipev);
  CHECK(paired);
  // Megatron-Core has no DualPipe schedule
  options.fixed = spec::parse_inline_strategy("framework=megatron-core,tp=1,cp=1,pp=2,zero=1", "--fix");
  for (const auto& c : search::enumerate_space(cluster, workload, options))
    CHECK(c.strategy.schedule != spec::Schedule::DualPipeV);
}

TEST_CASE("a pinned segment gives every candidate that part of each rack") {
  const auto rack = spec::load_cluster_spec(test::topology("gb200-nvl72"));
  const auto workload = test::tiny_gpt(8, 64);
  search::SweepOptions options;
  options.fixed = spec::parse_inline_strategy("segment=16,tp=4,pp=1,cp=1,mb=1,recompute=none", "--fix");
  // 16 of each rack's 18 trays of 4 GPUs: 64 of its 72
  const auto part = search::allocated_cluster(rack, options);
  CHECK(part.node.devices == 64);
  CHECK(part.num_devices() == rack.nodes * 64);
  const auto candidates = search::enumerate_space(rack, workload, options);
  REQUIRE(!candidates.empty());
  for (const auto& c : candidates) CHECK(c.gpus == rack.nodes * 64);  // by default every allocated GPU
  // a segment no rack has is an error at the pinned key, not an empty space
  options.fixed = spec::parse_inline_strategy("segment=19,tp=4", "--fix");
  CHECK_THROWS_WITH_AS(search::allocated_cluster(rack, options), doctest::Contains("--fix: /segment: 19 hosts"),
                       SpecError);
}

TEST_CASE("on racks of trays the sweep also tries NVIDIA's segment, and it wins where groups align") {
  const auto rack = spec::load_cluster_spec(test::topology("gb200-nvl72"));  // 8 racks of 18 trays of 4
  const auto workload = test::gpt3_layers(4, 128);
  // tp 16 on 128 GPUs: without a segment the first rack's 72 GPUs hold four and a half tp groups,
  // so one straddles two racks and its all-reduces cross the 400G NICs; the segment NVIDIA's
  // scripts ask for (the most trays of a rack dividing the job's 32: 16) gives each rack 64 GPUs,
  // four whole groups
  auto options = options_for({128}, 2);
  options.fixed = spec::parse_inline_strategy("tp=16,sp=on,pp=1,cp=1,mb=1,zero=1,recompute=none", "--fix");
  const auto segments_tried = [&](const spec::ClusterSpec& cluster) {
    std::set<int> segments;  // 0: none
    for (const auto& c : search::enumerate_space(cluster, workload, options))
      segments.insert(c.strategy.segment.value_or(0));
    return segments;
  };
  CHECK(segments_tried(rack) == std::set<int>{0, 16});
  const auto r = run_sweep(rack, workload, options);
  REQUIRE(r.top.size() == 2);
  CHECK(r.top[0].strategy.find("segment=16") != std::string::npos);
  CHECK(r.top[1].strategy.find("segment") == std::string::npos);
  CHECK(r.top[0].step_time_s < 0.95 * r.top[1].step_time_s);
  // 96 GPUs are 24 trays: 12 of each rack; 576 are every tray of the 8 racks: no segment
  options.fixed = spec::parse_inline_strategy("tp=8,pp=1,cp=1,mb=1", "--fix");
  options.gpus = {96};
  CHECK(segments_tried(rack) == std::set<int>{0, 12});
  options.gpus = {576};
  CHECK(segments_tried(rack) == std::set<int>{0});
  // a pinned segment is the only one tried
  options.gpus = {144};
  options.fixed = spec::parse_inline_strategy("segment=18,tp=8,pp=1,cp=1,mb=1", "--fix");
  CHECK(segments_tried(rack) == std::set<int>{18});
  // a node that is one host (a DGX) has no segment to try
  options.gpus = {32};
  options.fixed = spec::parse_inline_strategy("tp=8,pp=1,cp=1,mb=1", "--fix");
  CHECK(segments_tried(test::fat_tree_cluster(4, 8, true, 2)) == std::set<int>{0});
}

TEST_CASE("DeepEP's dispatch is tried where an expert-parallel group spans domains, under Megatron-Core") {
  // two nodes of 8: a group of tp·cp·ep ranks wider than 8 crosses the network, where DeepEP's two
  // legs differ from the all-to-all; inside a node they are the same exchange, not tried twice
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_moe();  // 8 experts
  auto options = options_for({16});
  options.fixed = spec::parse_inline_strategy("pp=1,cp=1,mb=1,recompute=none", "--fix");
  std::set<std::pair<int, bool>> seen;  // (tp·ep, deepep)
  for (const auto& c : search::enumerate_space(cluster, workload, options))
    seen.insert({c.strategy.tp * c.strategy.ep, c.strategy.deepep_dispatch});
  CHECK(seen.contains({16, true}));
  CHECK(seen.contains({16, false}));
  CHECK(seen.contains({8, false}));
  for (const auto& [width, deepep] : seen) CHECK((!deepep || width > 8));
  // frameworks without a DeepEP dispatcher are not offered one; a pinned dispatcher is kept
  options.fixed = spec::parse_inline_strategy("framework=torchtitan,pp=1,cp=1,mb=1,recompute=none", "--fix");
  for (const auto& c : search::enumerate_space(cluster, workload, options)) CHECK(!c.strategy.deepep_dispatch);
  options.fixed = spec::parse_inline_strategy("pp=1,cp=1,mb=1,recompute=none,dispatcher=alltoall", "--fix");
  for (const auto& c : search::enumerate_space(cluster, workload, options)) CHECK(!c.strategy.deepep_dispatch);
}

TEST_CASE("uneven layers: the multi-token prediction modules' layers count as the last stage's") {
  // DeepSeek-V3's 61 layers and one module on 8 stages: 7 + 6×8 + 6 and the module, as
  // Megatron-Bridge's recipe splits them (without the module: 6 + 6×8 + 7); on 4 stages 15 + 2×16 + 14
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  auto workload = test::tiny_gpt(61, 64);
  auto options = options_for({16}, 50);
  const auto outer = [&](int pp) {
    options.fixed = spec::parse_inline_strategy(fmt::format("tp=1,pp={}", pp), "--fix");
    const auto space = search::enumerate_space(cluster, workload, options);
    REQUIRE(!space.empty());
    return std::pair{space.front().strategy.first_stage_layers, space.front().strategy.last_stage_layers};
  };
  CHECK(outer(8) == std::pair{std::optional<int>{6}, std::optional<int>{7}});
  workload.model.mtp_layers = 1;
  CHECK(outer(8) == std::pair{std::optional<int>{7}, std::optional<int>{6}});
  CHECK(outer(4) == std::pair{std::optional<int>{15}, std::optional<int>{14}});
  // DualPipeV's head and modules are on the first stage: the outer counts trade places
  options.fixed = spec::parse_inline_strategy("framework=torchtitan,tp=1,pp=8,schedule=dualpipev", "--fix");
  const auto v = search::enumerate_space(cluster, workload, options);
  REQUIRE(!v.empty());
  CHECK(v.front().strategy.first_stage_layers == 6);
  CHECK(v.front().strategy.last_stage_layers == 7);
}

TEST_CASE("a pinned pipeline layout fixes the virtual stages: pp divides them, vpp is what is left") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto workload = test::tiny_gpt(8, 64);
  auto options = options_for({16}, 50);
  options.fixed = spec::parse_inline_strategy("pipeline_layout=Et*2|t*2|t*2|t*2L", "--fix");
  std::set<std::pair<int, int>> seen;  // (pp, vpp)
  const auto space = search::enumerate_space(cluster, workload, options);
  REQUIRE(!space.empty());
  for (const auto& c : space) {
    seen.insert({c.strategy.pp, c.strategy.vpp});
    CHECK(c.strategy.pipeline_layout == spec::parse_pipeline_layout("Et*2|t*2|t*2|t*2L"));
    CHECK((c.strategy.vpp == 1 || c.strategy.schedule == spec::Schedule::Interleaved));
  }
  CHECK(seen == std::set<std::pair<int, int>>{{2, 2}, {4, 1}});
  // and every plan it ranks runs
  const auto ranked = run_sweep(cluster, workload, options);
  REQUIRE(!ranked.top.empty());
  for (const auto& p : ranked.top) CHECK(p.strategy.find("pipeline_layout=Et*2|t*2|t*2|t*2L") != std::string::npos);
}
