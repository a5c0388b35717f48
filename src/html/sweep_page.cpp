// The page of a `sweep`: every simulated plan on the step-time/memory plane with the Pareto front
// and the top plans marked, the ranking, and what was pruned and why.
#include <algorithm>
#include <charconv>
#include <map>

#include <fmt/format.h>

#include "html/page.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/format.hpp"

namespace trainsim::html {
namespace {

// The tensor-parallel degree a plan's strategy names ("tp=8,..."), its colour family.
int tp_of(const std::string& strategy) {
  const auto at = strategy.find("tp=");
  if (at == std::string::npos || (at > 0 && strategy[at - 1] != ',')) return 1;
  int tp = 1;
  std::from_chars(strategy.data() + at + 3, strategy.data() + strategy.size(), tp);
  return tp;
}

}  // namespace

std::string sweep_page(const search::SweepResult& r) {
  Page page("sweep", fmt::format("{} on {}", r.workload, r.topology),
            fmt::format("{} configurations, ranked by {}", r.enumerated, search::objective_name(r.objective)));
  page.figure("/counts/enumerated", "configurations", fmt::format("{}", r.enumerated), static_cast<double>(r.enumerated));
  page.figure("/counts/candidates", "candidates", fmt::format("{}", r.candidates), static_cast<double>(r.candidates));
  page.figure("/counts/out_of_memory", "do not fit (analytic)", fmt::format("{}", r.out_of_memory),
              static_cast<double>(r.out_of_memory));
  if (!r.top.empty()) {
    page.figure("/top/0/step_time_s", "best step", seconds_text(r.top.front().step_time_s), r.top.front().step_time_s);
    page.figure("/top/0/peak_memory_bytes", "its peak memory", report::human_bytes(Bytes{r.top.front().peak_memory}),
                static_cast<double>(r.top.front().peak_memory));
  }
  // the plane: every simulated plan; the front of plans no other beats on both axes
  const char* colours[] = {"c-fwd", "c-bwd", "c-opt", "c-tp", "c-dp", "c-pp", "c-ep", "c-w"};
  std::map<int, std::string> families;
  std::vector<Point> points;
  std::map<std::size_t, std::size_t> rank_of;  // enumeration index -> rank in the top K
  for (std::size_t i = 0; i < r.top.size(); ++i) rank_of[r.top[i].index] = i + 1;
  auto by_step = r.simulated;
  std::sort(by_step.begin(), by_step.end(), [](const auto& a, const auto& b) {
    return a.step_time_s != b.step_time_s ? a.step_time_s < b.step_time_s : a.peak_memory < b.peak_memory;
  });
  std::int64_t lowest = std::numeric_limits<std::int64_t>::max();
  std::map<std::size_t, bool> front;
  for (const auto& p : by_step)
    if (p.peak_memory < lowest) {
      lowest = p.peak_memory;
      front[p.index] = true;
    }
  std::size_t on_front = 0;
  for (const auto& p : r.simulated) {
    const int tp = tp_of(p.strategy);
    auto [it, inserted] = families.try_emplace(tp, colours[families.size() % std::size(colours)]);
    const auto rank = rank_of.find(p.index);
    const bool f = front.contains(p.index);
    on_front += f ? 1 : 0;
    points.push_back({p.step_time_s, static_cast<double>(p.peak_memory), it->second,
                      fmt::format("{}: {} step, {} peak{}", p.strategy, seconds_text(p.step_time_s),
                                  report::human_bytes(Bytes{p.peak_memory}), f ? " (Pareto front)" : ""),
                      rank != rank_of.end() ? fmt::format("#{}", rank->second) : std::string(), f});
  }
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& [tp, css] : families) legend.emplace_back(fmt::format("tp {}", tp), css);
  page.section("plane", "Step time against peak memory",
               scatter("scatter", points, "step time", "peak memory per GPU", legend) +
                   fmt::format("<p class=\"note\" data-points=\"{}\" data-front=\"{}\">{} simulated plans that fit "
                               "(ringed: the {} on the Pareto front; #n: the top {})</p>",
                               points.size(), on_front, points.size(), on_front, r.top.size()));
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    const auto& p = r.top[i];
    rows.push_back({fmt::format("{}", i + 1), p.strategy, fmt::format("{}", p.gpus), seconds_text(p.step_time_s),
                    fmt::format("{:.0f}", p.tokens_per_s), fmt::format("{:.1f}%", p.mfu * 100),
                    fmt::format("{:.1f}%", p.bubble_fraction * 100), report::human_bytes(Bytes{p.peak_memory})});
  }
  page.section("ranking", "The best plans",
               table("top", {"rank", "strategy", "GPUs", "step", "tokens/s", "MFU", "bubble", "peak memory"}, rows));
  std::vector<Part> pruned;
  for (const auto& f : r.pruned) pruned.push_back({f.reason, static_cast<double>(f.count), "c-oth"});
  page.section("pruned", "Pruned, by reason", bars("pruned-bars", pruned, ""));
  return page.finish();
}

}  // namespace trainsim::html
