#include "trainsim/report/trace_format.hpp"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/report/format.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {

using nlohmann::ordered_json;

namespace {

// One line on what the replayed steps waited for, from their critical paths.
std::string bound_line(const trace::TraceReport& r) {
  std::map<std::string, int> steps;
  trace::CriticalPath total;
  for (const auto& s : r.steps) {
    if (!s.critical_path) continue;
    ++steps[s.critical_path->bound()];
    total.cpu_s += s.critical_path->cpu_s;
    total.compute_s += s.critical_path->compute_s;
    total.comm_s += s.critical_path->comm_s;
    total.wait_s += s.critical_path->wait_s;
  }
  std::vector<std::string> counts;
  for (const auto* kind : {"CPU", "GPU", "communication", "unrecorded wait"})
    if (steps.contains(kind))
      counts.push_back(fmt::format("{} in {} of {} step(s)", kind, steps.at(kind), r.steps.size()));
  const auto sum = std::max(total.cpu_s + total.compute_s + total.comm_s + total.wait_s, 1e-300);
  return fmt::format(
      "bound by {} (critical path: {:.0f}% CPU threads, {:.0f}% GPU compute, {:.0f}% NCCL, {:.0f}% unrecorded waits)",
      fmt::join(counts, ", "), total.cpu_s / sum * 100, total.compute_s / sum * 100, total.comm_s / sum * 100,
      total.wait_s / sum * 100);
}

}  // namespace

ordered_json to_json(const trace::TraceReport& r) {
  ordered_json files = ordered_json::array();
  for (const auto& f : r.files) {
    ordered_json streams = ordered_json::object();
    for (const auto& [stream, kernels] : f.kernels_per_stream) streams[std::to_string(stream)] = kernels;
    files.push_back({{"path", f.path},
                     {"rank", f.rank},
                     {"world_size", f.world_size},
                     {"device", f.device},
                     {"events", f.events},
                     {"kernels", f.kernels},
                     {"nccl_kernels", f.nccl_kernels},
                     {"kernels_per_stream", std::move(streams)},
                     {"warnings", f.warnings}});
  }
  ordered_json collectives = ordered_json::array();
  for (const auto& c : r.collectives)
    collectives.push_back({{"op", c.op},
                           {"group_size", c.group_size},
                           {"count", c.count},
                           {"bytes", c.bytes},
                           {"unsized", c.unsized},
                           {"time_s", c.time_s}});
  ordered_json steps = ordered_json::array();
  for (const auto& s : r.steps) {
    ordered_json step{{"rank", s.rank}, {"step", s.step}, {"recorded_s", s.recorded_s}};
    if (s.replayed_s) {
      step["replayed_s"] = *s.replayed_s;
      step[r.what_if ? "change" : "error"] = *s.replayed_s / s.recorded_s - 1;
    }
    if (const auto& c = s.critical_path)
      step["critical_path"] = {{"bound", c->bound()},
                               {"cpu_s", c->cpu_s},
                               {"compute_s", c->compute_s},
                               {"comm_s", c->comm_s},
                               {"unrecorded_wait_s", c->wait_s}};
    step["gpu_busy_s"] = s.gpu_busy_s;
    step["compute_s"] = s.compute_s;
    step["comm_s"] = s.comm_s;
    step["overlap_s"] = s.overlap_s;
    step["exposed_comm_s"] = s.exposed_comm_s;
    step["kernels"] = s.kernels;
    step["nccl_kernels"] = s.nccl_kernels;
    if (s.peak_allocated) step["peak_allocated_bytes"] = *s.peak_allocated;
    if (s.peak_reserved) step["peak_reserved_bytes"] = *s.peak_reserved;
    steps.push_back(std::move(step));
  }
  ordered_json out{{"files", std::move(files)},
                   {"kernels", r.kernels},
                   {"nccl_kernels", r.nccl_kernels},
                   {"collectives", std::move(collectives)},
                   {"steps", std::move(steps)}};
  if (const auto& m = r.memory)
    out["memory"] = {{"recorded_peak_allocated_bytes", m->recorded_allocated},
                     {"recorded_peak_reserved_bytes", m->recorded_reserved},
                     {"model_live_bytes", m->model_live},
                     {"model_reserved_bytes", m->model_reserved},
                     {"allocated_error", m->allocated_error()},
                     {"reserved_error", m->reserved_error()}};
  if (!r.notes.empty()) out["notes"] = r.notes;
  if (!r.steps.empty() && r.steps.front().critical_path) out["bound"] = bound_line(r);
  if (!r.warnings.empty()) out["warnings"] = r.warnings;
  return out;
}

