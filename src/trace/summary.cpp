#include <algorithm>
#include <map>

#include "trace/intervals.hpp"
#include "trainsim/trace/analysis.hpp"

namespace trainsim::trace {

std::vector<std::vector<std::size_t>> ops_by_step(const RankTrace& t) {
  std::map<std::int64_t, std::int64_t> launch_start;
  for (const auto& r : t.runtime)
    if (r.correlation >= 0) launch_start.emplace(r.correlation, r.start_ns);
  std::vector<std::vector<std::size_t>> out(t.steps.size());
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    const auto& g = t.gpu[i];
    const auto it = launch_start.find(g.correlation);
    const std::int64_t anchor = it != launch_start.end() ? it->second : g.start_ns;
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      if (anchor >= t.steps[s].start_ns && anchor < t.steps[s].end_ns()) {
        out[s].push_back(i);
        break;
      }
    }
  }
  return out;
}

StepFigures recorded_step(const RankTrace& t, std::size_t step, const std::vector<std::size_t>& ops) {
  StepFigures f;
  f.rank = t.rank;
  f.step = t.steps[step].number;
  f.recorded_s = static_cast<double>(t.steps[step].dur_ns) * 1e-9;
  Intervals all, compute, comm;
  for (const auto i : ops) {
    const auto& g = t.gpu[i];
    all.add(g.start_ns, g.end_ns());
    if (g.collective) {
      comm.add(g.start_ns, g.end_ns());
      ++f.nccl_kernels;
    } else {
      compute.add(g.start_ns, g.end_ns());
    }
    if (g.kind == GpuKind::Kernel) ++f.kernels;
  }
  f.gpu_busy_s = all.length() * 1e-9;
  f.compute_s = compute.length() * 1e-9;
  f.comm_s = comm.length() * 1e-9;
  f.overlap_s = overlap(compute, comm) * 1e-9;
  f.exposed_comm_s = f.comm_s - f.overlap_s;
  const auto& st = t.steps[step];
  for (const auto& m : t.memory) {
    if (m.ts_ns < st.start_ns || m.ts_ns > st.end_ns()) continue;
    f.peak_allocated = std::max(f.peak_allocated.value_or(0), m.allocated);
    f.peak_reserved = std::max(f.peak_reserved.value_or(0), m.reserved);
  }
  return f;
}

double MemoryComparison::allocated_error() const {
  return static_cast<double>(model_live) / static_cast<double>(recorded_allocated) - 1;
}

double MemoryComparison::reserved_error() const {
  return static_cast<double>(model_reserved) / static_cast<double>(recorded_reserved) - 1;
}

std::optional<std::pair<std::int64_t, std::int64_t>> recorded_memory_peaks(const std::vector<RankTrace>& traces) {
  std::optional<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& t : traces)
    for (const auto& m : t.memory) {
      const bool in_step = t.steps.empty() || std::any_of(t.steps.begin(), t.steps.end(), [&](const auto& s) {
                             return m.ts_ns >= s.start_ns && m.ts_ns <= s.end_ns();
                           });
      if (!in_step) continue;
      if (!out) out.emplace(0, 0);
      out->first = std::max(out->first, m.allocated);
      out->second = std::max(out->second, m.reserved);
    }
  return out;
}

void add_file_and_collectives(const RankTrace& t, TraceReport& r) {
  FileFigures file{.path = t.path,
                   .rank = t.rank,
                   .world_size = t.world_size,
                   .device = t.device,
                   .events = t.events,
                   .warnings = t.warnings};
  std::map<std::int64_t, std::int64_t> per_stream;
  for (const auto& g : t.gpu) {
    if (g.kind != GpuKind::Kernel) continue;
    ++file.kernels;
    ++per_stream[g.stream];
    if (!g.collective) continue;
    ++file.nccl_kernels;
    const auto& c = *g.collective;
    auto it = std::find_if(r.collectives.begin(), r.collectives.end(),
                           [&](const CollectiveTotals& x) { return x.op == c.op && x.group_size == c.group_size; });
    if (it == r.collectives.end()) it = r.collectives.insert(r.collectives.end(), {c.op, c.group_size});
    ++it->count;
    if (c.bytes() >= 0)
      it->bytes += c.bytes();
    else
      ++it->unsized;
    it->time_s += static_cast<double>(g.dur_ns) * 1e-9;
  }
  file.kernels_per_stream.assign(per_stream.begin(), per_stream.end());
  r.kernels += file.kernels;
  r.nccl_kernels += file.nccl_kernels;
  r.files.push_back(std::move(file));
}

TraceReport summarize(const std::vector<RankTrace>& traces) {
  TraceReport r;
  for (const auto& t : traces) {
    add_file_and_collectives(t, r);
    const auto steps = ops_by_step(t);
    for (std::size_t s = 0; s < t.steps.size(); ++s) r.steps.push_back(recorded_step(t, s, steps[s]));
  }
  std::sort(r.collectives.begin(), r.collectives.end(), [](const CollectiveTotals& a, const CollectiveTotals& b) {
    return std::tie(a.op, a.group_size) < std::tie(b.op, b.group_size);
  });
  return r;
}

}  // namespace trainsim::trace
