#include "trainsim/lower/schedule.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "trainsim/util/error.hpp"

namespace trainsim::lower {
namespace {

using spec::Schedule;

StageSchedule gpipe(int m) {
  StageSchedule out;
  for (int i = 0; i < m; ++i) out.push_back({PassKind::Forward, i, 0});
  for (int i = 0; i < m; ++i) out.push_back({PassKind::Backward, i, 0});
  return out;
}

StageSchedule one_f_one_b(int stage, int pp, int m) {
  StageSchedule out;
  const int warmup = std::min(pp - stage - 1, m);
  int f = 0;
  int b = 0;
  for (; f < warmup; ++f) out.push_back({PassKind::Forward, f, 0});
  while (b < m) {
    if (f < m) out.push_back({PassKind::Forward, f++, 0});
    out.push_back({PassKind::Backward, b++, 0});
  }
  return out;
}

// Megatron-LM's interleaved schedule: virtual step k of the forward pass runs chunk (k / p) % v of
// micro-batch (k / (p·v))·p + k % p; backward steps walk the chunks in reverse.
Action interleaved_step(int k, int pp, int vpp, bool forward) {
  const int group = k / (pp * vpp);
  const int in_group = k % (pp * vpp);
  const int chunk = in_group / pp;
  return {forward ? PassKind::Forward : PassKind::Backward, group * pp + k % pp, forward ? chunk : vpp - 1 - chunk};
}

StageSchedule interleaved(int stage, int pp, int vpp, int m) {
  const int total = m * vpp;
  const int warmup = std::min((pp - stage - 1) * 2 + (vpp - 1) * pp, total);
  StageSchedule out;
  int f = 0;
  int b = 0;
  for (; f < warmup; ++f) out.push_back(interleaved_step(f, pp, vpp, true));
  while (b < total) {
    if (f < total) out.push_back(interleaved_step(f++, pp, vpp, true));
    out.push_back(interleaved_step(b++, pp, vpp, false));
  }
  return out;
}

// ZB-H1, the handcrafted schedule of Qi et al. 2023 (§2.1, Figure 3 top): 1F1B's warm-up of
// p − s forwards, then B, W, F in turn, except that stage s defers its first s weight gradients
// (W) into what would be its cool-down bubble. Every stage then holds at most p micro-batches whose
// W has not run (the first stage never exceeds 1F1B's peak) and, with unit F, B and W, the step
// takes 3m + p − 1: the bubble is (p − 1)(F + B − W), a third of 1F1B's.
StageSchedule zb_h1(int stage, int pp, int m) {
  StageSchedule out;
  int f = 0;
  int b = 0;
  int w = 0;
  for (; f < std::min(pp - stage, m); ++f) out.push_back({PassKind::Forward, f, 0});
  while (b < m) {
    out.push_back({PassKind::Backward, b++, 0});
    if (b > stage) out.push_back({PassKind::WeightGrad, w++, 0});
    if (f < m) out.push_back({PassKind::Forward, f++, 0});
  }
  while (w < m) out.push_back({PassKind::WeightGrad, w++, 0});
  return out;
}

}  // namespace

bool splits_weight_grad(Schedule schedule) {
  return schedule == Schedule::ZbH1;
}

std::vector<StageSchedule> make_schedule(Schedule schedule, int pp, int vpp, std::int64_t microbatches) {
  SIM_ASSERT(pp >= 1 && vpp >= 1 && microbatches >= 1, "bad schedule shape");
  SIM_ASSERT(microbatches <= (std::int64_t{1} << 24), "{} micro-batches per step is beyond what is simulated",
             microbatches);
  const int m = static_cast<int>(microbatches);
  std::vector<StageSchedule> out;
  for (int s = 0; s < pp; ++s) {
    switch (schedule) {
      case Schedule::GPipe:
        out.push_back(gpipe(m));
        break;
      case Schedule::OneFOneB:
        out.push_back(one_f_one_b(s, pp, m));
        break;
      case Schedule::Interleaved:
        out.push_back(interleaved(s, pp, vpp, m));
        break;
      case Schedule::ZbH1:
        out.push_back(zb_h1(s, pp, m));
        break;
    }
  }
  return out;
}

std::string describe(const StageSchedule& s) {
  std::string out;
  for (const auto& a : s) {
    if (!out.empty()) out += ' ';
    const char k = a.kind == PassKind::Forward ? 'F' : a.kind == PassKind::Backward ? 'B' : 'W';
    out += fmt::format("{}{}.{}", k, a.microbatch, a.chunk);
  }
  return out;
}

}  // namespace trainsim::lower
