// `goodput` end to end: the default reliability spec (Llama 3's Table 5 counts) on the run it was
// observed on, and how failures scale with the cluster.
#include <doctest/doctest.h>

#include <limits>
#include "common/jobs.hpp"

#include "trainsim/driver/goodput.hpp"
#include "trainsim/model/goodput.hpp"
#include "trainsim/report/goodput_format.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;

namespace goodput_report_test {

const char* kLlama405b = "tp=8,sp=on,pp=16,zero=1,first_stage_layers=7,last_stage_layers=7,gpus=";

TEST_CASE("Llama 3 405B on 16,384 H100s for 54 days: about 419 interruptions, ETTR above 90%") {
  // Dubey et al. 2024: 419 unexpected interruptions in the 54-day snapshot, "more than 90% effective
  // training time"; with the spec's stated assumptions (2 TB/s checkpoints, a 13-minute restart)
  const auto job = test::make_job("h100-roce-llama3", "llama3-405b", std::string(kLlama405b) + "16384");
  const auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  const auto r = driver::build_goodput_report(job, spec, {.days = 54.0, .samples = 200});
  CHECK(r.interruptions == doctest::Approx(419).epsilon(0.05));
  CHECK(r.ettr > 0.90);
  CHECK(r.ettr == doctest::Approx(r.closed_ettr).epsilon(0.01));
  CHECK(r.model.mtbf_s() / 3600 == doctest::Approx(54.0 * 24 / 419).epsilon(1e-9));
  // checkpoints: 405B parameters × (2 + 12) bytes
  CHECK(r.checkpoint_bytes == doctest::Approx(405.85e9 * 14).epsilon(0.002));
}

TEST_CASE("with scale the mean time to failure falls as 1/GPUs and the ETTR with it" * doctest::test_suite("volume")) {
  const auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  double previous_mtbf = 1e300, previous_ettr = 1;
  for (const int gpus : {1024, 4096, 16384}) {
    CAPTURE(gpus);
    const auto job = test::make_job("h100-roce-llama3", "llama3-405b", std::string(kLlama405b) + std::to_string(gpus));
    const auto r = driver::build_goodput_report(job, spec, {.days = 10.0, .samples = 50});
    CHECK(r.model.mtbf_s() < previous_mtbf);
    CHECK(r.closed_ettr < previous_ettr);
    if (previous_mtbf < 1e300) CHECK(r.model.mtbf_s() == doctest::Approx(previous_mtbf / 4).epsilon(1e-9));
    previous_mtbf = r.model.mtbf_s();
    previous_ettr = r.closed_ettr;
  }
}

TEST_CASE("reliability specs: counts and MTBFs as rates, bad input named") {
  const auto base =
      nlohmann::json{{"name", "x"},
                     {"failures",
                      {{{"cause", "gpu"}, {"per", "gpu"}, {"mtbf", "50000 h"}},
                       {{"cause", "sw"}, {"per", "job"}, {"count", 10}, {"over", "10 days"}}}},
                     {"checkpoint", {{"write_bandwidth", "100 GB/s"}}},
                     {"restart", {{"detection", "1 min"}, {"rescheduling", "1 min"}, {"initialization", "1 min"}}}};
  const auto s = spec::read_reliability_spec(base, "r.json");
  CHECK(s.causes[0].rate_per_unit_hour == doctest::Approx(1.0 / 50000));
  CHECK(s.causes[1].rate_per_unit_hour == doctest::Approx(10.0 / 240));
  CHECK_FALSE(s.causes[1].replaces_node);
  auto negative = base;
  negative["failures"][1]["count"] = -3;
  CHECK_THROWS_WITH_AS(spec::read_reliability_spec(negative, "r.json"), doctest::Contains("/failures/1/count"),
                       SpecError);
  auto zero = base;
  zero["checkpoint"]["write_bandwidth"] = "0 GB/s";
  CHECK_THROWS_WITH_AS(spec::read_reliability_spec(zero, "r.json"), doctest::Contains("/checkpoint/write_bandwidth"),
                       SpecError);
  auto both = base;
  both["failures"][0]["count"] = 3;
  CHECK_THROWS_WITH_AS(spec::read_reliability_spec(both, "r.json"),
                       doctest::Contains("give mtbf or count (with over and units), not both"), SpecError);
}

}  // namespace goodput_report_test