namespace {

// The model's peak against the allocator's recorded one (the CUDA context and NCCL aside).
std::string memory_lines(const trace::MemoryComparison& m) {
  return fmt::format(
      "memory, the model against the recorded peak (CUDA context and NCCL aside):\n"
      "  allocated  model {} (live tensors), recorded {}: {:+.1f}%\n"
      "  reserved   model {} (with the allocator's reserve), recorded {}: {:+.1f}%\n",
      human_bytes(Bytes{m.model_live}), human_bytes(Bytes{m.recorded_allocated}), m.allocated_error() * 100,
      human_bytes(Bytes{m.model_reserved}), human_bytes(Bytes{m.recorded_reserved}), m.reserved_error() * 100);
}

}  // namespace

std::string to_table(const trace::TraceReport& r) {
  std::string out;
  for (const auto& f : r.files) {
    const auto known = [](int n) { return n >= 0 ? std::to_string(n) : std::string("unknown"); };
    out += fmt::format("{}: rank {} of {}, {}, {} events, {} kernels ({} NCCL)\n", f.path, known(f.rank),
                       known(f.world_size), f.device.empty() ? "device unknown" : f.device, f.events, f.kernels,
                       f.nccl_kernels);
    for (const auto& w : f.warnings) out += fmt::format("  warning: {}\n", w);
  }
  if (!r.collectives.empty()) {
    out += fmt::format("\n{:<16} {:>6} {:>7} {:>14} {:>9} {:>10}\n", "collective", "ranks", "count", "bytes", "unsized",
                       "time (ms)");
    for (const auto& c : r.collectives)
      out += fmt::format("{:<16} {:>6} {:>7} {:>14} {:>9} {:>10.3f}\n", c.op, c.group_size, c.count, c.bytes, c.unsized,
                         c.time_s * 1e3);
  }
  const bool replayed = !r.steps.empty() && r.steps.front().replayed_s.has_value();
  out += fmt::format("\n{:>4} {:>8} {:>10}", "rank", "step", "recorded");
  if (replayed) out += fmt::format(" {:>10} {:>7} {:>15}", "replayed", r.what_if ? "change" : "error", "bound");
  out += fmt::format(" {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "gpu busy", "compute", "comm", "overlap", "exposed",
                     "kernels");
  for (const auto& s : r.steps) {
    out += fmt::format("{:>4} {:>8} {:>8.2f}ms", s.rank, s.step, s.recorded_s * 1e3);
    if (s.replayed_s)
      out += fmt::format(" {:>8.2f}ms {:>+6.1f}% {:>15}", *s.replayed_s * 1e3, (*s.replayed_s / s.recorded_s - 1) * 100,
                         s.critical_path ? s.critical_path->bound() : "");
    out += fmt::format(" {:>7.2f}ms {:>7.2f}ms {:>7.2f}ms {:>7.2f}ms {:>7.2f}ms {:>8}\n", s.gpu_busy_s * 1e3,
                       s.compute_s * 1e3, s.comm_s * 1e3, s.overlap_s * 1e3, s.exposed_comm_s * 1e3, s.kernels);
  }
  for (const auto& s : r.steps)
    if (s.peak_allocated)
      out += fmt::format("memory, rank {} step {}: peak allocated {}, reserved {} (the caching allocator's)\n", s.rank,
                         s.step, human_bytes(Bytes{*s.peak_allocated}), human_bytes(Bytes{*s.peak_reserved}));
  if (replayed) out += fmt::format("{}\n", bound_line(r));
  if (r.memory) out += memory_lines(*r.memory);
  for (const auto& n : r.notes) out += fmt::format("note: {}\n", n);
  return out;
}

