#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "trainsim/lower/schedule.hpp"
#include "trainsim/spec/job.hpp"

using namespace trainsim;
using namespace trainsim::lower;
using spec::Schedule;

namespace {

// Every micro-batch's F, B (and W) appears exactly once per chunk on every stage, B after its F,
// W after its B.
void check_complete(const std::vector<StageSchedule>& stages, int m, int vpp, bool weight_grads) {
  for (const auto& s : stages) {
    std::set<std::tuple<int, int, int>> seen;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto& a = s[i];
      CHECK(seen.insert({static_cast<int>(a.kind), a.microbatch, a.chunk}).second);
      if (a.kind != PassKind::Forward) {
        const auto before = PassKind(a.kind == PassKind::Backward ? PassKind::Forward : PassKind::Backward);
        CHECK(std::find(s.begin(), s.begin() + static_cast<long>(i), Action{before, a.microbatch, a.chunk}) !=
              s.begin() + static_cast<long>(i));
      }
    }
    CHECK(seen.size() == static_cast<std::size_t>(m * vpp * (weight_grads ? 3 : 2)));
  }
}

}  // namespace

TEST_CASE("1F1B: warm-up forwards, alternation, cool-down backwards") {
  const auto s = make_schedule(Schedule::OneFOneB, 4, 1, 6);
  CHECK(describe(s[0]) == "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 B3.0 B4.0 B5.0");
  CHECK(describe(s[3]) == "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0");
  check_complete(s, 6, 1, false);
}

TEST_CASE("GPipe runs every forward before any backward") {
  const auto s = make_schedule(Schedule::GPipe, 2, 1, 3);
  CHECK(describe(s[1]) == "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
  check_complete(s, 3, 1, false);
}

TEST_CASE("interleaved: groups of p micro-batches through the chunks, Megatron's warm-up") {
  const int p = 2, v = 2, m = 4;
  const auto s = make_schedule(Schedule::Interleaved, p, v, m);
  // stage 0: (p − 1)·2 + (v − 1)·p = 4 warm-up forwards
  CHECK(describe(s[0]) == "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  check_complete(s, m, v, false);
}

TEST_CASE("ZB-H1 splits backward and lets weight gradients fill the gaps") {
  const auto s = make_schedule(Schedule::ZbH1, 4, 1, 8);
  check_complete(s, 8, 1, true);
  for (std::size_t stage = 0; stage < s.size(); ++stage) {
    // never more than 1F1B's p − stage micro-batches between F and B, nor p between F and W
    int forwards = 0, backwards = 0, weights = 0;
    for (const auto& a : s[stage]) {
      forwards += a.kind == PassKind::Forward;
      backwards += a.kind == PassKind::Backward;
      weights += a.kind == PassKind::WeightGrad;
      CHECK(forwards - backwards <= 4 - static_cast<int>(stage));
      CHECK(forwards - weights <= 4);
    }
  }
  // Figure 3 (top) of Qi et al. 2023: the first stage runs B W F in turn, the last defers 3 Ws
  CHECK(describe(s[0]) ==
        "F0.0 F1.0 F2.0 F3.0 B0.0 W0.0 F4.0 B1.0 W1.0 F5.0 B2.0 W2.0 F6.0 B3.0 W3.0 F7.0 B4.0 W4.0 B5.0 W5.0 "
        "B6.0 W6.0 B7.0 W7.0");
  CHECK(describe(s[3]).starts_with("F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 W0.0 F4.0"));
  CHECK(describe(s[3]).ends_with("B7.0 W4.0 W5.0 W6.0 W7.0"));
}

TEST_CASE("DualPipeV: the V's two chunks per stage, forward-backward pairs, deferred weight gradients") {
  // deepseek-ai/DualPipe dualpipev.py stepped through by hand for 2 ranks and 4 micro-batches
  // (nF0, nF0F1, nB1W1F1, nF0B1F1B0, nB1F1B0, nB1B0, nWB0, nW; a backward without zero bubble runs
  // its W at once)
  const auto s = make_schedule(Schedule::DualPipeV, 2, 2, 4);
  CHECK(describe(s[0]) ==
        "F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 F3.0 B1.1 W1.1 F2.1 B0.0 W0.0 B2.1 W2.1 F3.1 B1.0 W1.0 B3.1 W3.1 "
        "B2.0 W2.0 B3.0 W3.0");
  CHECK(describe(s[1]) ==
        "F0.0 F0.1 F1.0 F1.1 F2.0 B0.1 W0.1 F2.1 B0.0 W0.0 F3.0 B1.1 W1.1 F3.1 B1.0 W1.0 B2.1 W2.1 B2.0 W2.0 "
        "B3.1 B3.0 W3.1 W3.0");
  for (const int p : {2, 4, 8})
    for (const int m : {2 * p, 2 * p + 3, 5 * p}) {
      CAPTURE(p);
      CAPTURE(m);
      check_complete(make_schedule(Schedule::DualPipeV, p, 2, m), m, 2, true);
    }
  // the V: chunk 0 runs down the stages, chunk 1 back up; the first stage holds both ends
  CHECK(spec::virtual_stage(Schedule::DualPipeV, 0, 0, 4) == 0);
  CHECK(spec::virtual_stage(Schedule::DualPipeV, 3, 0, 4) == 3);
  CHECK(spec::virtual_stage(Schedule::DualPipeV, 3, 1, 4) == 4);
  CHECK(spec::virtual_stage(Schedule::DualPipeV, 0, 1, 4) == 7);
  for (int v = 0; v < 8; ++v) {
    const auto at = spec::at_virtual_stage(Schedule::DualPipeV, v, 4);
    CHECK(spec::virtual_stage(Schedule::DualPipeV, at.stage, at.chunk, 4) == v);
  }
}
