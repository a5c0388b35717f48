// Context and expert parallelism against closed forms: the bytes they move, when ring attention
// hides its traffic, and the activation memory context parallelism saves.
#include <doctest/doctest.h>

#include <cmath>

#include <algorithm>

#include "common/clusters.hpp"
#include "common/jobs.hpp"
#include "common/reports.hpp"
#include "common/workloads.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/kernel_model.hpp"
#include "trainsim/model/layer_ops.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace {

spec::Job job_on(const spec::ClusterSpec& cluster, spec::WorkloadSpec w, const std::string& strategy) {
  spec::Sources sources{.topology = "test", .workload = w.name, .strategy = "s"};
  return spec::resolve_job(cluster, std::move(w),
                           spec::read_strategy_spec(spec::parse_inline_strategy(strategy, "s"), "s"), sources);
}

driver::RunReport simulate_job(const spec::Job& job) {
  return driver::build_run_report(job, {});
}

}  // namespace

TEST_CASE("expert parallelism moves top_k copies of each token's hidden state, four times per layer") {
  // dispatch and combine forward, their gradients backward: 4 · top_k · hidden · 2 bytes per token
  // and MoE layer (bf16) with balanced routing, whatever the expert-parallel degree
  auto w = test::tiny_moe();  // 4 MoE layers, hidden 1024, top-2 of 8 experts
  w.model.moe->balancing = spec::Balancing::Forced;
  const auto& moe = *w.model.moe;
  for (const char* strategy : {"ep=2,gpus=16", "ep=8,gpus=16", "tp=2,ep=4,gpus=16"}) {
    CAPTURE(std::string(strategy));
    const auto job = job_on(test::fat_tree_cluster(2, 8, true, 2), w, strategy);
    const auto r = simulate_job(job);
    const double tokens = static_cast<double>(job.micro_batches * job.strategy.mb * w.training.seq_len);
    const double per_token_layer = test::comm_bytes(r, lower::Category::EpComm) / (tokens * w.model.layers);
    CHECK(per_token_layer == doctest::Approx(4.0 * moe.top_k * w.model.hidden * 2));
  }
}

TEST_CASE("dropless routing: the busiest rank's load sets the exchange and the experts' time") {
  // 8 experts whose busiest is H(8) = 761/280 times the mean: exponential loads (cv 1). A rank of
  // 8/ep experts holds an Erlang-(8/ep) load; the busiest of ep such ranks over the mean, exactly:
  // 163/128 for two ranks of four, 12259/6912 for four of two, 761/280 for eight of one
  auto w = test::tiny_moe();
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  auto balanced = w;
  balanced.model.moe->balancing = spec::Balancing::Forced;
  w.model.moe->load_imbalance = 761.0 / 280;
  struct Case {
    const char* strategy;
    double busiest;
  };
  for (const auto& [strategy, busiest] :
       {Case{"ep=2,gpus=16", 163.0 / 128}, Case{"ep=4,gpus=16", 12259.0 / 6912}, Case{"ep=8,gpus=16", 761.0 / 280}}) {
    const std::string name = strategy;
    CAPTURE(name);
    const auto uneven = simulate_job(job_on(cluster, w, strategy));
    const auto even = simulate_job(job_on(cluster, balanced, strategy));
    CHECK(test::comm_bytes(uneven, lower::Category::EpComm) / test::comm_bytes(even, lower::Category::EpComm) ==
          doctest::Approx(busiest).epsilon(1e-4).scale(0));
    CHECK(uneven.simulation->step_time_s > even.simulation->step_time_s);
    CHECK(uneven.peak_memory > even.peak_memory);
  }
  // one rank holds every expert: nothing to wait for
  CHECK(simulate_job(job_on(cluster, w, "gpus=16")).simulation->step_time_s ==
        doctest::Approx(simulate_job(job_on(cluster, balanced, "gpus=16")).simulation->step_time_s));
}