namespace goodput_report_test {

TEST_CASE("goodput carries the memory verdict of the step it prices, in every format") {
  // Megatron-LM 2020's 8.3B model unsharded on 8 A100s of 80 GB: mixed-precision Adam alone holds
  // 16 bytes per parameter (Rajbhandari et al. 2020), 133 GB per GPU, so it cannot fit; with tp=8
  // each GPU holds an eighth (16.6 GB) and it does
  const auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  const auto big = test::make_job("dgx-a100-superpod", "megatron2020-8b", "tp=1,gpus=8,mb=2");
  const auto r = driver::build_goodput_report(big, spec, {.days = 1.0, .samples = 10});
  CHECK_FALSE(r.fits);
  CHECK(static_cast<double>(r.peak_memory) > 16 * 8.3e9);
  CHECK(r.device_memory.count == std::int64_t{81050} << 20);  // as the driver reports it
  const auto json = report::to_json(r);
  CHECK(json.at("fits") == false);
  CHECK(json.at("peak_memory_bytes") == r.peak_memory);
  CHECK(json.at("device_memory_bytes") == std::int64_t{81050} << 20);
  CHECK(report::render(r, report::Format::Table).find("DOES NOT FIT: peak") != std::string::npos);
  CHECK(report::render(r, report::Format::Csv).find(",false\n") != std::string::npos);

  const auto sharded = test::make_job("dgx-a100-superpod", "megatron2020-8b", "tp=8,gpus=8,mb=2");
  const auto f = driver::build_goodput_report(sharded, spec, {.days = 1.0, .samples = 10});
  CHECK(f.fits);
  CHECK(static_cast<double>(f.peak_memory) > 16 * 8.3e9 / 8);
  CHECK(report::to_json(f).at("fits") == true);
  CHECK(report::render(f, report::Format::Table).find("DOES NOT FIT") == std::string::npos);
}

}  // namespace goodput_report_test

TEST_CASE("on an NVL72 rack a node failure takes out one compute tray of 4 GPUs, not the 72-GPU domain") {
  const auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  const auto job = test::make_job("gb200-nvl72", "llama3-70b", "tp=8,pp=2,zero=1,gpus=128");
  const auto r = driver::build_goodput_report(job, spec, {.days = 1.0, .samples = 20});
  CHECK(r.nodes == 128 / 4);
}

TEST_CASE("the rack's spare-tray policy: 2 trays idle in each NVL72 rack, 64 GPUs of 72 run the job") {
  auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  spec.spare_nodes = 0;
  spec.spare_trays_per_domain = 2;
  const auto job = test::make_job("gb200-nvl72", "llama3-70b", "tp=8,pp=2,zero=1,gpus=128");
  const auto r = driver::build_goodput_report(job, spec, {.days = 1.0, .samples = 20});
  CHECK(r.model.domains == 2);
  CHECK(r.domain_devices_used == 64);
  // no domain of several hosts on a DGX H100 cluster: an error naming the key
  const auto h100 = test::make_job("dgx-h100-superpod", "llama3-70b", "tp=8,pp=2,zero=1,gpus=128");
  CHECK_THROWS_WITH_AS(driver::build_goodput_report(h100, spec, {.days = 1.0, .samples = 20}),
                       doctest::Contains("/spare_trays_per_domain"), SpecError);
}

