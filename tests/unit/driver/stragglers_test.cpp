// Stragglers on the event engine: the properties a slow GPU must have in synchronous training.
#include <set>

#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "common/workloads.hpp"
#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace stragglers_test {

spec::PerturbSpec slow(std::vector<int> ranks, double factor) {
  spec::PerturbSpec p;
  for (const int r : ranks) p.slow_gpus.push_back({.rank = r, .compute_factor = factor});
  return p;
}

driver::RunReport perturbed(const spec::Job& job, const spec::PerturbSpec& p, int steps = 1) {
  driver::RunOptions o;
  o.perturb = p;
  o.steps = steps;
  return driver::build_run_report(job, o);
}

TEST_CASE("no perturbation (factors of 1, no noise) gives the unperturbed report, byte for byte") {
  const auto job = test::make_job("dgx-a100-superpod", "megatron2021-7.5b", "tp=4,pp=2,gpus=32");
  const auto plain = report::to_json(driver::build_run_report(job)).dump();
  CHECK(report::to_json(perturbed(job, slow({3}, 1.0))).dump() == plain);
  spec::PerturbSpec quiet;
  quiet.noise = spec::ComputeNoise{.sigma = 0, .seed = 1};
  CHECK(report::to_json(perturbed(job, quiet)).dump() == plain);
}

TEST_CASE("synchronous data parallelism: one rank at f slows the step by (f − 1) × its compute") {
  const auto job = test::make_job("dgx-a100-superpod", "llama3-8b", "tp=1,pp=1,gpus=8,zero=0");
  const auto base = driver::build_run_report(job);
  const double compute = base.simulation->breakdown.compute_s;
  const auto r = perturbed(job, slow({5}, 1.3));
  CHECK(r.simulation->step_time_s - base.simulation->step_time_s == doctest::Approx(0.3 * compute).epsilon(0.05));
  CHECK(r.perturbation->critical_rank == 5);
}

TEST_CASE("a slow stage sets the pipeline's pace; a slow GPU slows its whole tensor-parallel group") {
  // pipeline: the slowest stage (the last, with the output layer and the loss) made slower sets the
  // pace as if the whole pipeline were: the others wait for it every micro-batch
  // (mb=4: 128 micro-batches, plenty for the pace, a quarter of the tasks of mb=1)
  const auto pipe = test::make_job("dgx-a100-superpod", "llama3-8b", "tp=1,pp=4,gpus=4,mb=4");
  const auto one = perturbed(pipe, slow({3}, 2.0)).simulation->step_time_s;
  const auto all = perturbed(pipe, slow({0, 1, 2, 3}, 2.0)).simulation->step_time_s;
  const auto base = driver::build_run_report(pipe).simulation->step_time_s;
  CHECK(one > base * 1.5);
  CHECK(one / all > 0.9);
  // tensor parallelism: the group waits for its slowest member at every layer
  const auto tp = test::make_job("dgx-a100-superpod", "llama3-8b", "tp=8,pp=1,gpus=8,mb=4");
  const auto one_tp = perturbed(tp, slow({6}, 1.5)).simulation->step_time_s;
  const auto all_tp = perturbed(tp, slow({0, 1, 2, 3, 4, 5, 6, 7}, 1.5)).simulation->step_time_s;
  CHECK(one_tp == doctest::Approx(all_tp).epsilon(0.03));
}

TEST_CASE("noise: a seed gives the same steps; percentiles in order; bad input named" * doctest::test_suite("volume")) {
  // every rank simulated for each of 8 steps, twice: 32 micro-batches per pipeline (mb=4) keep it short
  const auto job = test::make_job("dgx-a100-superpod", "megatron2021-7.5b", "tp=4,pp=2,gpus=32,mb=4");
  spec::PerturbSpec p;
  p.noise = spec::ComputeNoise{.sigma = 0.05, .seed = 3};
  const auto a = perturbed(job, p, 8);
  const auto b = perturbed(job, p, 8);
  CHECK(report::to_json(a).dump() == report::to_json(b).dump());
  CHECK(a.perturbation->p50 <= a.perturbation->p90);
  CHECK(a.perturbation->p90 <= a.perturbation->p99);
  // the slowest of 32 lognormal ranks sets each step: the mean is slower than the unperturbed step
  CHECK(a.perturbation->mean_step_s > a.perturbation->unperturbed_step_s);
  CHECK_THROWS_WITH_AS(perturbed(job, slow({32}, 2.0)),
                       "--perturb: /slow_gpus: rank 32 is outside the job's 32 ranks (0 to 31)", SpecError);
  CHECK_THROWS_WITH_AS(
      spec::read_perturb_spec(nlohmann::json{{"slow_gpus", {{{"rank", 1}, {"compute_factor", 0.5}}}}}, "p.json"),
      doctest::Contains("/slow_gpus/0/compute_factor"), SpecError);
}