TEST_CASE("the shared experts can hide the dispatch") {
  auto w = test::tiny_moe();
  w.model.moe->shared_experts = 2;
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto plain = simulate_job(job_on(cluster, w, "ep=8,gpus=16"));
  const auto overlapped = simulate_job(job_on(cluster, w, "ep=8,gpus=16,ep_overlap=on"));
  // the same traffic, less of it on the critical path
  CHECK(test::comm_bytes(overlapped, lower::Category::EpComm) == test::comm_bytes(plain, lower::Category::EpComm));
  CHECK(overlapped.simulation->breakdown.exposed_comm_s < plain.simulation->breakdown.exposed_comm_s);
  CHECK(overlapped.simulation->step_time_s < plain.simulation->step_time_s);
}

TEST_CASE("combined 1F1B hides one micro-batch's all-to-alls behind another's compute, and creates no work") {
  // EP 8 across two nodes: the all-to-alls cross the network and are a large part of the step;
  // 16 micro-batches per step, so that most passes have a partner
  auto w = test::tiny_moe();
  w.training.global_batch = 256;
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  for (const char* layout : {"ep=8,gpus=16", "ep=8,pp=2,vpp=2,schedule=interleaved,gpus=16"}) {
    CAPTURE(std::string(layout));
    const auto plain = simulate_job(job_on(cluster, w, layout));
    const auto combined = simulate_job(job_on(cluster, w, std::string(layout) + ",overlap_moe_comm=on"));
    const auto& a = *plain.simulation;
    const auto& b = *combined.simulation;
    // the same traffic and the same compute, the latter split between two streams that share the
    // device (its busy time is the union of both, within the rounding of shared rates)
    CHECK(test::comm_bytes(combined, lower::Category::EpComm) == test::comm_bytes(plain, lower::Category::EpComm));
    CHECK(b.breakdown.compute_s == doctest::Approx(a.breakdown.compute_s).epsilon(0.02));
    // less of the all-to-all on the critical path, a shorter step
    CHECK(b.breakdown.exposed_comm_s < 0.8 * a.breakdown.exposed_comm_s);
    CHECK(b.step_time_s < a.step_time_s);
    // and never shorter than the compute the step holds, nor than the expert-parallel stream's work
    CHECK(b.step_time_s >= b.breakdown.compute_s);
    CHECK(b.step_time_s >= test::busy_seconds(combined, "ep"));
  }
}

