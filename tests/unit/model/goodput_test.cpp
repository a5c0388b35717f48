// Training time under failures: the closed forms against their definitions, the Monte Carlo
// against the closed forms it must converge to, and the properties of a Poisson failure process.
#include <cmath>

#include <doctest/doctest.h>

#include "trainsim/model/goodput.hpp"

using namespace trainsim;

namespace goodput_test {

model::GoodputModel simple(double mtbf_s, double interval_s, double checkpoint_s, double restart_s) {
  model::GoodputModel m;
  m.classes = {{"hardware", 0.7 / mtbf_s, true}, {"software", 0.3 / mtbf_s, false}};
  m.interval_s = interval_s;
  m.checkpoint_s = checkpoint_s;
  m.restart_s = restart_s;
  return m;
}

TEST_CASE("Young's and Daly's intervals, and Daly's expected wall time, by their definitions") {
  // Young: √(2δM); Daly's correction is small when δ ≪ M
  CHECK(model::young_interval(60, 86400) == doctest::Approx(std::sqrt(2.0 * 60 * 86400)));
  CHECK(model::daly_interval(60, 86400) == doctest::Approx(model::young_interval(60, 86400)).epsilon(0.02));
  CHECK(model::daly_interval(10000, 3600) == 3600);  // δ ≥ 2M: save every M
  // without failures the wall time is the work plus one save per interval
  CHECK(model::expected_wall_time(1e6, 1000, 10, 300, 1e15) == doctest::Approx(1e6 * 1010 / 1000).epsilon(1e-6));
  // Daly's interval minimises his expected wall time (checked numerically on both sides)
  for (const double mtbf : {3600.0, 11134.0, 86400.0}) {
    for (const double delta : {3.0, 60.0, 600.0}) {
      const double tau = model::daly_interval(delta, mtbf);
      const double best = model::expected_wall_time(1e7, tau, delta, 600, mtbf);
      for (const double k : {0.7, 0.9, 1.1, 1.4})
        CHECK(best <= model::expected_wall_time(1e7, tau * k, delta, 600, mtbf) * (1 + 1e-3));
    }
  }
}

TEST_CASE("the Monte Carlo mean converges to Daly's closed form; interruptions are rate × wall time") {
  const double mtbf = 3 * 3600.0;
  const auto m = simple(mtbf, 300, 5, 780);
  const double work = 20 * 86400.0;
  const double closed = model::expected_wall_time(work, 300, 5, 780, mtbf);
  for (const int samples : {200, 2000}) {
    double wall = 0, interruptions = 0;
    for (int i = 0; i < samples; ++i) {
      const auto o = model::simulate_run(m, work, 1e300, 1000 + static_cast<std::uint64_t>(i));
      CHECK(o.work_s == doctest::Approx(work));
      // every second is training, a save, lost work or a restart
      CHECK(o.wall_s == doctest::Approx(o.work_s + o.checkpoint_s + o.lost_s + o.restart_s + o.waiting_s));
      wall += o.wall_s / samples;
      interruptions += static_cast<double>(o.interruptions) / samples;
    }
    MESSAGE(samples, " samples: ", wall / 86400, " days against ", closed / 86400);
    // the spread of the mean falls as 1/√n: within 1% with 2,000 runs of ~150 failures each
    CHECK(wall == doctest::Approx(closed).epsilon(samples >= 2000 ? 0.01 : 0.03));
    CHECK(interruptions == doctest::Approx(wall / mtbf).epsilon(0.02));
  }
}

TEST_CASE("a seed gives one outcome; causes share the failures in proportion to their rates") {
  const auto m = simple(3600, 600, 10, 300);
  const auto a = model::simulate_run(m, 30 * 86400.0, 1e300, 7);
  const auto b = model::simulate_run(m, 30 * 86400.0, 1e300, 7);
  const auto c = model::simulate_run(m, 30 * 86400.0, 1e300, 8);
  CHECK(a.wall_s == b.wall_s);
  CHECK(a.interruptions == b.interruptions);
  CHECK(a.wall_s != c.wall_s);
  REQUIRE(a.interruptions > 500);
  CHECK(static_cast<double>(a.by_class[0]) / static_cast<double>(a.interruptions) == doctest::Approx(0.7).epsilon(0.08));
}

TEST_CASE("spare nodes: without them the job waits for repairs; with enough, never") {
  auto m = simple(3600, 600, 10, 300);
  m.repair_s = 24 * 3600;
  m.spare_nodes = 0;
  const auto none = model::simulate_run(m, 10 * 86400.0, 1e300, 3);
  m.spare_nodes = 1000;
  const auto plenty = model::simulate_run(m, 10 * 86400.0, 1e300, 3);
  CHECK(none.waiting_s > 0);
  CHECK(plenty.waiting_s == 0);
  CHECK(none.wall_s > plenty.wall_s);
  // a horizon stops the run: what it trained is what was saved
  const auto day = model::simulate_run(m, 1e300, 86400, 3);
  CHECK(day.wall_s >= 86400);
  CHECK(day.work_s < 86400);
}

TEST_CASE("spare trays: one domain's trays are a pool of its own; more domains or spare domains wait less") {
  auto m = simple(3600, 600, 10, 300);
  m.repair_s = 24 * 3600;
  // one domain with 2 spare trays is the pool of 2 spare nodes, draw for draw
  m.spare_nodes = 2;
  const auto pool = model::simulate_run(m, 10 * 86400.0, 1e300, 5);
  m.spare_nodes = 0;
  m.spare_trays_per_domain = 2;
  m.domains = 1;
  const auto trays = model::simulate_run(m, 10 * 86400.0, 1e300, 5);
  CHECK(trays.wall_s == pool.wall_s);
  CHECK(trays.waiting_s == pool.waiting_s);
  CHECK(trays.waiting_s > 0);
  // the same failures spread over 8 domains of 2 spare trays each (16 spares) wait less, and a
  // pool of whole spare domains less again
  double one = 0, eight = 0, spare_domains = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    m.domains = 1;
    m.spare_domains = 0;
    one += model::simulate_run(m, 10 * 86400.0, 1e300, seed).waiting_s;
    m.domains = 8;
    eight += model::simulate_run(m, 10 * 86400.0, 1e300, seed).waiting_s;
    m.spare_domains = 4;
    spare_domains += model::simulate_run(m, 10 * 86400.0, 1e300, seed).waiting_s;
  }
  CHECK(eight < one);
  CHECK(spare_domains < eight);
}

}  // namespace goodput_test
