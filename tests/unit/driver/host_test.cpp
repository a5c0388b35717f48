// The host as a resource (docs/model.md "Host overhead"): kernels and collectives launched in
// program order by one CPU thread per rank, FSDP1's rate limiter, the optimizer's launch loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "common/clusters.hpp"
#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/spec/reader.hpp"

using namespace trainsim;

namespace {

// Two layers of a model so small that every kernel runs in far less than its launch: the step is
// the host's. Learned positions, no bias, LayerNorm, GeLU.
spec::Job tiny(const std::string& strategy, std::int64_t micro_batches) {
  auto cluster = test::fat_tree_cluster(2, 40, true, 2);
  const nlohmann::json w = {
      {"name", "tiny"},
      {"model",
       {{"kind", "transformer"},
        {"layers", 2},
        {"hidden", 64},
        {"heads", 1},
        {"ffn_hidden", 256},
        {"vocab", 64},
        {"mlp", "gelu"},
        {"bias", false},
        {"dropout", false}}},
      {"training", {{"seq_len", 64}, {"global_batch", micro_batches}, {"dtype", "bf16"}, {"optimizer", "adam"}}}};
  spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
  return spec::resolve_job(cluster, spec::read_workload_spec(w, "w"),
                           spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
}

driver::RunOptions host_costs(double eager, double graph = 0) {
  driver::RunOptions o;
  o.overrides.set("host", "eager_launch", eager);
  o.overrides.set("host", "compiled_launch", eager);
  o.overrides.set("host", "graph_launch", graph);
  o.overrides.set("host", "collective_launch", 0);
  return o;
}

double step(const spec::Job& job, const driver::RunOptions& o) {
  return driver::build_run_report(job, o).simulation->step_time_s;
}

}  // namespace

TEST_CASE("a host-bound step lasts its launches: 61 per micro-batch for two tiny layers, and one for the optimizer") {
  // Per micro-batch, counted from the ops: forward 1 (embedding) + 2 × 10 (norm1, qkv, attention,
  // out_proj, residual1, norm2, fc1, act, fc2, residual2) + 3 (final norm, logits, loss) = 24;
  // backward 4 (loss, logits' two GEMMs, final norm) + 2 × 16 (four GEMMs' data and weight
  // gradients, FlashAttention's three backward kernels, five element-wise) + 1 (embedding) = 37.
  // The fused optimizer takes its 19 tensors in one multi-tensor launch.
  for (const std::int64_t m : {1, 2, 4}) {
    CAPTURE(m);
    const auto job = tiny("gpus=1,mb=1", m);
    const double slope = (step(job, host_costs(2e-3)) - step(job, host_costs(1e-3))) / 1e-3;
    CHECK(slope == doctest::Approx(61.0 * static_cast<double>(m) + 1).epsilon(1e-6));
  }
}

TEST_CASE("CUDA graphs launch a layer's pass at once: eight graph launches per micro-batch") {
  const auto job = tiny("gpus=1,mb=1,launch=cuda_graphs", 2);
  // the optimizer stays eager, its launch free here
  const double slope = (step(job, host_costs(0, 2e-3)) - step(job, host_costs(0, 1e-3))) / 1e-3;
  CHECK(slope == doctest::Approx(8.0 * 2).epsilon(1e-6));
  // and a host-bound eager step is several times slower than the same step in graphs
  CHECK(step(tiny("gpus=1,mb=1", 2), host_costs(1e-3, 1e-3)) > 5 * step(job, host_costs(1e-3, 1e-3)));
}

TEST_CASE("the waits for the host are reported, and the breakdown still adds up to the step") {
  const auto r = driver::build_run_report(tiny("gpus=1,mb=1", 4), host_costs(1e-3));
  const auto& s = *r.simulation;
  CHECK(s.breakdown.host_bound_s > 0.9 * s.step_time_s);
  CHECK(s.breakdown.compute_s + s.breakdown.exposed_comm_s + s.breakdown.host_bound_s + s.breakdown.bubble_s ==
        doctest::Approx(s.step_time_s).epsilon(1e-9));
}

TEST_CASE("a large model is device-bound: its launches change the README's GPT-3 step by under 0.1%") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b",
                                  "tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3");
  const auto with = driver::build_run_report(job);
  const double without = step(job, host_costs(0));
  CHECK(with.simulation->step_time_s == doctest::Approx(without).epsilon(1e-3));
  CHECK(with.simulation->breakdown.host_bound_s < 1e-3 * with.simulation->step_time_s);
}

namespace {

// The end of the compute task whose label starts with `prefix`, in the timeline of rank 0.
struct Spans {
  const driver::RunReport& r;
  double end_of(const std::string& prefix) const {
    const auto& g = r.step->lowered.graph;
    for (const auto t : g.stream_tasks(r.step->lowered.ranks.front().streams[0]))
      if (g.name(t).starts_with(prefix)) return r.step->timeline.tasks[t.index()].end.seconds();
    FAIL("no task ", prefix);
    return 0;
  }
  // Start times of the host's launches whose name starts with `prefix`, in order.
  std::vector<double> launches(const std::string& prefix) const {
    const auto& g = r.step->lowered.graph;
    std::vector<double> out;
    const auto host = r.step->lowered.ranks.front().streams[static_cast<std::size_t>(lower::StreamKind::Host)];
    for (const auto t : g.stream_tasks(host))
      if (g.name(t).starts_with(prefix)) out.push_back(r.step->timeline.tasks[t.index()].start.seconds());
    return out;
  }
};

}  // namespace

