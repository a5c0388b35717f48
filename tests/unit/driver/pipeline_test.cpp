// Pipeline schedules on a uniform toy model with free communication: the measured bubbles and
// activation peaks against their closed forms.
#include <doctest/doctest.h>

#include "lower/offload.hpp"
#include "trainsim/driver/memory_timeline.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/model/saved_tensors.hpp"

#include <nlohmann/json.hpp>

#include "common/clusters.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/spec/reader.hpp"

using namespace trainsim;

namespace {

// 16 identical layers and a negligible vocabulary: compute in the layers dominates; the network is
// effectively free. The default shape is attention-heavy (long sequences, small hidden);
// `gemm_heavy` makes forward, input-gradient and weight-gradient passes about equal, as the
// zero-bubble paper assumes.
spec::Job toy(const std::string& strategy, std::int64_t batch = 64, bool gemm_heavy = false,
              double host_bandwidth = 0) {
  auto cluster = test::fat_tree_cluster(4, 40, true, 2);
  if (host_bandwidth > 0) cluster.device.host_bandwidth = Bandwidth{host_bandwidth};
  cluster.node.fabric.bandwidth = Bandwidth{1e15};
  cluster.node.fabric.latency = Duration::zero();
  auto& net = std::get<spec::LeafSpineNetwork>(cluster.network);
  net.nic_bandwidth = Bandwidth{1e15};
  net.latency = Duration::zero();
  net.switch_latency = Duration::zero();
  const nlohmann::json w = {
      {"name", "toy"},
      {"model",
       {{"kind", "transformer"},
        {"layers", 16},
        {"hidden", gemm_heavy ? 4096 : 256},
        {"heads", 4},
        {"ffn_hidden", gemm_heavy ? 16384 : 1024},
        {"vocab", 8},
        {"mlp", "gelu"},
        {"position", "rope"},
        {"dropout", false}}},
      {"training",
       {{"seq_len", gemm_heavy ? 512 : 8192}, {"global_batch", batch}, {"dtype", "bf16"}, {"optimizer", "adam"}}}};
  spec::Sources sources{.topology = "t", .workload = "w", .strategy = "s"};
  return spec::resolve_job(cluster, spec::read_workload_spec(w, "w"),
                           spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
}

driver::RunOptions free_communication() {
  driver::RunOptions o;
  o.overrides.set("collectives", "launch", 0);
  o.overrides.set("kernels", "kernel_gap", 0);
  for (const auto* key : {"eager_launch", "compiled_launch", "graph_launch", "collective_launch"})
    o.overrides.set("host", key, 0);
  return o;
}

// The forward, backward (input gradient) and weight-gradient time of micro-batch 0 on stage 1's
// compute stream, from the simulated timeline.
struct PassTimes {
  double forward = 0, backward = 0, weight = 0;
};
PassTimes passes_of_first_microbatch(const driver::RunReport& r) {
  const auto& g = r.step->lowered.graph;
  PassTimes out;
  for (const auto t : g.stream_tasks(r.step->lowered.ranks.at(1).streams[0])) {
    const auto name = g.name(t);
    const auto& span = r.step->timeline.tasks[t.index()];
    const double d = (span.end - span.start).seconds();
    if (name.starts_with("F0 ")) out.forward += d;
    if (name.starts_with("B0 ")) out.backward += d;
    if (name.starts_with("W0 ")) out.weight += d;
  }
  return out;
}

double bubble_of(const std::string& strategy, std::int64_t batch = 64, bool gemm_heavy = false) {
  const auto job = toy(strategy, batch, gemm_heavy);
  return driver::build_run_report(job, free_communication()).simulation->bubble_fraction;
}

}  // namespace

TEST_CASE("1F1B and GPipe idle (p−1)/(m+p−1) of the step: the seed's (p−1)/m of the ideal time") {
  for (const int p : {2, 4, 8}) {
    for (const int m : {4, 8, 16}) {
      CAPTURE(p);
      CAPTURE(m);
      const double expected = (p - 1.0) / (m + p - 1.0);
      CHECK(bubble_of(fmt::format("pp={},gpus={}", p, p), m) == doctest::Approx(expected).epsilon(0.03));
      CHECK(bubble_of(fmt::format("pp={},gpus={},schedule=gpipe", p, p), m) == doctest::Approx(expected).epsilon(0.03));
    }
  }
}

TEST_CASE("interleaving divides the bubble by the virtual stages: (p−1)/(v·m+p−1)") {
  for (const int v : {2, 4}) {
    const int p = 4, m = 8;
    CAPTURE(v);
    CHECK(bubble_of(fmt::format("pp={},gpus={},schedule=interleaved,vpp={}", p, p, v), m) ==
          doctest::Approx((p - 1.0) / (v * m + p - 1.0)).epsilon(0.05));
  }
}

TEST_CASE("ZB-H1's bubble is (p−1)(F+B−W), about a third of 1F1B's when the passes are equal") {
  const int p = 4, m = 8;
  const auto job = toy("pp=4,gpus=4,schedule=zb-h1", m, true);
  const auto r = driver::build_run_report(job, free_communication());
  // F, B and W of one micro-batch on an inner stage, from the timeline
  const auto [f, b, w] = passes_of_first_microbatch(r);
  const double bubble = (p - 1) * (f + b - w);
  const double expected = bubble / (m * (f + b + w) + bubble);
  MESSAGE("F " << f * 1e3 << " ms, B " << b * 1e3 << " ms, W " << w * 1e3 << " ms");
  CHECK(r.simulation->bubble_fraction == doctest::Approx(expected).epsilon(0.05));
  // with F = B = W the same expression is a third of 1F1B's (p−1)(F+B+W)
  const double one_f_one_b = bubble_of("pp=4,gpus=4", m, true);
  CHECK(r.simulation->bubble_fraction < 0.6 * one_f_one_b);
}

TEST_CASE("the bubble falls as micro-batches grow") {
  double last = 1.0;
  for (const int m : {4, 8, 16, 32, 64}) {
    const double b = bubble_of("pp=4,gpus=4", m);
    CHECK(b < last);
    last = b;
  }
}

// One toy layer's backward working set (docs/model.md "Activations as autograd saves them"), by
// hand: T = 8,192 tokens, h = 256, f = 1,024, bf16: the residual stream's gradient 2·T·h (4 MiB)
// and GeLU's backward, its incoming gradient and its input's 2·T·f each (32 MiB; the attention's
// dO, dQ, dK, dV and fp32 dQ accumulator come to 24 MiB).
constexpr double kToyWorking = 36.0 * 1024 * 1024;

namespace {

// Per-stage activations at each stage's peak, in layer-micro-batches of the toy's layer, less the
// one layer's backward working set every stage's peak (its first backward) includes.
std::vector<double> activations(const std::string& strategy) {
  const auto job = toy(strategy);
  const auto r = driver::build_run_report(job, free_communication());
  const double per_layer =
      model::layer_checkpoint(job, job.workload.model, model::gpu_layer_shape(job), false, false).kept;
  std::vector<double> out;
  for (const auto& s : r.simulation->per_stage)
    out.push_back((static_cast<double>(s.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)]) -
                   kToyWorking) /
                  per_layer);
  return out;
}

}  // namespace

