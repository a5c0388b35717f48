// The page of a `replay`: recorded against replayed step times, each what-if's change per step,
// and what the GPU did in each step.
#include <optional>

#include <fmt/format.h>

#include "html/page.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/format.hpp"

namespace trainsim::html {
namespace {

// The caching allocator's recorded peaks per step (profile_memory=True) and, given the job (-w and
// -s), the model's peaks beside them (docs/validation.md "Memory"); empty when the traces hold no
// memory events.
std::string memory_section(const trace::TraceReport& r) {
  Series allocated{"peak allocated (recorded)", "c-fwd", {}}, reserved{"peak reserved (recorded)", "c-opt", {}};
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto& s = r.steps[i];
    const double x = static_cast<double>(i + 1);
    if (s.peak_allocated) allocated.points.emplace_back(x, static_cast<double>(*s.peak_allocated));
    if (s.peak_reserved) reserved.points.emplace_back(x, static_cast<double>(*s.peak_reserved));
  }
  if (allocated.points.empty() && !r.memory) return "";
  std::string out;
  if (!allocated.points.empty()) {
    std::optional<double> model;
    if (r.memory) model = static_cast<double>(r.memory->model_live);
    out += line_chart("memory-steps", {allocated, reserved}, "", "B", model, "the model's live peak");
  }
  if (const auto& m = r.memory) {
    const auto error = [](double e) { return fmt::format("{:+.1f}%", e * 100); };
    out += table("memory-table", {"", "recorded", "model", "error"},
                 {{"peak allocated (live tensors)", report::human_bytes(Bytes{m->recorded_allocated}),
                   report::human_bytes(Bytes{m->model_live}), error(m->allocated_error())},
                  {"peak reserved (caching allocator)", report::human_bytes(Bytes{m->recorded_reserved}),
                   report::human_bytes(Bytes{m->model_reserved}), error(m->reserved_error())}});
  }
  return out;
}

}  // namespace

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
  if (auto memory = memory_section(r); !memory.empty())
    page.section("memory", "Memory: the caching allocator's peaks per step (step order)", memory);
  std::string notes;
  for (const auto& n : r.notes) notes += fmt::format("<p class=\"note\">{}</p>", escape(n));
  for (const auto& w : r.warnings) notes += fmt::format("<p class=\"warning\">warning: {}</p>", escape(w));
  page.section("notes", "What the replay assumed", notes);
  return page.finish();
}

}  // namespace trainsim::html