TEST_CASE("combined 1F1B is refused where Megatron-Core refuses it") {
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto refused = [&](spec::WorkloadSpec w, const std::string& strategy) {
    try {
      job_on(cluster, std::move(w), strategy);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused(test::tiny_gpt(4, 32), "gpus=16,overlap_moe_comm=on").find("needs a mixture of experts") !=
        std::string::npos);
  auto shared = test::tiny_moe();
  shared.model.moe->shared_experts = 1;
  CHECK(refused(shared, "ep=8,gpus=16,ep_overlap=on,overlap_moe_comm=on").find("cannot both be on") !=
        std::string::npos);
  CHECK(refused(test::tiny_moe(), "ep=8,pp=2,gpus=16,overlap_moe_comm=on").find("needs schedule=interleaved") !=
        std::string::npos);
  CHECK(refused(test::tiny_moe(), "ep=8,gpus=16,overlap_moe_comm=on,recompute=full").find("other than full") !=
        std::string::npos);
  CHECK(refused(test::tiny_moe(), "ep=8,gpus=16,overlap_moe_comm=on,recompute=selective,recompute_modules=moe")
            .find("cannot recompute the moe module") != std::string::npos);
  CHECK(refused(test::tiny_moe(), "ep=8,gpus=16,overlap_moe_comm=on") == "accepted");
  CHECK(refused(test::tiny_moe(), "ep=8,gpus=16,overlap_moe_comm=on,recompute=selective,recompute_modules=moe_act") ==
        "accepted");
}

TEST_CASE("ring attention moves the all-gather's bytes and hides them when a block outlasts a step") {
  // one node of 8 GPUs, cp = 8, 32K tokens: K and V of the whole sequence are 2 · kv_heads ·
  // head_dim · s · 2 bytes per layer and micro-batch
  const auto cluster = test::fat_tree_cluster(1, 8, true, 2);
  const auto w = test::tiny_gpt(2, 8, 32768);
  const int cp = 8;
  const auto gathered = job_on(cluster, w, "cp=8,gpus=8");
  const auto ring = job_on(cluster, w, "cp=8,gpus=8,cp_comm=ring");
  const auto a = simulate_job(gathered);
  const auto b = simulate_job(ring);
  const double kv = 2.0 * w.model.kv_heads * w.model.head_dim * static_cast<double>(w.training.seq_len) * 2;
  const double passes = static_cast<double>(w.model.layers * gathered.micro_batches);
  // all-gather forward, reduce-scatter of the K/V gradients backward
  CHECK(test::comm_bytes(a, lower::Category::CpComm) == doctest::Approx(passes * 2 * kv));
  // ring: cp − 1 steps of K/V forward, of K/V and their gradients backward, and the gradients home
  CHECK(test::comm_bytes(b, lower::Category::CpComm) == doctest::Approx(passes * (kv + 2 * kv + kv / (cp - 1))));

  // The overlap condition, computed apart from the engine: one step of the ring (1/(cp − 1) of a
  // ring all-gather of K and V) against the attention of one block of keys (1/cp of the layer's).
  const auto topo = topo::Topology::build(cluster);
  cost::AlgorithmRegistry registry;
  cost::register_builtin_algorithms(registry);
  cost::CostModel costs(topo, registry);
  cost::Group group;
  for (std::uint32_t d = 0; d < 8; ++d) group.devices.push_back(topo::DeviceId{d});
  const double step = costs.cost(cost::AllGather{Bytes::from_double(kv)}, group, "ring").time.seconds() / (cp - 1);
  model::KernelContext ctx{.device = &cluster.device, .dtype = spec::Dtype::Bf16};
  double block = 0;
  for (const auto& op : model::layer_ops(w.model, model::gpu_layer_shape(ring), false))
    if (op.attention_core) block = model::kernel_time(op, model::Pass::Forward, ctx).seconds() / cp;
  REQUIRE(block > step);
  // so the ring hides nearly all of its traffic, which the all-gather leaves on the critical path
  CHECK(b.simulation->breakdown.exposed_comm_s < 0.25 * a.simulation->breakdown.exposed_comm_s);
  CHECK(b.simulation->step_time_s < a.simulation->step_time_s);
  CHECK(test::busy_seconds(b, "cp") > test::busy_seconds(a, "cp"));  // more steps, each with its own latency
}

TEST_CASE("context parallelism divides the activations by cp") {
  // the same data-parallel degree and micro-batches: each rank holds 1/cp of every sequence
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto w = test::tiny_gpt(4, 8, 16384);
  const auto activations = [&](const std::string& strategy) {
    const auto r = simulate_job(job_on(cluster, w, strategy));
    return static_cast<double>(
        r.simulation->per_stage.front().memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)]);
  };
  const double one = activations("cp=1,gpus=2");
  CHECK(activations("cp=4,gpus=8") == doctest::Approx(one / 4).epsilon(0.03));
  CHECK(activations("cp=8,gpus=16") == doctest::Approx(one / 8).epsilon(0.03));
}

namespace {

// Seconds of the simulated step's kernels, as lowered (before the engine shares the device with
// collectives running beside them): the layers' forward passes (booked as compute) and the
// recomputed ones (booked as recompute), over every simulated rank.
std::pair<double, double> forward_and_recompute_s(const driver::RunReport& r) {
  const auto& g = r.step->lowered.graph;
  double forward = 0;
  double recompute = 0;
  for (std::uint32_t i = 0; i < g.num_tasks(); ++i) {
    const sim::TaskId t{i};
    if (g.is_transfer(t)) continue;
    const auto task_work = g.work(t);
    const auto* work = std::get_if<sim::ComputeWork>(&task_work);
    if (work == nullptr) continue;
    const double s = work->duration.seconds();
    const auto category = static_cast<lower::Category>(g.category(t));
    if (category == lower::Category::Recompute) recompute += s;
    else if (category == lower::Category::Compute && g.label(t).starts_with("F# L")) forward += s;
  }
  return {forward, recompute};
}

}  // namespace

