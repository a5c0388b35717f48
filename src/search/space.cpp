#include "search/space.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace trainsim::search {
namespace {

using spec::Recompute;
using spec::Schedule;

std::vector<int> powers_of_two_up_to(std::int64_t limit) {
  std::vector<int> out;
  for (std::int64_t v = 1; v <= limit && v <= (1 << 20); v *= 2) out.push_back(static_cast<int>(v));
  return out;
}

// A dimension's values: the pinned one, or the space's.
template <typename T>
std::vector<T> values(const std::set<std::string>& pinned, const char* key, T pinned_value, std::vector<T> space) {
  if (pinned.contains(key)) return {pinned_value};
  return space;
}

struct ScheduleChoice {
  Schedule schedule;
  int vpp;
};

}  // namespace

std::vector<Candidate> enumerate_space(const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload,
                                       const SweepOptions& options) {
  const auto fixed = spec::read_strategy_spec(options.fixed, options.fixed_source);
  std::set<std::string> pinned;
  for (const auto& [key, value] : options.fixed.items()) pinned.insert(key);
  const auto& m = workload.model;
  const auto& t = workload.training;

  std::vector<std::int64_t> gpus = options.gpus;
  if (gpus.empty()) gpus.push_back(fixed.gpus.value_or(cluster.num_devices()));

  const std::int64_t tp_limit = std::min<std::int64_t>(m.heads, std::max<std::int64_t>(16, 2 * cluster.node.devices));
  std::vector<int> cps;
  for (const int c : powers_of_two_up_to(64))
    if (c == 1 || t.seq_len / c >= 4096) cps.push_back(c);
  std::vector<int> eps{1};
  if (m.moe) {
    eps.clear();
    for (const int e : powers_of_two_up_to(m.moe->experts))
      if (m.moe->experts % e == 0) eps.push_back(e);
  }
  // Flash attention never stores the attention scores, which is all selective recomputation saves.
  const std::vector<Recompute> recomputes =
      values<Recompute>(pinned, "recompute", fixed.recompute,
                        fixed.attention == spec::AttentionImpl::Flash
                            ? std::vector<Recompute>{Recompute::None, Recompute::Full}
                            : std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full});

  std::vector<Candidate> out;
  for (const auto g : gpus) {
    for (const int tp : values(pinned, "tp", fixed.tp, powers_of_two_up_to(tp_limit))) {
      for (const bool sp :
           values(pinned, "sp", fixed.sp, tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
        for (const int cp : values(pinned, "cp", fixed.cp, cps)) {
          const std::vector<spec::CpComm> cp_comms =
              values(pinned, "cp_comm", fixed.cp_comm,
                     cp > 1 ? std::vector<spec::CpComm>{spec::CpComm::AllGather, spec::CpComm::Ring}
                            : std::vector<spec::CpComm>{spec::CpComm::AllGather});
          for (const auto cp_comm : cp_comms)
            for (const int ep : values(pinned, "ep", fixed.ep, eps)) {
              const bool can_overlap = ep > 1 && m.moe && m.moe->shared_experts > 0;
              for (const bool ep_overlap :
                   values(pinned, "ep_overlap", fixed.ep_overlap,
                          can_overlap ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
                const std::int64_t model_parallel = std::int64_t{tp} * cp;
                if (g % model_parallel != 0) continue;
                std::vector<int> pps;
                for (std::int64_t d = 1; d <= g / model_parallel && d <= m.layers; ++d)
                  if ((g / model_parallel) % d == 0) pps.push_back(static_cast<int>(d));
                for (const int pp : values(pinned, "pp", fixed.pp, pps)) {
                  if (g % (model_parallel * pp) != 0) continue;
                  const std::int64_t dp = g / (model_parallel * pp);
                  if (pinned.contains("dp") && fixed.dp != dp) continue;
                  // stage layers: even, or the remainder split between the outer stages
                  std::optional<int> first = fixed.first_stage_layers;
                  std::optional<int> last = fixed.last_stage_layers;
                  const bool even = m.layers % pp == 0;
                  if (!even && !first && !last) {
                    const int inner = (m.layers + pp - 1) / pp;
                    const int rest = m.layers - (pp - 2) * inner;
                    if (pp <= 2 || rest < 2) {
                      if (!pinned.contains("pp")) continue;  // no split of the layers: not a strategy
                    } else {
                      first = rest / 2;
                      last = rest - rest / 2;
                    }
                  }
                  std::vector<ScheduleChoice> schedules{{Schedule::OneFOneB, 1}};
                  if (pp > 1) {
                    schedules.push_back({Schedule::ZbH1, 1});
                    if (even)
                      for (int v = 2; v <= 8; ++v)
                        if ((m.layers / pp) % v == 0) schedules.push_back({Schedule::Interleaved, v});
                  }
                  if (pinned.contains("schedule") || pinned.contains("vpp")) {
                    std::erase_if(schedules, [&](const ScheduleChoice& c) {
                      return (pinned.contains("schedule") && c.schedule != fixed.schedule) ||
                             (pinned.contains("vpp") && c.vpp != fixed.vpp);
                    });
                    if (schedules.empty()) schedules.push_back({fixed.schedule, fixed.vpp});
                  }
                  std::vector<std::int64_t> mbs;
                  for (std::int64_t b = 1; b <= 16; b *= 2)
                    if (t.global_batch % (dp * b) == 0) mbs.push_back(b);
                  if (mbs.empty()) mbs.push_back(1);  // rejected by the job rules, reported as such
                  for (const auto& sc : schedules) {
                    for (const int zero : values(pinned, "zero", fixed.zero,
                                                 dp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0})) {
                      for (const auto mb : values(pinned, "mb", fixed.mb, mbs)) {
                        // Megatron-LM interleaves micro-batches in groups of pp
                        if (sc.schedule == Schedule::Interleaved && !pinned.contains("schedule") &&
                            !pinned.contains("vpp") && (t.global_batch / (dp * mb)) % pp != 0)
                          continue;
                        for (const auto recompute : recomputes) {
                          auto s = fixed;  // pinned keys the loops do not cover (attention, order)
                          s.tp = tp;
                          s.sp = sp;
                          s.cp = cp;
                          s.cp_comm = cp_comm;
                          s.ep = ep;
                          s.ep_overlap = ep_overlap;
                          s.pp = pp;
                          s.schedule = sc.schedule;
                          s.vpp = sc.vpp;
                          s.zero = zero;
                          s.mb = mb;
                          s.recompute = recompute;
                          s.first_stage_layers = first;
                          s.last_stage_layers = last;
                          s.dp.reset();
                          s.gpus = g;
                          out.push_back({std::move(s), g});
                        }
                      }
                    }
                  }
                }
              }
            }
        }
      }
    }
  }
  return out;
}

}  // namespace trainsim::search
