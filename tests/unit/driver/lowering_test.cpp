#include <doctest/doctest.h>

#include "common/clusters.hpp"
#include "common/jobs.hpp"
#include "common/reports.hpp"
#include "common/workloads.hpp"
#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/memory_timeline.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/sim/engine.hpp"

using namespace trainsim;

namespace {

spec::Job tiny_job(const std::string& strategy, int nodes = 2, spec::WorkloadSpec w = test::tiny_gpt()) {
  spec::Sources sources{.topology = "test", .workload = w.name, .strategy = "s"};
  return spec::resolve_job(test::fat_tree_cluster(nodes, 40, true, 2), std::move(w),
                           spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
}

driver::RunReport simulate(const spec::Job& job, bool full = false) {
  driver::RunOptions o;
  o.full = full;
  return driver::build_run_report(job, o);
}


}  // namespace

TEST_CASE("simulating one rank per stage equals simulating every rank") {
  for (const auto* strategy :
       {"tp=2,pp=2,gpus=16", "tp=2,gpus=16,zero=1", "tp=4,pp=2,gpus=16,sp=on,recompute=selective",
        "tp=2,pp=2,gpus=16,schedule=interleaved,vpp=2", "gpus=16,zero=3,mb=2", "tp=2,pp=4,gpus=16,schedule=zb-h1",
        "tp=2,gpus=16,zero=2,recompute=full"}) {
    CAPTURE(strategy);
    const auto job = tiny_job(strategy);
    const auto folded = simulate(job, false);
    const auto full = simulate(job, true);
    CHECK(folded.simulation->simulated_ranks == static_cast<std::size_t>(job.strategy.pp));
    CHECK(full.simulation->simulated_ranks == 16);
    CHECK(folded.simulation->step_time_s == full.simulation->step_time_s);
    CHECK(folded.peak_memory == full.peak_memory);
    CHECK(folded.simulation->bubble_fraction == doctest::Approx(full.simulation->bubble_fraction));
  }
}

TEST_CASE("the simulated memory peak matches the analytic model where both are exact") {
  // 1F1B, selective recompute with SP: the first stage holds p micro-batches of its layers
  const auto job = tiny_job("tp=2,pp=4,gpus=16,sp=on,recompute=selective,mb=2");
  const auto r = simulate(job);
  CHECK(r.peak_memory == doctest::Approx(static_cast<double>(r.memory.peak().bytes.total().count)).epsilon(0.02));
}

TEST_CASE("without a pipeline the loss's tensors and a layer's backward working set do not add up") {
  // one stage holding every layer, fully recomputed (each keeps its input; the layer being rebuilt
  // in the backward holds all of its own): the peak is at the loss (the logits) or at the last
  // layer's backward (its working set), whichever is larger, never both; the analytic model agrees
  // with the simulation on either side of the switch
  for (const std::int64_t vocab : {2048, 65536}) {
    auto w = test::tiny_gpt(2);
    w.model.vocab = vocab;
    const auto r = simulate(tiny_job("tp=2,gpus=16,sp=on,recompute=full,mb=2", 2, w));
    CAPTURE(vocab);
    // the two vocabularies fall on either side of the switch: the peak at the small one's last
    // layer's backward, at the large one's loss
    const auto site = driver::memory_peak(r);
    REQUIRE(site);
    CHECK((site->task.find("head") != std::string::npos) == (vocab == 65536));
    const auto& peak = r.simulation->per_stage.front().memory_at_peak;
    CHECK(static_cast<double>(peak[static_cast<std::size_t>(lower::MemoryKind::Activations)]) ==
          doctest::Approx(r.memory.peak().bytes.activations.as_double()).epsilon(0.01));
  }
}

TEST_CASE("ZeRO-3 moves 1.5 times the data-parallel bytes of DDP") {
  // DDP: one all-reduce of the gradients (2P bytes of bus traffic); ZeRO-3: all-gather before
  // forward and before backward plus a reduce-scatter (P each). Payload bytes: P + P + P vs P.
  // gradients reduced in bf16 as the parameters are gathered: the same bytes per element
  const auto ddp = simulate(tiny_job("gpus=16,mb=2,grad_reduce_dtype=bf16"));
  const auto zero3 = simulate(tiny_job("gpus=16,mb=2,zero=3,grad_reduce_dtype=bf16"));
  // nccl-tests sizes: an all-reduce of P, gathers and scatters of P: bus bytes 2P(n−1)/n vs 3P(n−1)/n
  const double ddp_bus = test::comm_bytes(ddp, lower::Category::DpComm) * 2;
  const double zero3_bus = test::comm_bytes(zero3, lower::Category::DpComm);
  CHECK(zero3_bus / ddp_bus == doctest::Approx(1.5).epsilon(0.01));
}

TEST_CASE("ZeRO-1 costs what DDP costs when the network is the bottleneck") {
  // a model with little compute per parameter on slow links: data-parallel traffic dominates
  auto cluster = test::fat_tree_cluster(8, 40, true, 2);
  std::get<spec::LeafSpineNetwork>(cluster.network).nic_bandwidth = Bandwidth{1e9};
  auto w = test::tiny_gpt(8, 64, 128);
  spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
  auto job_for = [&](const std::string& s) {
    return spec::resolve_job(cluster, w, spec::read_strategy_spec(spec::parse_inline_strategy(s, "s"), "s"), sources);
  };
  // a reduce-scatter and an all-gather of P bf16 elements move what an all-reduce of P moves
  const auto ddp = simulate(job_for("tp=8,gpus=64,grad_reduce_dtype=bf16"));
  const auto zero1 = simulate(job_for("tp=8,gpus=64,zero=1,grad_reduce_dtype=bf16"));
  CHECK(ddp.simulation->breakdown.exposed_comm_s > 0.5 * ddp.simulation->step_time_s);
  CHECK(zero1.simulation->step_time_s == doctest::Approx(ddp.simulation->step_time_s).epsilon(0.02));
}

TEST_CASE("tensor parallelism inside a node costs little; across nodes it costs much more") {
  // The seed lecture (HuggingFace's measurements): 10–12% lost at 8 GPUs, 42% at 16, 65% at 32.
  // GPT-3-sized layers, throughput per GPU relative to one GPU (memory ignored).
  const auto w = test::gpt3_layers(4, 32);
  const auto per_gpu = [&](int tp) {
    const auto job =
        test::make_job("dgx-a100-superpod", w, fmt::format("tp={},gpus={},sp=on,recompute=selective", tp, tp));
    return simulate(job).tflops_per_gpu;
  };
  const double tp1 = per_gpu(1);
  const double loss8 = 1 - per_gpu(8) / tp1;
  const double loss16 = 1 - per_gpu(16) / tp1;
  const double loss32 = 1 - per_gpu(32) / tp1;
  MESSAGE("throughput lost to tensor parallelism: tp8 " << loss8 << ", tp16 " << loss16 << ", tp32 " << loss32);
  CHECK(loss8 > 0.05);
  CHECK(loss8 < 0.25);
  CHECK(loss16 > 0.30);
  CHECK(loss32 > 0.45);
  CHECK(loss8 < loss16);
  CHECK(loss16 < loss32);
}

TEST_CASE("data-parallel gradient reduction overlaps the backward pass") {
  const auto r = simulate(tiny_job("gpus=16,overlap_grad_reduce=on"));
  const auto& s = *r.simulation;
  const double dp_busy = test::busy_seconds(r, "dp");
  CHECK(dp_busy > 0);
  // most of the reduction hides behind compute: far less exposed than it is busy
  CHECK(s.breakdown.exposed_comm_s < dp_busy + 1e-3);
}

TEST_CASE("expert and context parallelism put their traffic on their own streams") {
  const auto moe = simulate(tiny_job("tp=2,ep=4,gpus=16", 2, test::tiny_moe()));
  CHECK(test::busy_seconds(moe, "ep") > 0);
  auto long_seq = test::tiny_gpt(8, 32, 2048);
  const auto cp = simulate(tiny_job("tp=2,cp=2,gpus=16", 2, long_seq));
  CHECK(test::busy_seconds(cp, "cp") > 0);
}

TEST_CASE("fp32 training moves fp32 activations and gradients: twice the bytes of bf16") {
  auto fp32 = test::tiny_gpt();
  fp32.training.dtype = spec::Dtype::Fp32;
  const auto bytes = test::comm_bytes;
  // gradients reduced in the training precision (Megatron-LM 2021)
  const auto half = simulate(tiny_job("framework=megatron-2021,tp=2,pp=2,gpus=16"));
  const auto full = simulate(tiny_job("framework=megatron-2021,tp=2,pp=2,gpus=16", 2, fp32));
  for (const auto category : {lower::Category::TpComm, lower::Category::PpComm, lower::Category::DpComm}) {
    CAPTURE(static_cast<int>(category));
    REQUIRE(bytes(half, category) > 0);
    // the gradient-norm all-reduce (8 bytes) is the same in both
    CHECK(bytes(full, category) == doctest::Approx(2 * bytes(half, category)).epsilon(1e-4));
  }
}

TEST_CASE("a job simulated on its reachable part of the cluster gives what the whole cluster gives") {
  // 512 GPUs of Llama 3's 24,576: one pod of 3,072 is built (topo::reachable_part), not eight
  const auto job = test::make_job("h100-roce-llama3", "llama3-8b", "tp=8,pp=2,dp=32,zero=1,gpus=512");
  const driver::RunOptions options;
  const driver::ClusterModel whole(job.cluster, options.tunables(job.cluster).values.collectives);
  const auto costs = whole.cost_model();
  const auto on_whole = driver::build_run_report(job, options, costs.get());
  const auto on_part = driver::build_run_report(job, options);
  REQUIRE(on_whole.simulation);
  REQUIRE(on_part.simulation);
  CHECK(on_part.simulation->step_time_s == on_whole.simulation->step_time_s);
  CHECK(on_part.peak_memory == on_whole.peak_memory);
  CHECK(on_part.simulation->breakdown.exposed_comm_s == on_whole.simulation->breakdown.exposed_comm_s);
}

namespace {

// Every task of a lowered step as a line: name, category, streams, work, dependencies and memory.
std::vector<std::string> task_lines(const lower::Lowered& l) {
  const auto& g = l.graph;
  std::vector<std::string> out;
  for (std::uint32_t i = 0; i < g.num_tasks(); ++i) {
    const sim::TaskId t{i};
    auto line = fmt::format("{} c{} s", g.name(t), g.category(t));
    for (const auto s : g.streams(t)) line += fmt::format(" {}", s.value);
    if (const auto w = g.work(t); const auto* c = std::get_if<sim::ComputeWork>(&w)) {
      line += fmt::format(" compute {}", c->duration.ps);
    } else {
      const auto& comm = std::get<sim::CommWork>(w);
      line += fmt::format(" comm {} {} {} {}", comm.latency.ps, comm.transfer.ps, comm.bytes, comm.compute_share);
      for (const auto& share : g.load(comm.load)) line += fmt::format(" l{}:{}", share.link, share.share);
    }
    line += " d";
    g.for_each_dependency(t, [&](sim::TaskId d) { line += fmt::format(" {}", d.value); });
    g.for_each_memory(t, [&](const sim::MemoryEffect& m) {
      line += fmt::format(" m{}:{}:{}:{}", m.pool.value, m.bytes, m.at_end, static_cast<int>(m.kind));
    });
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace

TEST_CASE("a unit's pass played back for later micro-batches issues the tasks walking its ops would") {
  // every way a pass is walked: tp with and without SP and its overlap, selective, full and uniform
  // recomputation, cp (all-gather and ring), MoE with shared experts overlapped, interleaved and
  // zero-bubble schedules, ZeRO-3 gathers between the units, two lanes of combined 1F1B
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"llama3-70b",
       "tp=8,sp=on,tp_overlap=on,pp=4,vpp=5,schedule=interleaved,dp=4,mb=1,recompute=selective,"
       "recompute_modules=core_attn+layernorm+mlp,gpus=128"},
      {"llama3-70b", "tp=8,pp=4,dp=4,mb=1,recompute=full,recompute_method=uniform,recompute_layers=4,gpus=128"},
      {"llama3-8b", "tp=4,cp=4,dp=4,zero=3,mb=1,cp_comm=ring,recompute=full,gpus=64"},
      {"llama3-8b", "tp=2,cp=2,sp=on,pp=2,schedule=zb-h1,dp=16,mb=1,gpus=128"},
      {"mixtral-8x7b", "tp=2,ep=8,pp=4,dp=8,zero=1,mb=1,recompute=full,gpus=64"},
      {"qwen3-30b-a3b", "tp=1,ep=8,overlap_moe_comm=on,pp=2,vpp=8,dp=64,zero=3,mb=1,schedule=interleaved,gpus=128"},
  };
  for (const auto& workload_strategy : jobs) {
    const auto& strategy = workload_strategy.second;
    CAPTURE(strategy);
    const auto job = test::make_job("dgx-h100-superpod", workload_strategy.first, strategy);
    const auto tuning = driver::RunOptions{}.tunables(job.cluster).values;
    const driver::ClusterModel cluster(job.cluster, tuning.collectives);
    auto options = driver::RunOptions{}.lowering(tuning);
    const auto played = lower::lower(job, *cluster.cost_model(), options);
    options.replay_passes = false;
    const auto walked = lower::lower(job, *cluster.cost_model(), options);
    REQUIRE(played.graph.num_tasks() > 1000);
    CHECK(task_lines(played) == task_lines(walked));
    CHECK(played.collectives == walked.collectives);
  }
  // what an exporter keeps of each task, and a rank simulated on its own (a straggler) beside the
  // folded ones
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "tp=2,sp=on,pp=2,dp=32,mb=1,gpus=128");
  const auto tuning = driver::RunOptions{}.tunables(job.cluster).values;
  const driver::ClusterModel cluster(job.cluster, tuning.collectives);
  auto options = driver::RunOptions{}.lowering(tuning);
  options.record_work = true;
  options.distinct_ranks = {9};
  const auto played = lower::lower(job, *cluster.cost_model(), options);
  options.replay_passes = false;
  const auto walked = lower::lower(job, *cluster.cost_model(), options);
  REQUIRE(played.ranks.size() > static_cast<std::size_t>(job.strategy.pp));
  CHECK(task_lines(played) == task_lines(walked));
  const auto work = [](const lower::Lowered& l) {
    std::vector<std::tuple<double, double, int, int>> out;
    for (const auto& w : l.work) out.emplace_back(w.flops, w.bytes, w.op, w.group);
    return out;
  };
  REQUIRE(played.work.size() == played.graph.num_tasks());
  CHECK(work(played) == work(walked));
  CHECK(played.groups == walked.groups);
}