TEST_CASE("full recomputation is booked as recompute at every parallel degree: as long as the forward it repeats") {
  // Full recomputation re-runs each layer's forward before its backward (Chen et al. 2016;
  // Korthikanti et al. 2022 §4): the recomputed kernels are the forward's, whatever the layout
  // splits them with tensor-, context- or expert-parallel collectives; so recompute / forward is 1
  // at every degree, and recompute is in busy_s_by_category, not in compute
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  struct Layout {
    spec::WorkloadSpec w;
    const char* strategy;
  };
  const std::vector<Layout> layouts{
      {test::tiny_gpt(), "tp=1,gpus=8,recompute=full"},
      {test::tiny_gpt(), "tp=2,gpus=8,recompute=full"},
      {test::tiny_gpt(), "tp=8,sp=on,gpus=8,recompute=full"},
      {test::tiny_gpt(), "tp=4,sp=on,tp_overlap=on,gpus=8,recompute=full"},
      {test::tiny_gpt(), "tp=2,pp=2,gpus=8,recompute=full"},
      {test::tiny_gpt(), "tp=2,cp=2,sp=on,gpus=8,recompute=full"},
      {test::tiny_gpt(), "tp=2,cp=2,sp=on,cp_comm=ring,gpus=8,recompute=full"},
      {test::tiny_moe(), "ep=4,gpus=16,recompute=full"},
      {test::tiny_moe(), "tp=2,ep=4,gpus=16,recompute=full"},
  };
  for (const auto& l : layouts) {
    CAPTURE(std::string(l.strategy));
    const auto job = job_on(cluster, l.w, l.strategy);
    const auto r = simulate_job(job);
    REQUIRE(r.step);
    const auto [forward, recompute] = forward_and_recompute_s(r);
    REQUIRE(forward > 0);
    CHECK(recompute / forward == doctest::Approx(1.0).epsilon(1e-4));  // integer picoseconds per task
    // the report's category is that time, per rank
    CHECK(test::busy_seconds(r, "recompute") > 0);
    CHECK(test::busy_seconds(r, "recompute") <= test::busy_seconds(r, "compute"));
  }
}

TEST_CASE("groups that straddle a 72-GPU NVLink domain are reported, groups inside it are not") {
  const auto crossing = [](const std::string& strategy) {
    const auto job = test::make_job("gb200-nvl72", "deepseek-v3-like", strategy);
    const auto r = driver::build_run_report(job, {.simulate = false});
    std::vector<std::string> out;
    for (const auto& w : r.warnings)
      if (w.find("span scale-up domains") != std::string::npos) out.push_back(w);
    return out;
  };
  // ep 64 over tp 1: groups of 64 consecutive ranks against racks of 72 — 7 of the 9 straddle two
  CHECK(crossing("tp=1,ep=64,pp=3,dp=192,first_stage_layers=20,last_stage_layers=20") ==
        std::vector<std::string>{"7 of the 9 ep=64 groups span scale-up domains of 72 devices: their collectives "
                                 "cross the network"});
  // ep 8 over tp 1 divides 72: nothing crosses
  CHECK(crossing("tp=1,ep=8,pp=3,dp=192,first_stage_layers=20,last_stage_layers=20").empty());
  // 16 trays (64 GPUs) of each rack, as NVIDIA's scripts allocate 256 GPUs (Slurm --segment): every
  // ep=64 group is one rack
  CHECK(crossing("tp=1,ep=64,pp=4,dp=128,segment=16,first_stage_layers=16,last_stage_layers=15").empty());
  CHECK(crossing("tp=1,ep=64,pp=4,dp=128,first_stage_layers=16,last_stage_layers=15").size() == 1);
}