TEST_CASE("activation memory follows the schedule") {
  // 64 micro-batches; the last stage also holds the head's activations (a few percent here)
  const int p = 4, m = 64, layers_per_stage = 4;
  SUBCASE("GPipe keeps all m micro-batches") {
    const auto a = activations("pp=4,gpus=4,schedule=gpipe");
    for (const double x : a) CHECK(x == doctest::Approx(m * layers_per_stage).epsilon(0.05));
  }
  SUBCASE("1F1B keeps p − stage on each stage") {
    const auto a = activations("pp=4,gpus=4");
    for (int s = 0; s < p; ++s)
      CHECK(a[static_cast<std::size_t>(s)] == doctest::Approx((p - s) * layers_per_stage).epsilon(0.05));
  }
  SUBCASE("interleaving multiplies the first stage's by 1 + (p−1)/(p·v)") {
    const int v = 2;
    const auto a = activations("pp=4,gpus=4,schedule=interleaved,vpp=2");
    CHECK(a[0] == doctest::Approx(p * layers_per_stage * (1.0 + (p - 1.0) / (p * v))).epsilon(0.02));
  }
  SUBCASE("ZB-H1 peaks at 1F1B's first-stage peak; later stages hold deferred weight gradients") {
    // Qi et al. 2023 §2.1: the same peak as 1F1B. Stage s holds at most p − s micro-batches in full
    // and s more of which only the weight-gradient inputs remain, so no stage exceeds p.
    const auto zb = activations("pp=4,gpus=4,schedule=zb-h1");
    const auto base = activations("pp=4,gpus=4");
    CHECK(zb[0] == doctest::Approx(base[0]).epsilon(0.01));
    for (int s = 1; s < p; ++s) {
      CHECK(zb[static_cast<std::size_t>(s)] > base[static_cast<std::size_t>(s)]);
      CHECK(zb[static_cast<std::size_t>(s)] <= base[0] * 1.01);
    }
  }
}