TEST_CASE("a degraded NIC slows exactly the collectives routed through it") {
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "tp=8,pp=2,gpus=32");
  constexpr int kRank = 9;
  // the links that change: both directions of the cable between rank 9's NIC and its leaf
  auto plain_topology = topo::Topology::build(job.cluster);
  auto slow_topology = topo::Topology::build(job.cluster);
  REQUIRE(slow_topology.degrade_nic(topo::DeviceId{kRank}, 0.1) == 2);
  std::set<std::uint32_t> degraded;
  for (std::uint32_t l = 0; l < plain_topology.num_links(); ++l) {
    const auto& before = plain_topology.link(topo::LinkId{l});
    const auto& after = slow_topology.link(topo::LinkId{l});
    if (before == after) continue;
    degraded.insert(l);
    CHECK(after.bandwidth.bytes_per_s == doctest::Approx(0.1 * before.bandwidth.bytes_per_s));
    // one end is the NIC that rank 9's device reaches over its host link
    const auto nic = slow_topology.vertex_kind(after.from) == topo::VertexKind::Nic ? after.from : after.to;
    bool hosts_rank = false;
    for (std::uint32_t h = 0; h < plain_topology.num_links(); ++h) {
      const auto& host = plain_topology.link(topo::LinkId{h});
      hosts_rank = hosts_rank || (host.cls == topo::LinkClass::Host && host.from.value == kRank && host.to == nic);
    }
    CHECK(hosts_rank);
  }
  CHECK(degraded.size() == 2);

  // the same lowering (rank 9 simulated on its own, the rest folded) costed on both topologies
  const auto tuning = driver::RunOptions{}.tunables(job.cluster).values;
  const driver::ClusterModel plain_cluster(std::move(plain_topology), tuning.collectives);
  const driver::ClusterModel slow_cluster(std::move(slow_topology), tuning.collectives);
  auto options = driver::RunOptions{}.lowering(tuning);
  options.distinct_ranks = {kRank};
  const auto plain_lowered = lower::lower(job, *plain_cluster.cost_model(), options);
  const auto slow_lowered = lower::lower(job, *slow_cluster.cost_model(), options);
  const auto& a = plain_lowered.graph;
  const auto& b = slow_lowered.graph;
  REQUIRE(a.num_tasks() == b.num_tasks());
  CHECK(sim::run(b).makespan > sim::run(a).makespan);

  spec::PerturbSpec p;
  p.degraded_links.push_back({.rank = kRank, .bandwidth_fraction = 0.1});
  const auto slow = perturbed(job, p);
  CHECK(slow.perturbation->degraded_ranks == std::vector<int>{kRank});
  CHECK(slow.simulation->step_time_s > slow.perturbation->unperturbed_step_s);
  int routed = 0;
  int elsewhere = 0;
  std::vector<std::string> wrong;  // tasks whose cost changed without the NIC on their route, or not with it
  for (std::uint32_t t = 0; t < a.num_tasks(); ++t) {
    const sim::TaskId id{t};
    const auto before = a.work(id);
    const auto after = b.work(id);
    if (!b.is_transfer(id)) {
      if (std::get<sim::ComputeWork>(before).duration != std::get<sim::ComputeWork>(after).duration)
        wrong.push_back(b.name(id));
      continue;
    }
    const auto& comm = std::get<sim::CommWork>(after);
    bool through = false;
    for (const auto& share : b.load(comm.load)) through = through || degraded.contains(share.link);
    const auto was = std::get<sim::CommWork>(before).transfer;
    if ((comm.transfer > was) != through || comm.transfer < was) wrong.push_back(b.name(id));
    (through ? routed : elsewhere) += 1;
  }
  CHECK(wrong.empty());
  CAPTURE(routed);
  CAPTURE(elsewhere);
  CHECK(routed > 0);     // the pipeline transfers and data-parallel collectives of rank 9
  CHECK(elsewhere > 0);  // NVLink collectives, other ranks' transfers
}

