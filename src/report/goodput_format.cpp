#include "trainsim/report/goodput_format.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

using nlohmann::ordered_json;

ordered_json percentiles_json(const driver::Percentiles& p) {
  return {{"p10", p.p10}, {"p50", p.p50}, {"p90", p.p90}};
}

std::string duration_text(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.2f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} s", s);
}

std::string table(const driver::GoodputReport& r) {
  const auto& job = *r.job;
  std::string out;
  std::size_t width = 24;
  for (const auto& [cause, n] : r.interruptions_by_cause) width = std::max(width, cause.size() + 4);
  const auto line = [&](std::string_view key, const std::string& value) {
    out += fmt::format("{:<{}}{}\n", key, width, value);
  };
  line("workload", fmt::format("{} on {} ({} GPUs, {} nodes)", job.workload.name, job.cluster.name, job.gpus, r.nodes));
  line("strategy", spec::strategy_text(job.strategy));
  if (!r.fits)
    line("memory", does_not_fit_text(r.peak_memory, r.device_memory) +
                       ": every figure below is for a plan that cannot run");
  else
    line("memory", fmt::format("peak {} per GPU of {}: fits{}", human_bytes(Bytes{r.peak_memory}),
                               human_bytes(r.device_memory), r.memory_at_risk ? ", but within the headroom: at risk" : ""));
  line("reliability", r.reliability);
  line("step (failure-free)", fmt::format("{:.4f} s, {:.0f} tokens/s", r.step_s, r.tokens_per_step / r.step_s));
  line("mean time to failure", duration_text(r.model.mtbf_s()));
  line("checkpoint", fmt::format("{:.3g} GB every {} (stall {:.1f} s), restart {}", r.checkpoint_bytes / 1e9,
                                 duration_text(r.model.interval_s), r.model.checkpoint_s,
                                 duration_text(r.model.restart_s)));
  if (r.horizon_s)
    line("target", fmt::format("{} of wall time", duration_text(*r.horizon_s)));
  else
    line("target", fmt::format("{:.4g} tokens: {} failure-free", r.tokens, duration_text(r.work_s)));
  line("wall time", fmt::format("{} (p10 {}, p50 {}, p90 {}); closed form {}", duration_text(r.wall_s),
                                duration_text(r.wall.p10), duration_text(r.wall.p50), duration_text(r.wall.p90),
                                duration_text(r.closed_wall_s)));
  if (r.horizon_s)
    line("tokens trained", fmt::format("{:.4g} (p10 {:.4g}, p90 {:.4g})", r.tokens, r.tokens_trained.p10,
                                       r.tokens_trained.p90));
  line("ETTR", fmt::format("{:.1f}% (closed form {:.1f}%)", r.ettr * 100, r.closed_ettr * 100));
  line("goodput", fmt::format("{:.0f} tokens/s of {:.0f} failure-free", r.goodput_tokens_per_s(),
                              r.tokens_per_step / r.step_s));
  line("GPU-hours", fmt::format("{:.4g}", r.gpu_hours()));
  line("interruptions", fmt::format("{:.1f} expected", r.interruptions));
  for (const auto& [cause, n] : r.interruptions_by_cause) line(fmt::format("  {}", cause), fmt::format("{:.1f}", n));
  line("time lost", fmt::format("checkpoints {}, lost work {}, restarts {}, waiting for nodes {}",
                                duration_text(r.checkpoint_overhead_s), duration_text(r.lost_s),
                                duration_text(r.restart_total_s), duration_text(r.waiting_s)));
  for (const auto& a : r.assumptions) out += fmt::format("assumed: {}\n", a);
  return out;
}

std::string csv(const driver::GoodputReport& r) {
  std::string out =
      "workload,topology,gpus,strategy,step_time_s,mtbf_s,checkpoint_interval_s,checkpoint_write_s,restart_s,"
      "wall_time_s,wall_p10_s,wall_p50_s,wall_p90_s,ettr,goodput_tokens_per_s,gpu_hours,expected_interruptions,"
      "peak_memory_bytes,fits\n";
  const auto& job = *r.job;
  out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(job.workload.name),
                     csv_field(job.cluster.name), job.gpus, csv_field(spec::strategy_text(job.strategy)), r.step_s,
                     r.model.mtbf_s(), r.model.interval_s, r.checkpoint_write_s, r.model.restart_s, r.wall_s,
                     r.wall.p10, r.wall.p50, r.wall.p90, r.ettr, r.goodput_tokens_per_s(), r.gpu_hours(),
                     r.interruptions, r.peak_memory, r.fits ? "true" : "false");
  return out;
}

}  // namespace

ordered_json to_json(const driver::GoodputReport& r) {
  const auto& job = *r.job;
  ordered_json by_cause = ordered_json::object();
  for (const auto& [cause, n] : r.interruptions_by_cause) by_cause[cause] = n;
  ordered_json out{{"workload", job.workload.name},
                   {"topology", job.cluster.name},
                   {"gpus", job.gpus},
                   {"nodes", r.nodes},
                   {"strategy", spec::strategy_text(job.strategy)},
                   {"reliability", r.reliability},
                   {"fits", r.fits},
                   {"memory_at_risk", r.memory_at_risk},
                   {"peak_memory_bytes", r.peak_memory},
                   {"device_memory_bytes", r.device_memory.count},
                   {"step_time_s", r.step_s},
                   {"tokens_per_step", r.tokens_per_step},
                   {"mtbf_s", r.model.mtbf_s()},
                   {"expected_interruptions", r.interruptions},
                   {"interruptions_by_cause", std::move(by_cause)},
                   {"ettr", r.ettr},
                   {"goodput_tokens_per_s", r.goodput_tokens_per_s()},
                   {"tokens", r.tokens},
                   {"wall_time_s", r.wall_s},
                   {"gpu_hours", r.gpu_hours()},
                   {"checkpoint_interval_s", r.model.interval_s},
                   {"checkpoint_bytes", r.checkpoint_bytes},
                   {"checkpoint_write_s", r.checkpoint_write_s},
                   {"checkpoint_stall_s", r.model.checkpoint_s},
                   {"restart_s", r.model.restart_s},
                   {"percentiles", percentiles_json(r.wall)},
                   {"tokens_percentiles", percentiles_json(r.tokens_trained)},
                   {"time_lost_s",
                    {{"checkpoints", r.checkpoint_overhead_s},
                     {"lost_work", r.lost_s},
                     {"restarts", r.restart_total_s},
                     {"waiting_for_nodes", r.waiting_s}}},
                   {"closed_form", {{"wall_time_s", r.closed_wall_s}, {"ettr", r.closed_ettr}}},
                   {"monte_carlo", {{"samples", r.samples}, {"seed", r.seed}}},
                   {"assumptions", r.assumptions},
                   {"warnings", r.warnings}};
  if (r.horizon_s) out["days"] = *r.horizon_s / 86400;
  return out;
}

std::string render(const driver::GoodputReport& r, Format format) {
  switch (format) {
    case Format::Json:
      return json_text(to_json(r)) + "\n";
    case Format::Csv:
      return csv(r);
    case Format::Table:
      return table(r);
  }
  SIM_ASSERT(false, "unhandled format");
}

}  // namespace trainsim::report
