// The page of `goodput`: the headline figures, where the wall time goes, interruptions by cause,
// and every assumption in force.
#include <fmt/format.h>

#include "html/page.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/strategy_spec.hpp"

namespace trainsim::html {

std::string goodput_page(const driver::GoodputReport& r) {
  const auto& job = *r.job;
  Page page("goodput", fmt::format("{} on {}", job.workload.name, job.cluster.name),
            fmt::format("{} GPUs · {} · reliability {}", job.gpus, spec::strategy_text(job.strategy), r.reliability));
  page.figure("/fits", "fits", report::fit_verdict(r.fits, r.memory_at_risk, r.peak_memory, r.device_memory),
              std::nullopt);
  page.figure("/peak_memory_bytes", "peak memory per GPU", report::human_bytes(Bytes{r.peak_memory}),
              static_cast<double>(r.peak_memory));
  page.figure("/wall_time_s", "wall time", seconds_text(r.wall_s), r.wall_s);
  page.figure("/ettr", "effective training time", fmt::format("{:.1f}%", r.ettr * 100), r.ettr);
  page.figure("/goodput_tokens_per_s", "goodput, tokens/s", fmt::format("{:.0f}", r.goodput_tokens_per_s()),
              r.goodput_tokens_per_s());
  page.figure("/expected_interruptions", "interruptions", fmt::format("{:.1f}", r.interruptions), r.interruptions);
  page.figure("/mtbf_s", "mean time to failure", seconds_text(r.model.mtbf_s()), r.model.mtbf_s());
  page.figure("/checkpoint_interval_s", "checkpoint interval", seconds_text(r.model.interval_s), r.model.interval_s);
  if (!r.fits)
    page.section("memory", "Memory",
                 fmt::format("<p class=\"warning\">{}: every figure on this page is for a plan that cannot run</p>",
                             escape(report::does_not_fit_text(r.peak_memory, r.device_memory))));
  const double work = r.wall_s - r.checkpoint_overhead_s - r.lost_s - r.restart_total_s - r.waiting_s;
  page.section("time", "Where the wall time goes",
               stacked_bar("goodput-bar",
                           {{"training kept", work, "c-bwd"},
                            {"checkpoints", r.checkpoint_overhead_s, "c-dp"},
                            {"lost work", r.lost_s, "c-opt"},
                            {"restarts", r.restart_total_s, "c-tp"},
                            {"waiting for nodes", r.waiting_s, "c-bub"}},
                           "s"));
  std::vector<Part> causes;
  for (const auto& [cause, n] : r.interruptions_by_cause) causes.push_back({cause, n, "c-opt"});
  page.section("causes", "Interruptions by cause (mean over the Monte Carlo runs)", bars("cause-bars", causes, ""));
  std::string assumed;
  for (const auto& a : r.assumptions) assumed += fmt::format("<p>{}</p>", escape(a));
  page.section("assumptions", "Assumptions", assumed);
  return page.finish();
}

}  // namespace trainsim::html