std::string to_csv(const trace::TraceReport& r) {
  std::string out =
      "rank,step,recorded_s,replayed_s,gpu_busy_s,compute_s,comm_s,overlap_s,exposed_comm_s,kernels,bound\n";
  for (const auto& s : r.steps)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", s.rank, s.step, s.recorded_s,
                       s.replayed_s ? fmt::format("{}", *s.replayed_s) : std::string(), s.gpu_busy_s, s.compute_s,
                       s.comm_s, s.overlap_s, s.exposed_comm_s, s.kernels,
                       s.critical_path ? s.critical_path->bound() : "");
  return out;
}

std::string render(const trace::TraceReport& r, Format format) {
  switch (format) {
    case Format::Json:
      return json_text(to_json(r)) + "\n";
    case Format::Csv:
      return to_csv(r);
    case Format::Table:
      return to_table(r);
  }
  SIM_ASSERT(false, "unhandled format");
}

ordered_json to_json(const trace::ChakraReport& r) {
  ordered_json ranks = ordered_json::array();
  for (const auto& f : r.ranks)
    ranks.push_back({{"path", f.path},
                     {"rank", f.rank},
                     {"nodes", f.nodes},
                     {"compute", f.compute},
                     {"host", f.host},
                     {"collectives", f.collectives},
                     {"p2p", f.p2p},
                     {"missing_deps", f.missing_deps},
                     {"recorded_s", f.recorded_s},
                     {"replayed_s", f.replayed_s}});
  return {{"trainsim_version", TRAINSIM_VERSION},
          {"chakra", r.dir},
          {"step_time_s", r.step_time_s},
          {"collectives", r.collectives},
          {"costed", r.costed},
          {"costed_compute", r.costed_compute},
          {"ranks", std::move(ranks)},
          {"notes", r.notes},
          {"warnings", r.warnings}};
}

namespace {

std::string chakra_table(const trace::ChakraReport& r) {
  std::string out =
      fmt::format("{:<21} {} ({} ranks, {} collectives)\n", "chakra traces", r.dir, r.ranks.size(), r.collectives);
  out += fmt::format("{:<21} {:.6f} s replayed\n", "step time", r.step_time_s);
  out += fmt::format("{:>8} {:>9} {:>9} {:>7} {:>11} {:>6} {:>12} {:>12}\n", "rank", "nodes", "compute", "host",
                     "collectives", "p2p", "recorded s", "replayed s");
  for (const auto& f : r.ranks)
    out += fmt::format("{:>8} {:>9} {:>9} {:>7} {:>11} {:>6} {:>12.6f} {:>12.6f}\n", f.rank, f.nodes, f.compute, f.host,
                       f.collectives, f.p2p, f.recorded_s, f.replayed_s);
  for (const auto& n : r.notes) out += fmt::format("note: {}\n", n);
  return out;
}

}  // namespace

std::string render(const trace::ChakraReport& r, Format format) {
  switch (format) {
    case Format::Json:
      return json_text(to_json(r)) + "\n";
    case Format::Csv:
      throw SpecError("--format", "", "replay --chakra prints a table or JSON, not CSV");
    case Format::Table:
      return chakra_table(r);
  }
  SIM_ASSERT(false, "unhandled format");
}

