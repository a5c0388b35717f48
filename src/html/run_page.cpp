// The page of a `run`: headline figures, where the time goes, the step's Gantt chart, memory over
// time per stage, the worst stage's memory, the collectives.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "html/page.hpp"
#include "trainsim/driver/memory_timeline.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/util/intervals.hpp"

namespace trainsim::html {
namespace {

using lower::Category;

constexpr std::size_t kGanttLimit = 20000;  // spans drawn one by one; beyond, short neighbours merge
constexpr std::size_t kMemoryPoints = 600;  // per stage

std::string css_of(const sim::TaskGraph& g, sim::TaskId t) {
  switch (static_cast<Category>(g.category(t))) {
    case Category::Compute: {
      const auto label = g.label(t);
      if (label.starts_with("F")) return "c-fwd";
      if (label.starts_with("B")) return "c-bwd";
      if (label.starts_with("W")) return "c-w";
      return "c-oth";
    }
    case Category::Recompute:
      return "c-rec";
    case Category::Optimizer:
      return "c-opt";
    case Category::TpComm:
      return "c-tp";
    case Category::CpComm:
      return "c-cp";
    case Category::EpComm:
      return "c-ep";
    case Category::DpComm:
      return "c-dp";
    case Category::PpComm:
      return "c-pp";
    case Category::Host:
    case Category::Offload:
      return "c-oth";
  }
  return "c-oth";
}

double value_of(const std::vector<std::pair<std::string, double>>& values, std::string_view key) {
  for (const auto& [k, v] : values)
    if (k == key) return v;
  return 0;
}

std::string time_section(const driver::RunReport& r) {
  const auto& s = *r.simulation;
  // the compute stream's time split by what ran on it; exposed communication by category, scaled
  // to the step's exposed total (categories may overlap); the bubble
  const double compute = value_of(s.comm_busy_s, "compute");
  const double recompute = value_of(s.comm_busy_s, "recompute");
  const double optimizer = value_of(s.comm_busy_s, "optimizer");
  const double busy = compute + recompute + optimizer;
  const double scale = busy > 0 ? s.breakdown.compute_s / busy : 0;
  std::vector<Part> parts{{"compute", compute * scale, "c-fwd"},
                          {"recompute", recompute * scale, "c-rec"},
                          {"optimizer", optimizer * scale, "c-opt"}};
  double exposed = 0;
  for (const auto& [k, v] : s.exposed_s) exposed += v;
  for (const auto& [k, css] :
       {std::pair{"tp", "c-tp"}, std::pair{"cp", "c-cp"}, std::pair{"ep", "c-ep"}, std::pair{"dp", "c-dp"}}) {
    const double v = exposed > 0 ? value_of(s.exposed_s, k) / exposed * s.breakdown.exposed_comm_s : 0;
    parts.push_back({fmt::format("exposed {}", k), v, css});
  }
  parts.push_back({"waiting for the host", s.breakdown.host_bound_s, "c-oth"});
  parts.push_back({"bubble (idle, pipeline transfers)", s.breakdown.bubble_s, "c-bub"});
  return stacked_bar("time-bar", parts, "s") +
         "<p class=\"note\">Mean over the simulated ranks; the parts add up to the step.</p>";
}

std::string gantt_section(const driver::RunReport& r) {
  const auto& lowered = r.step->lowered;
  const auto& g = lowered.graph;
  const auto& tl = r.step->timeline;
  std::vector<Row> rows;
  for (const auto& rank : lowered.ranks) {
    lower::for_each_stream(rank, [&](lower::StreamKind, sim::StreamId stream) {
      const auto& tasks = g.stream_tasks(stream);
      if (tasks.empty()) return;
      Row row{fmt::format("rank {} (stage {}) {}", rank.rank, rank.stage, g.stream(stream).name), {}};
      for (const auto t : tasks) {
        const auto& span = tl.tasks[t.index()];
        row.spans.push_back({span.start.seconds(), span.end.seconds(), css_of(g, t),
                             fmt::format("{}: {} from {}", g.name(t), seconds_text((span.end - span.start).seconds()),
                                         seconds_text(span.start.seconds()))});
      }
      rows.push_back(std::move(row));
    });
  }
  return gantt("gantt", rows, tl.makespan.seconds(), kGanttLimit) +
         "<p class=\"legend\"><span>forward, backward, weight gradient, recompute, optimizer and TP, CP, EP, DP, PP "
         "communication in the colours of the bar above; hover a task for its name (F/B/W, micro-batch, layer), "
         "start and duration</span></p>";
}

// Live memory of each stage's first simulated rank over the step: its baseline, then every task's
// allocations and frees; sampled as the maximum of each of kMemoryPoints slices.
std::string memory_section(const driver::RunReport& r) {
  std::vector<Series> series;
  const char* colours[] = {"c-fwd", "c-bwd", "c-opt", "c-tp", "c-dp", "c-pp", "c-ep", "c-w"};
  for (auto& c : driver::memory_curves(r, kMemoryPoints))
    series.push_back({fmt::format("stage {} (rank {})", c.stage, c.rank),
                      colours[static_cast<std::size_t>(c.stage) % std::size(colours)], std::move(c.points)});
  return line_chart("memory-time", series, "s", "B", r.device_memory.as_double(), "device memory") +
         "<p class=\"note\">Live allocations; the report's peak adds the caching allocator's fragmentation.</p>";
}

std::string composition_section(const driver::RunReport& r) {
  // the worst stage, as the JSON report's "memory" holds it
  const auto j = report::to_json(r);
  const auto& m = j.at("memory");
  std::vector<Part> parts;
  for (const auto& [key, css] :
       {std::pair{"params", "c-fwd"}, std::pair{"grads", "c-bwd"}, std::pair{"optimizer", "c-opt"},
        std::pair{"activations", "c-w"}, std::pair{"buffers", "c-tp"}, std::pair{"fragmentation", "c-bub"}})
    parts.push_back({key, m.at(key).get<double>(), css});
  return stacked_bar("memory-bar", parts, "B");
}

std::string collectives_section(const driver::RunReport& r) {
  const auto& lowered = r.step->lowered;
  const auto& g = lowered.graph;
  const auto& tl = r.step->timeline;
  // per label: calls, busy time and time with the rank's compute stream idle, per simulated rank
  struct Use {
    std::int64_t calls = 0;
    double time = 0;
    double exposed = 0;
  };
  std::map<std::string, Use, std::less<>> uses;
  const double n = static_cast<double>(lowered.ranks.size());
  for (const auto& rank : lowered.ranks) {
    std::vector<std::pair<double, double>> busy;  // the compute streams' spans, merged
    lower::for_each_stream(rank, [&](lower::StreamKind kind, sim::StreamId stream) {
      if (kind == lower::StreamKind::Compute)
        for (const auto t : g.stream_tasks(stream))
          busy.emplace_back(tl.tasks[t.index()].start.seconds(), tl.tasks[t.index()].end.seconds());
    });
    if (!rank.second.empty()) busy = merged_spans(busy);
    lower::for_each_stream(rank, [&](lower::StreamKind kind, sim::StreamId stream) {
      if (lower::is_comm_stream(kind))
        for (const auto t : g.stream_tasks(stream)) {
          const double a = tl.tasks[t.index()].start.seconds(), b = tl.tasks[t.index()].end.seconds();
          double covered = 0;
          auto it = std::lower_bound(busy.begin(), busy.end(), std::pair{a, a},
                                     [](const auto& x, const auto& y) { return x.second < y.first; });
          for (; it != busy.end() && it->first < b; ++it)
            covered += std::max(0.0, std::min(b, it->second) - std::max(a, it->first));
          auto& u = uses[std::string(g.label(t))];
          u.calls += 1;
          u.time += (b - a) / n;
          u.exposed += std::max(0.0, b - a - covered) / n;
        }
    });
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : lowered.collectives) {
    const auto it = uses.find(c.label);
    const Use u = it != uses.end() ? it->second : Use{};
    rows.push_back({c.label, c.op, fmt::format("{}", c.group_size), report::human_bytes(Bytes{c.bytes}), c.algorithm,
                    c.protocol, fmt::format("{}", u.calls), seconds_text(u.time), seconds_text(u.exposed)});
  }
  return table("collectives",
               {"task", "op", "ranks", "bytes", "algorithm", "protocol", "calls", "time per rank", "exposed per rank"},
               rows) +
         "<p class=\"note\">Each distinct costing of a collective; times summed over its calls, per simulated "
         "rank.</p>";
}

}  // namespace

std::string run_page(const driver::RunReport& r) {
  const auto& job = *r.job;
  Page page("run", fmt::format("{} on {}", job.workload.name, job.cluster.name),
            fmt::format("{} GPUs · {}", job.gpus, spec::strategy_text(job.strategy)));
  if (r.simulation) {
    page.figure("/step_time_s", "step time", seconds_text(r.simulation->step_time_s), r.simulation->step_time_s);
    page.figure("/tokens_per_s", "tokens/s", fmt::format("{:.0f}", r.tokens_per_s), r.tokens_per_s);
    page.figure("/tflops_per_gpu", "TFLOP/s per GPU", fmt::format("{:.1f}", r.tflops_per_gpu), r.tflops_per_gpu);
    page.figure(
        "/mfu",
        fmt::format("MFU of the {:.0f} TFLOP/s {} peak", r.mfu_peak_flops / 1e12, spec::dtype_name(r.mfu_dtype)),
        fmt::format("{:.1f}%", r.mfu * 100), r.mfu);
    if (r.mfu_dtype != spec::Dtype::Bf16 && r.mfu_bf16)
      page.figure("/mfu_bf16_peak", "MFU of the bf16 peak (Megatron-LM, NeMo)",
                  fmt::format("{:.1f}%", *r.mfu_bf16 * 100), *r.mfu_bf16);
    page.figure("/bubble_fraction", "bubble", fmt::format("{:.1f}%", r.simulation->bubble_fraction * 100),
                r.simulation->bubble_fraction);
  }
  page.figure("/peak_memory_bytes", "peak memory per GPU", report::human_bytes(Bytes{r.peak_memory}),
              static_cast<double>(r.peak_memory));
  page.figure("/device_memory_bytes", "device memory", report::human_bytes(r.device_memory),
              r.device_memory.as_double());
  page.figure("/fits", "fits", report::fit_verdict(r.fits, r.memory_at_risk, r.peak_memory, r.device_memory),
              std::nullopt);
  std::string assumptions = fmt::format("<p>strategy <code>{}</code></p><p>precision: {}</p>",
                                        escape(spec::strategy_text(job.strategy)), escape(report::precision_text(r)));
  std::vector<std::string> assumed;
  for (const auto& [k, v] : job.strategy.assumed.keys) assumed.push_back(fmt::format("{}={}", k, v));
  assumptions += fmt::format("<p>framework {} (preset: {})</p>", escape(spec::framework_name(job.strategy.framework)),
                             escape(fmt::format("{}", fmt::join(assumed, ", "))));
  for (const auto& w : r.warnings) assumptions += fmt::format("<p class=\"warning\">warning: {}</p>", escape(w));
  page.section("assumptions", "Strategy and assumptions", assumptions);
  if (r.simulation && r.step) {
    page.section("time", "Where the time goes", time_section(r));
    page.section("timeline", "One step, stage by stage", gantt_section(r));
    page.section("memory", "Memory over the step", memory_section(r));
  }
  page.section("composition", "Memory of the worst stage", composition_section(r));
  if (r.step) page.section("collectives-section", "Collectives", collectives_section(r));
  return page.finish();
}

}  // namespace trainsim::html