TEST_CASE("the memory peak of 1F1B's first stage is its first backward: p forwards in flight") {
  // stage 0 runs p forwards before its first backward frees one: its live activations peak when the
  // first backward (micro-batch 0's) holds its working set beside the p micro-batches' saved
  // tensors, and the curve reaches that peak
  const int p = 4;
  const auto job = toy(fmt::format("pp={},gpus={}", p, p), 16);
  const auto r = driver::build_run_report(job, free_communication());
  const auto peak = driver::memory_peak(r);
  REQUIRE(peak.has_value());
  CHECK(peak->stage == 0);
  CHECK(peak->phase == "backward");
  CHECK(peak->microbatch == 0);
  const auto& f = r.simulation->per_stage.front();
  CHECK((peak->live_static + peak->live_activations + peak->live_buffers).count ==
        f.memory_at_peak[0] + f.memory_at_peak[1] + f.memory_at_peak[2]);
  const auto curves = driver::memory_curves(r, 50);
  REQUIRE(curves.size() == static_cast<std::size_t>(p));
  double top = 0;
  for (const auto& [t, bytes] : curves.front().points) top = std::max(top, bytes);
  CHECK(top == doctest::Approx(static_cast<double>(f.memory_at_peak[0] + f.memory_at_peak[1] + f.memory_at_peak[2])));
}

TEST_CASE(
    "activation offloading: TE's window map, the peak less all but one offloaded layer, copies hidden or exposed") {
  // Transformer Engine's layer_window_map: N groups spread over L layers, the remainder first
  CHECK(lower::offload_windows(8, 32) == std::vector<int>{3, 7, 11, 15, 19, 23, 27, 31});
  CHECK(lower::offload_windows(3, 10) == std::vector<int>{3, 6, 9});
  CHECK(lower::offload_windows(31, 32).front() == 1);  // layer 0's copy is never waited for at once
  CHECK(lower::offload_windows(31, 32).back() == 31);

  // the toy's 16 layers, one micro-batch in flight (pp = 1): at the peak (the last layer's backward)
  // every offloaded layer's tensors are on the host but the group copied back first
  const int n = 4;
  const std::int64_t batch = 4;  // micro-batches per step
  const auto run = [&](int offloaded, double host) {
    const auto job = toy(fmt::format("gpus=1,offload_layers={}", offloaded), batch, false, host);
    return driver::build_run_report(job, free_communication());
  };
  const auto job = toy("gpus=1", batch, false, 1e15);
  const double per_layer =
      model::layer_checkpoint(job, job.workload.model, model::gpu_layer_shape(job), false, false).kept;
  const auto none = run(0, 1e15);
  const auto fast = run(n, 1e15);
  CHECK(static_cast<double>(none.live_peak_memory - fast.live_peak_memory) == doctest::Approx((n - 1) * per_layer));
  // the closed-form estimate takes off the same
  const auto analytic = [](const spec::Job& j) { return model::estimate_memory(j).peak().bytes.live().as_double(); };
  CHECK(analytic(toy("gpus=1", batch, false, 1e15)) -
            analytic(toy(fmt::format("gpus=1,offload_layers={}", n), batch, false, 1e15)) ==
        doctest::Approx((n - 1) * per_layer));
  // copies at 1 PB/s hide behind the layers: the step is the same
  CHECK(fast.simulation->step_time_s == doctest::Approx(none.simulation->step_time_s).epsilon(1e-9));
  // copies far slower than a layer: each micro-batch copies N layers out, then (after its forward)
  // back, one at a time; nothing else waits for them
  const double host = per_layer / (10 * none.simulation->step_time_s);  // a layer's copy: a tenth of a step
  const auto slow = run(n, host);
  const double copies = static_cast<double>(batch) * 2 * n * per_layer / host;
  CHECK(slow.simulation->step_time_s >= copies);
  CHECK(slow.simulation->step_time_s <= none.simulation->step_time_s + copies);
  CHECK(slow.live_peak_memory <= none.live_peak_memory);
}