ordered_json to_json(const trace::CalibrationReport& r, const std::vector<std::string>& traces) {
  auto out = spec::calibration_json(r.calibration);
  out["traces"] = traces;
  ordered_json fits = ordered_json::array();
  for (const auto& c : r.collectives) {
    ordered_json fastest = ordered_json::array();
    for (const auto& [bytes, seconds] : c.fastest) fastest.push_back({bytes, seconds});
    fits.push_back({{"op", c.fit.op},
                    {"group_size", c.fit.group_size},
                    {"median_error", c.median_error},
                    {"envelope_error", c.envelope_error},
                    {"fastest_per_size", std::move(fastest)}});
  }
  out["fit"] = {{"collectives", std::move(fits)}, {"gemm_samples", r.gemm_samples}, {"notes", r.notes}};
  if (const auto& m = r.memory)
    out["fit"]["memory"] = {{"recorded_peak_allocated_bytes", m->recorded_allocated},
                            {"recorded_peak_reserved_bytes", m->recorded_reserved},
                            {"model_live_bytes", m->model_live},
                            {"model_reserved_bytes", m->model_reserved}};
  return out;
}

std::string to_table(const trace::CalibrationReport& r) {
  std::string out = fmt::format("{:<16} {:>6} {:>8} {:>12} {:>14} {:>22} {:>10} {:>10}\n", "collective", "ranks",
                                "samples", "latency", "bandwidth", "sizes", "envelope", "all");
  for (const auto& c : r.collectives)
    out +=
        fmt::format("{:<16} {:>6} {:>8} {:>9.1f} us {:>9.2f} GB/s {:>22} {:>9.1f}% {:>9.1f}%\n", c.fit.op,
                    c.fit.group_size, c.fit.samples, c.fit.latency.seconds() * 1e6, c.fit.bandwidth.bytes_per_s / 1e9,
                    fmt::format("{}–{}", human_bytes(c.fit.min_bytes), human_bytes(c.fit.max_bytes)),
                    c.envelope_error * 100, c.median_error * 100);
  out += "(median |error| of the fit against each size's fastest kernel, and against every kernel)\n";
  if (r.memory) out += memory_lines(*r.memory);
  for (const auto& n : r.notes) out += fmt::format("note: {}\n", n);
  return out;
}

ordered_json to_json(const trace::MicrobenchFit& fit, const std::string& path, const std::string& match) {
  auto out = spec::calibration_json(fit.calibration);
  out["traces"] = {fmt::format("{} (rows of \"{}\")", path, match)};
  ordered_json rows = ordered_json::array();
  double sum = 0;
  for (const auto& r : fit.residuals) {
    rows.push_back({{"what", r.what}, {"measured", r.measured}, {"modelled", r.modelled}, {"error", r.error()}});
    sum += std::abs(r.error());
  }
  out["fit"] = {{"mean_abs_error", fit.residuals.empty() ? 0.0 : sum / static_cast<double>(fit.residuals.size())},
                {"rows", std::move(rows)},
                {"notes", fit.notes}};
  return out;
}

std::string to_table(const trace::MicrobenchFit& fit) {
  std::string out = fmt::format("{:<44} {:>10} {:>10} {:>8}\n", "microbenchmark", "measured", "modelled", "error");
  double sum = 0, worst = 0;
  for (const auto& r : fit.residuals) {
    out += fmt::format("{:<44} {:>10.4g} {:>10.4g} {:>+7.1f}%\n", r.what, r.measured, r.modelled, r.error() * 100);
    sum += std::abs(r.error());
    worst = std::max(worst, std::abs(r.error()));
  }
  if (!fit.residuals.empty())
    out += fmt::format("mean |error| {:.1f}%, worst {:.1f}% over {} rows (TFLOP/s; GB/s for collectives)\n",
                       sum / static_cast<double>(fit.residuals.size()) * 100, worst * 100, fit.residuals.size());
  for (const auto& n : fit.notes) out += fmt::format("note: {}\n", n);
  return out;
}

}  // namespace trainsim::report