TEST_CASE("a segment of each NVL72 rack: the job's domains are 16 trays, their NICs its own") {
  const auto job = test::make_job("gb200-nvl72", "deepseek-v3-like",
                                  "tp=1,ep=64,pp=4,gpus=256,segment=16,"
                                  "first_stage_layers=16,last_stage_layers=15,mb=1");
  CHECK(job.cluster.node.devices == 64);  // 16 trays of 4
  CHECK(std::get<spec::LeafSpineNetwork>(job.cluster.network).nics_per_node == 64);
  CHECK(job.cluster.num_devices() == 8 * 64);
  // the same expert all-to-all bytes; inside one rack they stay on NVLink, straddling racks they
  // cross the network, so the EP stream is busy for less time
  const auto ep_busy = [](const std::string& segment) {
    const auto j = test::make_job("gb200-nvl72", "deepseek-v3-like",
                                  "tp=1,ep=64,pp=4,gpus=256,mb=1,"
                                  "first_stage_layers=16,last_stage_layers=15" +
                                      segment);
    return test::busy_seconds(driver::build_run_report(j), "ep");
  };
  const double whole_racks = ep_busy("");
  const double segments = ep_busy(",segment=16");
  CHECK(segments > 0);
  CHECK(segments < 0.5 * whole_racks);
}

TEST_CASE("DeepEP sends a token across the network once per domain holding its experts, then over NVLink") {
  // 16 experts, top 4, EP 16 over two 8-GPU nodes: alltoall sends top_k copies per token, 8 of 16
  // to the other node; DeepEP sends it once to each node that holds one of its experts (the network
  // leg, the longer here) and forwards the top_k copies inside the node (all of them moving, only
  // the last 128-token chunk's time trailing the network leg)
  auto w = test::tiny_moe();
  w.model.moe->experts = 16;
  w.model.moe->top_k = 4;
  w.model.moe->balancing = spec::Balancing::Forced;  // every rank its share
  const auto cluster = test::fat_tree_cluster(2, 8, true, 2);
  const auto plain = simulate_job(job_on(cluster, w, "ep=16,gpus=16"));
  const auto job = job_on(cluster, w, "ep=16,gpus=16,dispatcher=deepep");
  const auto deepep = simulate_job(job);
  const double tokens = static_cast<double>(job.micro_batches * job.strategy.mb * w.training.seq_len);
  const double domains = model::expected_domains_per_token(*w.model.moe, 2);
  const double per_token_layer = test::comm_bytes(deepep, lower::Category::EpComm) / (tokens * w.model.layers);
  CHECK(per_token_layer == doctest::Approx(4.0 * w.model.hidden * 2 * (domains + 4.0)));
  // two nodes: a token almost surely has an expert on each (1 − C(8, 4)/C(16, 4) = 0.977 per node)
  CHECK(domains == doctest::Approx(2 * (1 - 70.0 / 1820.0)));
  CHECK(deepep.simulation->breakdown.exposed_comm_s < plain.simulation->breakdown.exposed_comm_s);
  CHECK(deepep.simulation->step_time_s < plain.simulation->step_time_s);
  // one expert a rank whose busiest expert takes 1.5 times the mean: both legs carry 1.5 times
  auto uneven = w;
  uneven.model.moe->balancing = spec::Balancing::AuxLoss;
  uneven.model.moe->load_imbalance = 1.5;
  const auto busy = simulate_job(job_on(cluster, uneven, "ep=16,gpus=16,dispatcher=deepep"));
  CHECK(test::comm_bytes(busy, lower::Category::EpComm) ==
        doctest::Approx(1.5 * test::comm_bytes(deepep, lower::Category::EpComm)).epsilon(1e-4));
  // inside one node there is no network leg: the same exchange as alltoall
  const auto inside = simulate_job(job_on(cluster, w, "ep=8,gpus=16,dispatcher=deepep"));
  const auto inside_plain = simulate_job(job_on(cluster, w, "ep=8,gpus=16"));
  CHECK(inside.simulation->step_time_s == inside_plain.simulation->step_time_s);
  CHECK(test::comm_bytes(inside, lower::Category::EpComm) == test::comm_bytes(inside_plain, lower::Category::EpComm));
  // and the report says so
  CHECK(std::any_of(inside.warnings.begin(), inside.warnings.end(),
                    [](const std::string& line) { return line.starts_with("dispatcher=deepep changes nothing"); }));
  CHECK(std::none_of(deepep.warnings.begin(), deepep.warnings.end(),
                     [](const std::string& line) { return line.starts_with("dispatcher=deepep changes nothing"); }));
}
