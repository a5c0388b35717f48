#include <doctest/doctest.h>

#include <set>

#include "common/jobs.hpp"
#include "common/paths.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/report/trace_format.hpp"
#include "trainsim/report/perfetto.hpp"

using namespace trainsim;
using namespace trainsim::report;

TEST_CASE("the JSON report carries the fields docs/cli.md names") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024,sp=on,recompute=selective");
  const auto j = to_json(driver::build_run_report(job));
  for (const auto* key :
       {"params_total", "params_per_gpu", "gpus", "peak_memory_bytes", "fits", "memory", "per_stage", "warnings"})
    CHECK(j.contains(key));
  for (const auto* key : {"params", "grads", "optimizer", "activations", "buffers", "fragmentation"})
    CHECK(j["memory"].contains(key));
  CHECK(j["gpus"] == 1024);
  CHECK(j["per_stage"].size() == 8);
  const auto m = j["memory"];
  CHECK(j["peak_memory_bytes"].get<std::int64_t>() ==
        m["params"].get<std::int64_t>() + m["grads"].get<std::int64_t>() + m["optimizer"].get<std::int64_t>() +
            m["activations"].get<std::int64_t>() + m["buffers"].get<std::int64_t>() +
            m["fragmentation"].get<std::int64_t>());
}

TEST_CASE("an MoE report says its expert load: the busiest rank, how routing balanced, a seeded draw") {
  auto w = spec::load_workload_spec(test::workload("qwen3-30b-a3b"));
  w.model.moe->load_seed = 7;
  const auto job = test::make_job("dgx-h100-superpod", w, "ep=8,gpus=64");  // the report points to it
  const auto r = driver::build_run_report(job);
  const auto j = to_json(r);
  REQUIRE(j.contains("expert_load"));
  const auto& e = j["expert_load"];
  CHECK(e["dropless"] == true);
  CHECK(e["balancing"] == "global_aux_loss");
  CHECK(e["load_seed"] == 7);
  CHECK(e["busiest_rank"].get<double>() > 1.0);
  CHECK(e["busiest_rank"].get<double>() < e["busiest_expert"].get<double>());  // eight ranks of 16 experts
  const auto text = to_table(r);
  CHECK(text.find("busiest of 8 expert-parallel ranks") != std::string::npos);
  CHECK(text.find("loads drawn with seed 7") != std::string::npos);
  // a dense model's report has neither
  const auto gpt = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024");
  const auto dense = driver::build_run_report(gpt);
  CHECK_FALSE(to_json(dense).contains("expert_load"));
  CHECK(to_table(dense).find("expert load") == std::string::npos);
}

TEST_CASE("sizes print in binary units") {
  CHECK(human_bytes(gib(80)) == "80.00 GiB");
  CHECK(human_bytes(mib(3)) == "3.00 MiB");
  CHECK(human_bytes(Bytes{12}) == "12 B");
  CHECK(human_count(174.6e9) == "174.60 B");
}

TEST_CASE("--timeline writes Chrome trace events: a process per simulated rank, a thread per stream") {
  const auto job = test::make_job("dgx-a100-superpod", "megatron2021-1.7b", "tp=2,pp=2,gpus=16,mb=4");
  driver::RunOptions options;
  const auto r = driver::build_run_report(job, options);
  const test::ScratchDir scratch("trainsim-timeline");
  const auto path = scratch.file("timeline.json");
  write_perfetto(r.step->lowered, r.step->timeline, path);
  const auto trace = spec::load_json_file(path);
  std::set<int> processes;
  std::set<std::string> threads;
  std::size_t complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    ++complete;
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["ts"].get<double>() >= 0);
  }
  CHECK(processes == std::set<int>{0, 8});  // one simulated rank per pipeline stage
  for (const auto* name : {"compute", "tp-comm", "dp-comm", "pp-send-next", "pp-recv-prev"})
    CHECK(threads.contains(name));
  CHECK(complete >= r.step->lowered.graph.num_tasks());
}

TEST_CASE("a trace file of unknown rank prints 'rank unknown', never 'rank -1'") {
  trace::TraceReport r;
  r.files.push_back({.path = "t.json", .rank = -1, .world_size = 2});
  const auto table = report::to_table(r);
  CHECK(table.find("t.json: rank unknown of 2") != std::string::npos);
  CHECK(table.find("-1") == std::string::npos);
}
