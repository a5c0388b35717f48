// `replay` and `calibrate` given the job the traces recorded (-w, -s): the model's peak memory
// against the caching allocator's recorded one, and memory.fragmentation fitted from it.
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "common/jobs.hpp"
#include "trainsim/api/api.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using nlohmann::json;

namespace {

constexpr double kBaseUs = 1.7e15;  // microseconds since the epoch, as Kineto writes them
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

// One profiler step with one kernel, and the caching allocator's totals as `[memory]` events at
// the given times (us from the step's start; the step lasts 1 ms).
std::string trace_with_memory(const std::string& name,
                              const std::vector<std::tuple<double, std::int64_t, std::int64_t>>& samples) {
  json events = json::array();
  const auto event = [&](json e, double ts) {
    e["pid"] = 1;
    e["tid"] = 1;
    e["ts"] = kBaseUs + ts;
    events.push_back(std::move(e));
  };
  event({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#3"}, {"dur", 1000}, {"args", json::object()}},
        0);
  event(
      {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"dur", 5}, {"args", {{"correlation", 1}}}},
      10);
  event({{"ph", "X"},
         {"cat", "kernel"},
         {"name", "gemm"},
         {"dur", 500},
         {"args", {{"stream", 7}, {"correlation", 1}, {"device", 0}}}},
        20);
  for (const auto& [ts, allocated, reserved] : samples)
    event({{"ph", "i"},
           {"cat", "cpu_instant_event"},
           {"name", "[memory]"},
           {"s", "t"},
           {"args",
            {{"Device Type", 1},
             {"Device Id", 0},
             {"Addr", 1},
             {"Bytes", 512},
             {"Total Allocated", allocated},
             {"Total Reserved", reserved}}}},
          ts);
  const auto dir = std::filesystem::temp_directory_path() / "trainsim-trace-memory-test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << json{{"schemaVersion", 1}, {"traceEvents", events}}.dump();
  return path;
}

const std::string kTopology = test::topology("dgx-h100-superpod");
const std::string kStrategy = "framework=torchtitan,gpus=8,mb=1,recompute=full";

}  // namespace

TEST_CASE("replay and calibrate with the recorded job: the model's peak against the allocator's, the share fitted") {
  const auto workload = test::workload("llama3-8b");
  // the largest totals inside the step: 40 GiB allocated, 46 GiB reserved (a later sample, outside
  // the step, is larger and does not count)
  const auto trace = trace_with_memory(
      "memory.json", {{100, 30 * kGiB, 44 * kGiB}, {400, 40 * kGiB, 46 * kGiB}, {2000, 70 * kGiB, 80 * kGiB}});
  const auto replayed =
      api::replay({.traces = {trace}, .topology = kTopology, .workload = workload, .strategy = kStrategy});
  REQUIRE(replayed.memory);
  const auto& m = *replayed.memory;
  CHECK(m.recorded_allocated == 40 * kGiB);
  CHECK(m.recorded_reserved == 46 * kGiB);
  CHECK(m.model_reserved > m.model_live);
  CHECK(m.allocated_error() == doctest::Approx(static_cast<double>(m.model_live) / (40.0 * kGiB) - 1));

  // the fitted share, given back to the model, reserves what the allocator reserved beyond its live peak
  const auto fitted = api::calibrate({trace}, kTopology, workload, kStrategy);
  REQUIRE(fitted.memory);
  spec::Tunables tunables;
  fitted.calibration.apply(tunables);
  driver::RunOptions options;
  options.overrides.set("memory", "fragmentation", tunables.memory.fragmentation);
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", kStrategy);
  const auto r = driver::build_run_report(job, options);
  CHECK(static_cast<double>(r.peak_memory - r.live_peak_memory) == doctest::Approx(6.0 * kGiB).epsilon(1e-6));
}

TEST_CASE("replay with the recorded job: a trace without memory events, half a job, are errors naming them") {
  const auto workload = test::workload("llama3-8b");
  const auto bare = trace_with_memory("bare.json", {});
  CHECK_THROWS_WITH_AS(
      api::replay({.traces = {bare}, .topology = kTopology, .workload = workload, .strategy = kStrategy}),
      doctest::Contains("bare.json: no [memory] events: record with torch.profiler.profile(profile_memory=True)"),
      SpecError);
  const auto trace = trace_with_memory("half.json", {{100, kGiB, 2 * kGiB}});
  CHECK_THROWS_WITH_AS(api::replay({.traces = {trace}, .topology = kTopology, .workload = workload}),
                       doctest::Contains("needs both -w WORKLOAD and -s STRATEGY"), SpecError);
  CHECK_THROWS_WITH_AS(api::calibrate({trace}, "", workload, kStrategy), doctest::Contains("needs -t TOPOLOGY"),
                       SpecError);
}
