// Stragglers on the event engine: the properties a slow GPU must have in synchronous training.
#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
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
  const auto pipe = test::make_job("dgx-a100-superpod", "llama3-8b", "tp=1,pp=4,gpus=4,mb=1");
  const auto one = perturbed(pipe, slow({3}, 2.0)).simulation->step_time_s;
  const auto all = perturbed(pipe, slow({0, 1, 2, 3}, 2.0)).simulation->step_time_s;
  const auto base = driver::build_run_report(pipe).simulation->step_time_s;
  CHECK(one > base * 1.5);
  CHECK(one / all > 0.9);
  // tensor parallelism: the group waits for its slowest member at every layer
  const auto tp = test::make_job("dgx-a100-superpod", "llama3-8b", "tp=8,pp=1,gpus=8");
  const auto one_tp = perturbed(tp, slow({6}, 1.5)).simulation->step_time_s;
  const auto all_tp = perturbed(tp, slow({0, 1, 2, 3, 4, 5, 6, 7}, 1.5)).simulation->step_time_s;
  CHECK(one_tp == doctest::Approx(all_tp).epsilon(0.03));
}

TEST_CASE("noise: a seed gives the same steps; percentiles in order; bad input named") {
  const auto job = test::make_job("dgx-a100-superpod", "megatron2021-7.5b", "tp=4,pp=2,gpus=32");
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
  CHECK_THROWS_WITH_AS(spec::read_perturb_spec(nlohmann::json{{"slow_gpus", {{{"rank", 1}, {"compute_factor", 0.5}}}}},
                                               "p.json"),
                       doctest::Contains("/slow_gpus/0/compute_factor"), SpecError);
}

}  // namespace stragglers_test