TEST_CASE("DualPipeV's bubble is (PP/2 − 1)(F&B + B − 3W) and every stage holds PP + 1 chunks") {
  // DualPipe's README (deepseek-ai/DualPipe): for PP = 2p virtual stages on p devices, F, B (the
  // full backward) and W of one chunk, and F&B a forward and a backward run together (here one
  // after the other: a dense model has no all-to-all to overlap)
  const int p = 4, m = 16;
  const auto job = toy("pp=4,gpus=4,schedule=dualpipev,vpp=2", m, true);
  const auto r = driver::build_run_report(job, free_communication());
  auto [f, b, w] = passes_of_first_microbatch(r);  // both chunks of micro-batch 0 on an inner stage
  f /= 2, b /= 2, w /= 2;                          // per chunk
  const double full_backward = b + w;
  const double bubble = (p - 1) * ((f + full_backward) + full_backward - 3 * w);
  const double work = 2.0 * m * (f + b + w);
  MESSAGE("F " << f * 1e3 << " ms, B " << b * 1e3 << " ms, W " << w * 1e3 << " ms");
  CHECK(r.simulation->bubble_fraction == doctest::Approx(bubble / (work + bubble)).epsilon(0.05));
  // below 1F1B's (p − 1)(F + B) on the same devices with the same work per device
  CHECK(r.simulation->bubble_fraction < bubble_of("pp=4,gpus=4", m, true));
  // 2p chunk forwards before each stage's first backward and one more beside it: PP + 1 = 9 chunks
  // of 2 layers on every stage, where 1F1B's first stage holds p = 4 micro-batches of 4 layers
  for (const double a : activations("pp=4,gpus=4,schedule=dualpipev,vpp=2"))
    CHECK(a == doctest::Approx((2 * p + 1) * 2).epsilon(0.05));
}

TEST_CASE("a pipeline layout: as the even split where it is one; unequal stages cost Σ w + (m−1)·max w") {
  const auto step = [](const std::string& strategy) {
    return driver::build_run_report(toy(strategy, 8), free_communication()).simulation->step_time_s;
  };
  // the same stages given by a layout are the same step, to the last digit
  CHECK(step("pp=4,gpus=4,schedule=gpipe,pipeline_layout=Et*4|t*4|t*4|t*4L") == step("pp=4,gpus=4,schedule=gpipe"));
  CHECK(step("pp=4,gpus=4,pipeline_layout=Et*7|t*3|t*3|t*3L") ==
        step("pp=4,gpus=4,first_stage_layers=7,last_stage_layers=3"));
  CHECK(step("pp=4,gpus=4,pipeline_layout=E(t*2|)*7t*2L") == step("pp=4,gpus=4,schedule=interleaved,vpp=2"));
  // under DualPipeV the layout's virtual stages go down the V and back: the last one is stage 0's
  CHECK(step("pp=2,gpus=2,schedule=dualpipev,pipeline_layout=Et*4|t*4|t*4|t*4L") ==
        step("pp=2,gpus=2,schedule=dualpipev,vpp=2"));
  // GPipe's m forwards then m backwards through stages of w_s layers: Σ w + (m − 1)·max w
  const double m = 8;
  CHECK(step("pp=4,gpus=4,schedule=gpipe,pipeline_layout=Et*7|t*3|t*3|t*3L") / step("pp=4,gpus=4,schedule=gpipe") ==
        doctest::Approx((16 + (m - 1) * 7) / (16 + (m - 1) * 4)).epsilon(0.03));
}

TEST_CASE("a layout's unequal chunks: the analytic activations follow the simulated ones stage by stage") {
  // stage 0 holds chunks of 6 and 2 layers, stage 1 of 2 and 6: the interleaved warm-up keeps more
  // of the first chunk's layers in flight than the stage's average would say
  const auto job = toy("pp=2,gpus=2,pipeline_layout=Et*6|t*2|t*2|t*6L", 8);
  const auto r = driver::build_run_report(job, free_communication());
  REQUIRE(r.simulation);
  for (std::size_t s = 0; s < 2; ++s) {
    CAPTURE(s);
    const double simulated = static_cast<double>(
        r.simulation->per_stage[s].memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)]);
    CHECK(r.memory.stages[s].bytes.activations.as_double() == doctest::Approx(simulated).epsilon(0.05));
  }
}
