// A simulated step written as Chakra traces and read back (docs/traces.md "Chakra"): the files hold
// every task of the lowered graph, and replayed as recorded they give the step back to the
// picosecond; costed again on the topology, within what link sharing adds.
#include <doctest/doctest.h>

#include <set>

#include "common/jobs.hpp"
#include "trainsim/driver/replay.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/chakra.hpp"
#include "trainsim/trace/chakra.hpp"

using namespace trainsim;

namespace {

struct RoundTrip {
  driver::RunReport report;
  report::ChakraExport written;
  trace::ChakraJob job;
};

RoundTrip export_and_read(const spec::Job& job, const std::string& dir, bool full) {
  driver::RunOptions options;
  options.record_work = true;
  options.full = full;
  RoundTrip out{.report = driver::build_run_report(job, options)};
  REQUIRE(out.report.step);
  out.written = report::write_chakra(job, out.report.step->lowered, out.report.step->timeline, dir);
  out.job = trace::read_chakra_dir(dir);
  return out;
}

// Exports the step into `dir`, reads it back and checks the files against the lowered graph.
RoundTrip check_round_trip(const spec::Job& job, bool full, const test::ScratchDir& dir) {
  auto rt = export_and_read(job, dir.path().string(), full);
  const auto& lowered = rt.report.step->lowered;
  const auto& graph = lowered.graph;
  // one file per simulated rank; every task is in the file of each rank whose stream it occupies
  REQUIRE(rt.job.ranks.size() == lowered.ranks.size());
  std::set<std::uint64_t> ids;
  std::int64_t nodes = 0;
  std::int64_t deps = 0;
  std::int64_t placements = 0;
  for (const auto& t : rt.job.ranks) {
    nodes += static_cast<std::int64_t>(t.nodes.size());
    for (const auto& n : t.nodes) {
      ids.insert(n.id);
      deps += static_cast<std::int64_t>(n.deps.size());
    }
    CHECK(t.missing_deps == 0);
  }
  for (std::uint32_t i = 0; i < graph.num_tasks(); ++i)
    placements += static_cast<std::int64_t>(graph.streams(sim::TaskId{i}).size() > 1 &&
                                                    graph.stream(graph.streams(sim::TaskId{i})[0]).process !=
                                                        graph.stream(graph.streams(sim::TaskId{i})[1]).process
                                                ? 2
                                                : 1);
  CHECK(ids.size() == graph.num_tasks());
  // a collective across simulated ranks is a node in each of their files
  CHECK(nodes <= placements + static_cast<std::int64_t>(graph.num_tasks()));
  CHECK(nodes == rt.written.nodes);
  CHECK(deps == rt.written.data_deps);
  // replayed as recorded: the same step, to the picosecond, but where trainsim issues one
  // collective per pipeline stage (the gradient-norm all-reduce over tp × pp): the replay joins the
  // stages' instances of the group into one, which waits for the last stage, as on real hardware
  const auto replayed = trace::replay_chakra(rt.job, {});
  if (job.strategy.pp == 1) {
    CHECK(replayed.step_time_s == rt.report.simulation->step_time_s);
  } else {
    CHECK(replayed.step_time_s >= rt.report.simulation->step_time_s);
    CHECK(replayed.step_time_s == doctest::Approx(rt.report.simulation->step_time_s).epsilon(1e-6));
  }
  // collectives costed again on the cluster (uncontended) and kernels at their simulated time:
  // within what link sharing and lent SMs added
  const auto costed = driver::replay_chakra(rt.job, {.cluster = job.cluster});
  CHECK(costed.costed > 0);
  CHECK(costed.step_time_s == doctest::Approx(rt.report.simulation->step_time_s).epsilon(0.05));
  return rt;
}

void check_round_trip(const spec::Job& job, bool full) {
  const test::ScratchDir dir("chakra-export");
  check_round_trip(job, full, dir);
}

// Llama 3 8B in 3D on 64 A100s, interleaved, 16 micro-batches a step (a small graph: the
// sanitized build runs this too): one simulated rank per stage.
spec::Job llama_3d() {
  auto workload = spec::load_workload_spec(test::workload("llama3-8b"));
  workload.training.global_batch = 128;
  return test::make_job("dgx-a100-superpod", workload,
                        "tp=2,pp=4,vpp=2,schedule=interleaved,dp=8,sp=on,recompute=selective");
}

}  // namespace

TEST_CASE("a step exported to Chakra and replayed is the same step") {
  check_round_trip(llama_3d(), false);
  // without pipeline stages, to the picosecond
  auto workload = spec::load_workload_spec(test::workload("llama3-8b"));
  workload.training.global_batch = 64;
  check_round_trip(test::make_job("dgx-a100-superpod", workload, "tp=2,sp=on,dp=32,zero=1,recompute=selective"), false);
}

TEST_CASE("an exported step's kernels costed on a roofline, on the same and on a faster device") {
  const auto job = llama_3d();
  test::ScratchDir dir("chakra-roofline");
  const auto rt = export_and_read(job, dir.path().string(), false);
  const double simulated = rt.report.simulation->step_time_s;
  // the roofline of num_ops and tensor_size against the kernel model's wave quantisation, tile
  // and attention efficiencies: the same step within 10% on the device it was simulated on
  const auto a100 = driver::replay_chakra(rt.job, {.cluster = job.cluster, .cost_compute = true});
  CHECK(a100.costed_compute > 0);
  CHECK(a100.step_time_s == doctest::Approx(simulated).epsilon(0.10));
  // H100: 3.2x the bf16 peak, 1.7x the HBM bandwidth and faster NVLink and NICs
  const auto h100 = spec::load_cluster_spec(test::topology("dgx-h100-superpod"));
  const auto faster = driver::replay_chakra(rt.job, {.cluster = h100, .cost_compute = true});
  CHECK(faster.step_time_s < a100.step_time_s / 2);
  CHECK(faster.step_time_s > a100.step_time_s / 3.5);
  CHECK_THROWS_WITH_AS(driver::replay_chakra(rt.job, {.cost_compute = true}),
                       "--cost-compute: costing the kernels needs a device: give -t TOPOLOGY", SpecError);
}

TEST_CASE("every rank simulated and exported: collectives span the ranks' files") {
  // 8 micro-batches a pipeline (the workload's 512 sequences made 256: 5.6 s, minutes sanitized)
  auto workload = spec::load_workload_spec(test::workload("llama3-8b"));
  workload.training.global_batch = 16;
  const auto job = test::make_job("dgx-h100-superpod", workload, "tp=2,pp=2,dp=2,zero=1,gpus=8");
  const test::ScratchDir dir("chakra-full");
  const auto rt = check_round_trip(job, true, dir);
  CHECK(rt.job.ranks.size() == 8);
  // comm_group.json names each tensor- and data-parallel pair (and the embedding's groups)
  CHECK(rt.job.groups.size() >= 8);
  for (const auto& [name, ranks] : rt.job.groups) CHECK((ranks.size() >= 2 && ranks.size() <= 8));
  // conservation: the compute nodes' FLOPs over every rank are the step's hardware FLOPs (the
  // report's count comes from the model's closed forms, the nodes' from the lowered kernels)
  double flops = 0;
  for (const auto& t : rt.job.ranks)
    for (const auto& n : t.nodes) flops += n.flops;
  CHECK(flops == doctest::Approx(rt.report.flops.hardware).epsilon(0.01));
}