TEST_CASE("simulating only the ranks a perturbation makes different gives every rank's step") {
  // where folding is exact (no other group's traffic on a shared link), the perturbed step with the
  // slow GPU's and the degraded NIC's ranks simulated on their own, the rest folded, is the step
  // with every rank simulated
  const auto job = test::make_job("dgx-a100-superpod", "megatron2021-7.5b", "tp=4,pp=2,gpus=32");
  spec::PerturbSpec p;
  p.slow_gpus.push_back({.rank = 5, .compute_factor = 1.3});
  p.degraded_links.push_back({.rank = 22, .bandwidth_fraction = 0.3});
  driver::RunOptions every;
  every.full = true;
  every.perturb = p;
  const auto all = driver::build_run_report(job, every);
  const auto some = perturbed(job, p);
  CHECK(all.simulation->simulated_ranks == 32);
  // rank = tp + 4·dp + 16·pp: rank 5 is (tp 1, dp 1), rank 22 (tp 2, dp 1); per stage the ranks
  // with tp in {1, 2} or one other (0), dp 1 or one other (0): 3 × 2, of 16
  CHECK(some.simulation->simulated_ranks == 2 * 3 * 2);
  CHECK(some.simulation->step_time_s == doctest::Approx(all.simulation->step_time_s).epsilon(1e-9));
  CHECK(some.perturbation->unperturbed_step_s == doctest::Approx(all.perturbation->unperturbed_step_s).epsilon(1e-9));
  CHECK(some.perturbation->critical_rank == all.perturbation->critical_rank);
  CHECK(some.simulation->breakdown.compute_s == doctest::Approx(all.simulation->breakdown.compute_s).epsilon(1e-9));
  CHECK(some.simulation->bubble_fraction == doctest::Approx(all.simulation->bubble_fraction).epsilon(1e-9));
  CHECK(some.simulation->step_time_s > some.perturbation->unperturbed_step_s);
}

TEST_CASE("a group straddling two racks is simulated beside the first, and the folded step is every rank's step") {
  // tp 16 on 128 GB200s: the first rack's 72 GPUs hold four and a half tp groups, so the group of
  // ranks 64–79 has 8 GPUs on each of two racks and its all-reduces cross the network; the first
  // group, which a folded run simulates, is inside the first rack
  const auto job = test::make_job("gb200-nvl72", test::gpt3_layers(4, 64), "tp=16,sp=on,pp=1,gpus=128,zero=1,mb=1");
  const auto folded = driver::build_run_report(job);
  driver::RunOptions every;
  every.full = true;
  const auto all = driver::build_run_report(job, every);
  REQUIRE(all.simulation->simulated_ranks == 128);
  CHECK(folded.simulation->simulated_ranks == 2);  // the first rank and the straddling group's
  CHECK(folded.simulation->step_time_s == doctest::Approx(all.simulation->step_time_s).epsilon(1e-6));
  // 64 GPUs of each rack (segment=16): every group inside one rack, a faster step
  const auto aligned =
      test::make_job("gb200-nvl72", test::gpt3_layers(4, 64), "tp=16,sp=on,pp=1,gpus=128,zero=1,mb=1,segment=16");
  const auto inside = driver::build_run_report(aligned);
  CHECK(inside.simulation->simulated_ranks == 1);
  CHECK(inside.simulation->step_time_s < 0.95 * folded.simulation->step_time_s);
  // groups that all cross alike (cp 16 over 8-GPU nodes: every group 8 and 8) run alike: said, and
  // the first group stands for them
  const auto alike = test::make_job("dgx-a100-superpod", test::tiny_gpt(8, 64, 16384), "cp=16,gpus=64,mb=1");
  std::vector<std::string> warnings;
  CHECK(driver::straddling_groups(alike, &warnings).empty());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings.front().find("4 of the 4 cp=16 groups span") != std::string::npos);
}

}  // namespace stragglers_test
