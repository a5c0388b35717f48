// Reports say when they stand outside what the model was validated on, and refuse what they
// cannot compute instead of printing nonsense.
#include <algorithm>

#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace {
bool mentions(const std::vector<std::string>& warnings, const std::string& text) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}
}  // namespace

TEST_CASE("a device with no fitted kernel parameters is flagged until calibrated") {
  // catalogue devices carry parameters fitted on their microbenchmarks
  const auto h100 = test::make_job("dgx-h100-superpod", "llama3-8b", "tp=1,gpus=8");
  const auto a100 = test::make_job("dgx-a100-superpod", "llama3-8b", "tp=1,gpus=8");
  driver::RunOptions options;
  CHECK_FALSE(mentions(driver::build_run_report(h100, options).warnings, "no fitted kernel parameters"));
  CHECK_FALSE(mentions(driver::build_run_report(a100, options).warnings, "no fitted kernel parameters"));
  // the same H100 described inline, without the catalogue's fitted sections
  auto topology = spec::load_json_file(test::topology("dgx-h100-superpod"));
  topology["device"] = nlohmann::json::parse(R"({"name": "my-gpu", "arch": "hopper", "memory": "80 GiB",
      "memory_bandwidth": "3.35 TB/s", "sms": 132, "peak_flops": {"bf16": "989 TFLOP/s"}})");
  auto custom = h100;
  custom.cluster = spec::read_cluster_spec(topology, "custom topology");
  const auto warned = driver::build_run_report(custom, options).warnings;
  CHECK(mentions(warned, "device \"my-gpu\" has no fitted kernel parameters"));
  spec::CalibrationSpec calibration;
  calibration.values.set("kernels", "sustained_fraction", 0.8);
  options.calibration = calibration;
  CHECK_FALSE(mentions(driver::build_run_report(custom, options).warnings, "no fitted kernel parameters"));
  // the analytic report makes no time prediction to warn about
  driver::RunOptions analytic;
  analytic.simulate = false;
  CHECK_FALSE(mentions(driver::build_run_report(custom, analytic).warnings, "no fitted kernel parameters"));
}

TEST_CASE("a fitted collective used outside its measured sizes is flagged") {
  auto job = test::make_job("dgx-a100-superpod", "megatron2021-7.5b", "tp=1,gpus=16");
  spec::CalibrationSpec calibration;
  calibration.fits.push_back(
      {"all_reduce", 16, microseconds(50), Bandwidth{100e9}, 10, Bytes{1 << 20}, Bytes{1 << 22}});
  driver::RunOptions options;
  options.calibration = calibration;
  // data-parallel gradients of 7.5B parameters are far beyond 4 MiB
  CHECK(mentions(driver::build_run_report(job, options).warnings, "extrapolated"));
}

TEST_CASE("more micro-batches than a simulation takes is a bad-input error naming the batch") {
  auto workload = spec::load_workload_spec(test::workload("megatron2020-1b"));
  workload.training.global_batch = 1'000'000'000;
  const auto job = test::make_job("dgx-a100-superpod", workload, "tp=1,gpus=8,mb=1");
  CHECK_THROWS_WITH_AS(driver::build_run_report(job, {}), doctest::Contains("/training/global_batch"), SpecError);
  driver::RunOptions analytic;
  analytic.simulate = false;
  CHECK(driver::build_run_report(job, analytic).job != nullptr);
}

TEST_CASE("a mixture-of-experts report gives no dense Megatron formula as a cross-check") {
  driver::RunOptions analytic;
  analytic.simulate = false;
  // (a report points at its job: keep the job alive)
  const auto moe_job = test::make_job("dgx-h100-superpod", "mixtral-8x7b", "ep=8,gpus=8");
  const auto moe = driver::build_run_report(moe_job, analytic);
  CHECK(report::to_table(moe).find("Megatron formula") == std::string::npos);
  CHECK(report::to_json(moe)["flops"]["megatron_formula_per_step"].is_null());
  const auto dense_job = test::make_job("dgx-h100-superpod", "llama3-8b", "gpus=8");
  const auto dense = driver::build_run_report(dense_job, analytic);
  CHECK(report::to_table(dense).find("Megatron formula") != std::string::npos);
}

TEST_CASE("busy time is reported for every category, zero where the step has none") {
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "tp=8,gpus=8");
  const auto r = driver::build_run_report(job, driver::RunOptions{});
  const auto busy = report::to_json(r)["busy_s_by_category"];
  for (const auto* c : {"compute", "recompute", "optimizer", "tp", "cp", "ep", "dp", "pp"}) {
    CAPTURE(c);
    REQUIRE(busy.contains(c));
  }
  CHECK(busy["ep"].get<double>() == 0);
  CHECK(busy["tp"].get<double>() > 0);
}

TEST_CASE("a peak within the memory headroom fits but is reported at risk") {
  const auto job = test::make_job("dgx-h100-superpod", "llama3-8b", "tp=8,sp=on,gpus=8");
  driver::RunOptions options;
  options.memory_headroom = 0;
  const auto none = driver::build_run_report(job, options);
  REQUIRE(none.fits);
  CHECK_FALSE(none.memory_at_risk);
  // a headroom that takes in the peak
  options.memory_headroom = 1 - 0.5 * static_cast<double>(none.peak_memory) / none.device_memory.as_double();
  const auto risky = driver::build_run_report(job, options);
  CHECK(risky.fits);
  CHECK(risky.memory_at_risk);
  CHECK(report::to_table(risky).find("at risk") != std::string::npos);
  CHECK(report::to_json(risky)["memory_at_risk"].get<bool>());
}
