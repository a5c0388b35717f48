#include "trainsim/lower/schedule.hpp"

#include <algorithm>
#include <deque>
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
  out.reserve(2 * static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) out.push_back({PassKind::Forward, i, 0});
  for (int i = 0; i < m; ++i) out.push_back({PassKind::Backward, i, 0});
  return out;
}

StageSchedule one_f_one_b(int stage, int pp, int m) {
  StageSchedule out;
  out.reserve(2 * static_cast<std::size_t>(m));
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
// micro-batch (k / (p·v))·p + k % p; backward steps walk the chunks in reverse. The steps in that
// order (the same on every stage).
StageSchedule interleaved_steps(int pp, int vpp, int m, bool forward) {
  StageSchedule out;
  out.reserve(static_cast<std::size_t>(m) * static_cast<std::size_t>(vpp));
  for (int group = 0; group * pp < m; ++group)
    for (int c = 0; c < vpp; ++c)
      for (int i = 0; i < pp; ++i)
        out.push_back({forward ? PassKind::Forward : PassKind::Backward, group * pp + i, forward ? c : vpp - 1 - c});
  return out;
}

StageSchedule interleaved(int stage, int pp, int vpp, const StageSchedule& forwards, const StageSchedule& backwards) {
  const auto total = forwards.size();
  const auto warmup = std::min(static_cast<std::size_t>((pp - stage - 1) * 2 + (vpp - 1) * pp), total);
  StageSchedule out;
  out.reserve(2 * total);
  std::size_t f = 0;
  std::size_t b = 0;
  for (; f < warmup; ++f) out.push_back(forwards[f]);
  while (b < total) {
    if (f < total) out.push_back(forwards[f++]);
    out.push_back(backwards[b++]);
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
  out.reserve(3 * static_cast<std::size_t>(m));
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

// DualPipeV as deepseek-ai/DualPipe's dualpipev.py steps through it on rank `stage` of p (its
// eight steps, named there nF0, nF0F1, nB1W1F1, nF0B1F1B0, nB1F1B0, nB1B0, nWB0, nW). A backward
// with zero bubble defers its W into a queue that a later W pops (first in, first out); any other
// backward runs its W at once. The forward-backward pairs of step 4 and 5 are consecutive F and
// B, which combined 1F1B runs together.
class DualPipeV {
 public:
  DualPipeV(int stage, int pp, int m) : r_(stage), p_(pp), m_(m) {}

  StageSchedule build() {
    const int r = r_, p = p_;
    out_.reserve(6 * static_cast<std::size_t>(m_));  // F, B and W of both chunks
    repeat(2 * (p - r - 1), [&] { forward(0); });
    repeat(r + 1, [&] {
      forward(0);
      forward(1);
    });
    repeat(p - r - 1, [&] {
      backward(1, true);
      weight();
      forward(1);
    });
    repeat(m_ - 2 * p + r + 1, [&] {
      forward(0);
      backward(1, false);
      forward(1);
      backward(0, false);
    });
    repeat(p - r - 1, [&] {
      backward(1, false);
      forward(1);
      backward(0, false);
    });
    // the second half of the cool-down's backwards defer their W
    bool zero_bubble = false;
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) zero_bubble = true;
      backward(1, zero_bubble);
      if (i == (r + 1) / 2 && r % 2 == 0) zero_bubble = true;
      backward(0, zero_bubble);
    }
    repeat(p - r - 1, [&] {
      weight();
      backward(0, true);
    });
    repeat(r + 1, [&] { weight(); });
    SIM_ASSERT(deferred_.empty() && next_f_[0] == m_ && next_f_[1] == m_ && next_b_[0] == m_ && next_b_[1] == m_,
               "DualPipeV schedule of stage {} is incomplete", r_);
    return std::move(out_);
  }

 private:
  template <typename F>
  static void repeat(int n, F&& f) {
    for (int i = 0; i < n; ++i) f();
  }
  void forward(int chunk) { out_.push_back({PassKind::Forward, next_f_[chunk]++, chunk}); }
  void backward(int chunk, bool zero_bubble) {
    const Action w{PassKind::WeightGrad, next_b_[chunk], chunk};
    out_.push_back({PassKind::Backward, next_b_[chunk]++, chunk});
    if (zero_bubble)
      deferred_.push_back(w);
    else
      out_.push_back(w);
  }
  void weight() {
    SIM_ASSERT(!deferred_.empty(), "DualPipeV pops a W that no backward deferred");
    out_.push_back(deferred_.front());
    deferred_.pop_front();
  }

  int r_, p_, m_;
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  std::deque<Action> deferred_;  // first in, first out
  StageSchedule out_;
};

}  // namespace

bool splits_weight_grad(Schedule schedule) {
  return schedule == Schedule::ZbH1 || schedule == Schedule::DualPipeV;
}

std::vector<StageSchedule> make_schedule(Schedule schedule, int pp, int vpp, std::int64_t microbatches) {
  SIM_ASSERT(pp >= 1 && vpp >= 1 && microbatches >= 1, "bad schedule shape");
  SIM_ASSERT(microbatches <= (std::int64_t{1} << 24), "{} micro-batches per step is beyond what is simulated",
             microbatches);
  const int m = static_cast<int>(microbatches);
  std::vector<StageSchedule> out;
  out.reserve(static_cast<std::size_t>(pp));
  StageSchedule forwards, backwards;  // the interleaved schedule's steps
  if (schedule == Schedule::Interleaved) {
    SIM_ASSERT(m % pp == 0, "the interleaved schedule runs micro-batches in groups of pp");
    forwards = interleaved_steps(pp, vpp, m, true);
    backwards = interleaved_steps(pp, vpp, m, false);
  }
  for (int s = 0; s < pp; ++s) {
    switch (schedule) {
      case Schedule::GPipe:
        out.push_back(gpipe(m));
        break;
      case Schedule::OneFOneB:
        out.push_back(one_f_one_b(s, pp, m));
        break;
      case Schedule::Interleaved:
        out.push_back(interleaved(s, pp, vpp, forwards, backwards));
        break;
      case Schedule::ZbH1:
        out.push_back(zb_h1(s, pp, m));
        break;
      case Schedule::DualPipeV:
        SIM_ASSERT(vpp == 2 && m >= 2 * pp, "DualPipeV runs two chunks per stage and at least 2·pp micro-batches");
        out.push_back(DualPipeV(s, pp, m).build());
        break;
    }
  }
  return out;
}

std::optional<spec::StageChunk> previous_virtual(spec::Schedule schedule, int stage, int chunk, int pp) {
  const int v = spec::virtual_stage(schedule, stage, chunk, pp);
  if (v == 0) return std::nullopt;
  return spec::at_virtual_stage(schedule, v - 1, pp);
}

std::optional<spec::StageChunk> next_virtual(spec::Schedule schedule, int stage, int chunk, int pp, int vpp) {
  const int v = spec::virtual_stage(schedule, stage, chunk, pp);
  if (v + 1 == pp * vpp) return std::nullopt;
  return spec::at_virtual_stage(schedule, v + 1, pp);
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
