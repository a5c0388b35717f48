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

// ZB-H1 by list scheduling with unit-cost F, B and W (the paper's assumption): whenever a stage
// is free it runs the earliest-available pass, preferring B (on the critical path), then F (within
// 1F1B's p − stage micro-batches in flight), then a pending W to fill the gap. At most p weight
// gradients wait on a stage. This yields the paper's bubble, (p − 1)(F + B − W).
std::vector<StageSchedule> zb_h1(int pp, int m) {
  struct Stage {
    int forwards = 0;
    int backwards = 0;
    int weights = 0;
    std::int64_t free = 0;
  };
  std::vector<Stage> st(static_cast<std::size_t>(pp));
  std::vector<StageSchedule> out(static_cast<std::size_t>(pp));
  // end times of F and B per (stage, micro-batch)
  std::vector<std::vector<std::int64_t>> f_end(st.size(), std::vector<std::int64_t>(static_cast<std::size_t>(m), -1));
  auto b_end = f_end;
  const auto at = [](auto& v, int s, int mb) -> std::int64_t& {
    return v[static_cast<std::size_t>(s)][static_cast<std::size_t>(mb)];
  };
  for (int total = pp * m * 3; total > 0; --total) {
    // (start, priority, stage, kind, micro-batch) of the earliest pass any stage can run
    std::tuple<std::int64_t, int, int, PassKind, int> best{std::numeric_limits<std::int64_t>::max(), 0, 0,
                                                           PassKind::Forward, 0};
    for (int s = 0; s < pp; ++s) {
      auto& x = st[static_cast<std::size_t>(s)];
      std::optional<std::tuple<std::int64_t, int, int, PassKind, int>> pick;
      const auto consider = [&](std::int64_t ready, int priority, PassKind kind, int mb) {
        const std::tuple<std::int64_t, int, int, PassKind, int> c{std::max(x.free, ready), priority, s, kind, mb};
        if (!pick || std::tie(std::get<0>(c), std::get<1>(c)) < std::tie(std::get<0>(*pick), std::get<1>(*pick)))
          pick = c;
      };
      if (x.backwards < x.forwards && x.backwards - x.weights < pp) {
        const int mb = x.backwards;
        const std::int64_t dep = s == pp - 1 ? at(f_end, s, mb) : at(b_end, s + 1, mb);
        if (dep >= 0) consider(dep, 0, PassKind::Backward, mb);
      }
      if (x.forwards < m && x.forwards - x.backwards < pp - s) {
        const int mb = x.forwards;
        const std::int64_t dep = s == 0 ? 0 : at(f_end, s - 1, mb);
        if (dep >= 0) consider(dep, 1, PassKind::Forward, mb);
      }
      if (x.weights < x.backwards) consider(x.free, 2, PassKind::WeightGrad, x.weights);
      if (pick && std::tie(std::get<0>(*pick), std::get<2>(*pick)) < std::tie(std::get<0>(best), std::get<2>(best)))
        best = *pick;
    }
    const auto [start, priority, s, kind, mb] = best;
    SIM_ASSERT(start != std::numeric_limits<std::int64_t>::max(), "zero-bubble schedule stalled");
    auto& x = st[static_cast<std::size_t>(s)];
    x.free = start + 1;
    out[static_cast<std::size_t>(s)].push_back({kind, mb, 0});
    if (kind == PassKind::Forward)
      at(f_end, s, x.forwards++) = x.free;
    else if (kind == PassKind::Backward)
      at(b_end, s, x.backwards++) = x.free;
    else
      ++x.weights;
  }
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
  if (schedule == Schedule::ZbH1) return zb_h1(pp, m);
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
        break;  // built for all stages at once above
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