TEST_CASE("under a segment the spare trays are the ones the segment leaves idle") {
  auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  spec.spare_nodes = 0;
  spec.spare_trays_per_domain = 2;
  // NVIDIA's 256-GPU GB200 placement: 16 of each rack's 18 trays, so 4 racks, 2 trays of each idle
  const auto job = test::make_job("gb200-nvl72", "llama3-70b", "tp=8,pp=2,zero=1,gpus=256,segment=16");
  const auto r = driver::build_goodput_report(job, spec, {.days = 1.0, .samples = 20});
  CHECK(r.model.domains == 4);
  CHECK(r.domain_devices_used == 64);
  // three spares per rack would leave 15 trays, not the segment's 16
  spec.spare_trays_per_domain = 3;
  CHECK_THROWS_WITH_AS(driver::build_goodput_report(job, spec, {.days = 1.0, .samples = 20}),
                       doctest::Contains("segment=16 leaves 2 of each domain's 18 trays idle"), SpecError);
  // a segment of the whole rack leaves no tray spare
  spec.spare_trays_per_domain = 1;
  const auto whole = test::make_job("gb200-nvl72", "gpt3-175b", "tp=8,pp=6,zero=1,gpus=144,segment=18");
  CHECK_THROWS_WITH_AS(driver::build_goodput_report(whole, spec, {.days = 1.0, .samples = 20}),
                       doctest::Contains("leaves 0 of each domain's 18 trays idle"), SpecError);
}

TEST_CASE("on TPU slices a node failure takes out one host's chips (4 per training VM on v6e)") {
  const auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  const auto job = test::make_job("tpu-v6e-multislice", "llama3-8b", "tp=1,zero=3,mb=1,recompute=full,gpus=512");
  const auto r = driver::build_goodput_report(job, spec, {.days = 1.0, .samples = 20});
  CHECK(r.nodes == 512 / 4);
}

namespace goodput_report_test {

TEST_CASE("goodput refuses what it could not finish: a restart far beyond the MTBF, or 1e18 tokens") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024,recompute=full");
  const auto hopeless = spec::read_reliability_spec(
      nlohmann::json{{"name", "hopeless"},
                     {"failures", {{{"cause", "gpu"}, {"per", "gpu"}, {"mtbf", "1 min"}}}},
                     {"checkpoint", {{"write_bandwidth", "1 GB/s"}}},
                     {"restart", {{"detection", "5 min"}, {"rescheduling", "5 min"}, {"initialization", "3 min"}}}},
      "r.json");
  // a job MTBF of 1 min / 1,024 GPUs = 59 ms against a 13-minute restart: each restart would be retried
  // about e^13,000 times
  CHECK_THROWS_WITH_AS(driver::build_goodput_report(job, hopeless, {.days = 1.0}),
                       doctest::Contains("r.json: the job cannot make progress in bounded time"), SpecError);
  CHECK_THROWS_WITH_AS(driver::build_goodput_report(job, hopeless, {.tokens = 1e12}),
                       doctest::Contains("cannot make progress"), SpecError);
  const auto spec = spec::load_reliability_spec(spec::default_reliability_path());
  // 1e18 tokens at GPT-3's 30 s per 3.1M-token step: 300,000 years
  CHECK_THROWS_WITH_AS(driver::build_goodput_report(job, spec, {.tokens = 1e18}),
                       doctest::Contains("goodput simulates runs of at most 100 years"), SpecError);
}

TEST_CASE("a run whose restarts keep failing stops at its horizon") {
  // a restart 20 times the MTBF: each completes with probability e^-20, so within one day none does
  model::GoodputModel m;
  m.classes = {{"gpu", 1.0 / 60, true}};  // one failure a minute
  m.interval_s = 600;
  m.checkpoint_s = 10;
  m.restart_s = 1200;
  const auto o = model::simulate_run(m, std::numeric_limits<double>::infinity(), 86400, 1);
  CHECK(o.work_s == 0);
  CHECK(o.wall_s >= 86400);
  CHECK(o.wall_s < 86400 + 1200);
}

}  // namespace goodput_report_test
