// The page of a `replay`: recorded against replayed step times, each what-if's change per step,
// and what the GPU did in each step.
#include <fmt/format.h>

#include "html/page.hpp"
#include "trainsim/html/html.hpp"

namespace trainsim::html {

std::string replay_page(const trace::TraceReport& r) {
  Page page("replay", r.files.size() == 1 ? r.files.front().path : fmt::format("{} traces", r.files.size()),
            r.what_if ? "replayed with what-ifs" : "replayed as recorded");
  page.figure("/kernels", "GPU kernels", fmt::format("{}", r.kernels), static_cast<double>(r.kernels));
  page.figure("/nccl_kernels", "NCCL kernels", fmt::format("{}", r.nccl_kernels), static_cast<double>(r.nccl_kernels));
  if (!r.steps.empty()) {
    const auto& s = r.steps.front();
    page.figure("/steps/0/recorded_s", "first step, recorded", seconds_text(s.recorded_s), s.recorded_s);
    if (s.replayed_s) page.figure("/steps/0/replayed_s", "first step, replayed", seconds_text(*s.replayed_s), *s.replayed_s);
  }
  Series recorded{"recorded", "c-fwd", {}}, replayed{"replayed", "c-opt", {}};
  Series busy{"GPU busy", "c-fwd", {}}, compute{"compute", "c-bwd", {}}, exposed{"exposed communication", "c-tp", {}};
  std::vector<Part> change;
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto& s = r.steps[i];
    const double x = static_cast<double>(i + 1);
    recorded.points.emplace_back(x, s.recorded_s);
    if (s.replayed_s) {
      replayed.points.emplace_back(x, *s.replayed_s);
      change.push_back({fmt::format("rank {} step {}", s.rank, s.step), (*s.replayed_s / s.recorded_s - 1) * 100,
                        *s.replayed_s <= s.recorded_s ? "c-bwd" : "c-opt"});
    }
    busy.points.emplace_back(x, s.gpu_busy_s);
    compute.points.emplace_back(x, s.compute_s);
    exposed.points.emplace_back(x, s.exposed_comm_s);
    rows.push_back({fmt::format("{}", s.rank), fmt::format("{}", s.step), seconds_text(s.recorded_s),
                    s.replayed_s ? seconds_text(*s.replayed_s) : std::string("-"),
                    s.critical_path ? s.critical_path->bound() : std::string("-"), seconds_text(s.gpu_busy_s),
                    seconds_text(s.compute_s), seconds_text(s.exposed_comm_s)});
  }
  page.section("steps", "Recorded and replayed step times (step order)",
               line_chart("step-times", {recorded, replayed}, "", "s", std::nullopt, ""));
  // (bars show magnitudes: a change's sign is in its colour and its label)
  std::vector<Part> magnitude = change;
  for (auto& p : magnitude) {
    p.label = fmt::format("{} ({:+.1f}%)", p.label, p.value);
    p.value = std::abs(p.value);
  }
  page.section("changes", r.what_if ? "Each step's change under the what-ifs" : "Each step's replay error",
               bars("change-bars", magnitude, "%"));
  page.section("gpu", "What the GPU did, per step",
               line_chart("gpu-time", {busy, compute, exposed}, "", "s", std::nullopt, "") +
                   table("step-table", {"rank", "step", "recorded", "replayed", "bound", "GPU busy", "compute",
                                        "exposed comm"},
                         rows));
  std::string notes;
  for (const auto& n : r.notes) notes += fmt::format("<p class=\"note\">{}</p>", escape(n));
  for (const auto& w : r.warnings) notes += fmt::format("<p class=\"warning\">warning: {}</p>", escape(w));
  page.section("notes", "What the replay assumed", notes);
  return page.finish();
}

}  // namespace trainsim::html