TEST_CASE("FSDP1's rate limiter keeps the host at most two gathered units ahead of the device") {
  // Megatron's 7.5B under FSDP on 16 A100s: the host is far faster than the device, so without the
  // limiter it launches the whole forward at once; with it, layer i's forward launch waits for the
  // device to finish layer i−2's forward, whose parameters it frees
  const auto job = [](const std::string& limiter) {
    return test::make_job("dgx-a100-superpod", "megatron2021-7.5b", "gpus=16,zero=3,mb=1,limit_all_gathers=" + limiter);
  };
  const auto job_on = job("on");
  const auto job_off = job("off");
  const auto on = driver::build_run_report(job_on);
  const auto off = driver::build_run_report(job_off);
  const Spans limited{on}, free{off};
  const auto launches_on = limited.launches("launch F0");
  const auto launches_off = free.launches("launch F0");
  const int layers = job_on.workload.model.layers;
  REQUIRE(launches_on.size() == static_cast<std::size_t>(layers + 2));  // the embedding, the layers, the head
  int ahead = 0;
  for (int layer = 2; layer < layers; ++layer) {
    const auto unit = static_cast<std::size_t>(layer + 1);  // the embedding first
    CHECK(launches_on[unit] >= limited.end_of(fmt::format("F0 L{} ", layer - 2)) - 1e-12);
    if (launches_off[unit] < free.end_of(fmt::format("F0 L{} ", layer - 2))) ++ahead;
  }
  CHECK(ahead > 20);  // the property does not hold by accident
}

TEST_CASE("Composer's per-tensor optimizer loop starts once the device is done, and launches ten ops per tensor") {
  // MPT-125M: 12 layers of 12 tensors (four linears and two LayerNorms, with biases), the token and
  // position embeddings, the final LayerNorm's two: 148 tensors, each looped over on every rank
  spec::WorkloadSpec w;
  w.name = "mpt-125m";
  w.model.layers = 12;
  w.model.hidden = 768;
  w.model.heads = 12;
  w.model.kv_heads = 12;
  w.model.head_dim = 64;
  w.model.ffn_hidden = 3072;
  w.model.vocab = 50368;
  w.model.dropout = false;
  w.training = {.seq_len = 2048, .global_batch = 64, .dtype = spec::Dtype::Bf16, .optimizer = spec::Optimizer::Adam};
  const auto job = test::make_job("a100-40gb-roce", w, "framework=composer,gpus=8,mb=8,zero=3");
  const double launch = 10e-6;
  const auto r = driver::build_run_report(job, host_costs(launch));
  const auto& g = r.step->lowered.graph;
  const auto host = r.step->lowered.ranks.front().streams[static_cast<std::size_t>(lower::StreamKind::Host)];
  const auto& tasks = g.stream_tasks(host);
  const auto opt = std::find_if(tasks.begin(), tasks.end(), [&](auto t) { return g.name(t) == "launch optimizer"; });
  REQUIRE(opt != tasks.end());
  const auto& span = r.step->timeline.tasks[opt->index()];
  CHECK((span.end - span.start).seconds() == doctest::Approx(148 * 10 * launch).epsilon(1e-9));
  double last_backward = 0;
  for (const auto t : g.stream_tasks(r.step->lowered.ranks.front().streams[0]))
    if (g.name(t).starts_with("B"))
      last_backward = std::max(last_backward, r.step->timeline.tasks[t.index()].end.seconds());
  CHECK(span.start.seconds() >= last_backward);
  // the fused optimizer: one launch per 36 tensors, and no wait for the device
  const auto fused = driver::build_run_report(
      test::make_job("a100-40gb-roce", w, "framework=composer,gpus=8,mb=8,zero=3,optimizer_impl=fused"),
      host_costs(launch));
  CHECK(fused.simulation->step_time_s < r.simulation->step_time_s - 100 * 10 * launch);
}

TEST_CASE("a stage whose host is never behind keeps only its first launch; one that falls behind keeps all") {
  const auto host_tasks = [](const driver::RunReport& r) {
    const auto& g = r.step->lowered.graph;
    const auto host = r.step->lowered.ranks.front().streams[static_cast<std::size_t>(lower::StreamKind::Host)];
    return g.stream_tasks(host).size();
  };
  // GPT-3's layers take far longer on the device than their launches: the step's first launch
  // and the optimizer's
  const auto gpt3 = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,dp=16,sp=on,recompute=selective");
  CHECK(host_tasks(driver::build_run_report(gpt3)) == 2);
  // the tiny model is host-bound from its second launch: every unit's pass (the embedding, two layers
  // and the head, forward and backward: 8 a micro-batch) and the optimizer
  const auto job = tiny("gpus=1,mb=1", 2);
  CHECK(host_tasks(driver::build_run_report(job, host_costs(1e-3))) == 2 * (2 + 2 + 2 + 2) + 1);
}

TEST_CASE("host busy counts every launch, issued as a task or left out because it can never bind") {
  // 61 kernel launches per micro-batch and the optimizer's one (the first test case), at 1 ns each:
  // the device is never waiting, so all but the first launch are left out of the graph, and the
  // host still spends them
  const auto host_busy = [](const driver::RunReport& r) {
    for (const auto& [category, seconds] : r.simulation->comm_busy_s)
      if (category == "host") return seconds;
    return 0.0;
  };
  for (const double eager : {1e-9, 1e-3}) {
    CAPTURE(eager);
    const auto job = tiny("gpus=1,mb=1", 4);
    CHECK(host_busy(driver::build_run_report(job, host_costs(eager))) ==
          doctest::Approx((61.0 * 4 + 1) * eager).epsilon(1e-6));
  }
}
