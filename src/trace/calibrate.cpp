// Fitting the models' physical parameters to what traces recorded.
//
// Collectives: per operation and group size, time = latency + bytes / bandwidth. One rank's NCCL
// kernel also lasts while it waits for late peers, which only ever adds time, so each message size
// contributes its fastest instance (the lower envelope) to a least-squares line.
//
// GEMMs: the matrix products the profiler recorded with shapes (aten::mm, addmm, bmm, baddbmm),
// each timed by the kernels launched inside it, give the sustained fraction of the kernel model:
// the value whose predicted durations match the recorded ones best (least squares on the log
// ratio, weighted by FLOPs, over each shape's fastest instance of at least 1 GFLOP).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/model/kernel_model.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/trace/microbench.hpp"

namespace trainsim::trace {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Sample {
  std::int64_t bytes;
  double seconds;
};

std::optional<CollectiveFitReport> fit_collective(const std::string& op, int group_size,
                                                  const std::vector<Sample>& samples, std::vector<std::string>& notes) {
  std::map<std::int64_t, double> fastest;
  for (const auto& s : samples) {
    auto [it, inserted] = fastest.try_emplace(s.bytes, s.seconds);
    if (!inserted) it->second = std::min(it->second, s.seconds);
  }
  double latency = 0;
  double per_byte = 0;
  if (fastest.size() >= 2) {
    double sx = 0, sy = 0;
    for (const auto& [x, y] : fastest) {
      sx += static_cast<double>(x);
      sy += y;
    }
    const double n = static_cast<double>(fastest.size());
    const double mx = sx / n, my = sy / n;
    double sxy = 0, sxx = 0;
    for (const auto& [x, y] : fastest) {
      sxy += (static_cast<double>(x) - mx) * (y - my);
      sxx += (static_cast<double>(x) - mx) * (static_cast<double>(x) - mx);
    }
    per_byte = sxx > 0 ? sxy / sxx : 0;
    latency = my - per_byte * mx;
    if (per_byte <= 0 || latency < 0) {
      // no usable line: through the origin instead
      double xy = 0, xx = 0;
      for (const auto& [x, y] : fastest) {
        xy += static_cast<double>(x) * y;
        xx += static_cast<double>(x) * static_cast<double>(x);
      }
      latency = 0;
      per_byte = xy / xx;
      notes.push_back(
          fmt::format("{} on {} ranks: sizes too few or too noisy for a latency; fitted through zero", op, group_size));
    }
  } else {
    const auto& [x, y] = *fastest.begin();
    per_byte = y / static_cast<double>(x);
    notes.push_back(fmt::format("{} on {} ranks: one message size; bandwidth only (latency 0)", op, group_size));
  }
  if (!(per_byte > 0)) return std::nullopt;
  CollectiveFitReport r;
  r.fit.op = op;
  r.fit.group_size = group_size;
  r.fit.latency = Duration::from_seconds(latency);
  r.fit.bandwidth = Bandwidth{1.0 / per_byte};
  r.fit.samples = static_cast<std::int64_t>(samples.size());
  r.fit.min_bytes = Bytes{fastest.begin()->first};
  r.fit.max_bytes = Bytes{fastest.rbegin()->first};
  const auto predict = [&](std::int64_t bytes) { return latency + per_byte * static_cast<double>(bytes); };
  std::vector<double> all, envelope;
  for (const auto& s : samples) all.push_back(std::abs(predict(s.bytes) / s.seconds - 1));
  for (const auto& [x, y] : fastest) {
    envelope.push_back(std::abs(predict(x) / y - 1));
    r.fastest.emplace_back(x, y);
  }
  r.median_error = median(all);
  r.envelope_error = median(envelope);
  return r;
}

// FLOPs of a recorded matrix product from its input shapes.
std::optional<model::Gemm> gemm_of(std::string_view name, const std::vector<std::vector<std::int64_t>>& dims) {
  for (const auto& d : dims)
    for (const auto x : d)
      if (x <= 0 || x > (std::int64_t{1} << 32)) return std::nullopt;  // not a recorded product's shape
  const auto two = [](const std::vector<std::int64_t>& d) { return d.size() == 2; };
  const auto three = [](const std::vector<std::int64_t>& d) { return d.size() == 3; };
  if (name == "aten::mm" && dims.size() >= 2 && two(dims[0]) && two(dims[1]))
    return model::Gemm{dims[0][0], dims[1][1], dims[0][1], 1};
  if (name == "aten::addmm" && dims.size() >= 3 && two(dims[1]) && two(dims[2]))
    return model::Gemm{dims[1][0], dims[2][1], dims[1][1], 1};
  if (name == "aten::bmm" && dims.size() >= 2 && three(dims[0]) && three(dims[1]))
    return model::Gemm{dims[0][1], dims[1][2], dims[0][2], dims[0][0]};
  if (name == "aten::baddbmm" && dims.size() >= 3 && three(dims[1]) && three(dims[2]))
    return model::Gemm{dims[1][1], dims[2][2], dims[1][2], dims[1][0]};
  return std::nullopt;
}

constexpr double kMinGemmFlops = 1e9;

// The operands' dtype of a recorded product ("Input type" of its first matrix: the second argument
// of addmm and baddbmm, after the bias). nullopt for types no tensor core runs (double, integers);
// fp32 when the profiler recorded none (counted in `untyped`).
std::optional<spec::Dtype> operand_dtype(std::string_view name, const std::vector<std::string>& types,
                                         std::int64_t& untyped) {
  const std::size_t index = name == "aten::addmm" || name == "aten::baddbmm" ? 1 : 0;
  if (index >= types.size() || types[index].empty()) {
    ++untyped;
    return spec::Dtype::Fp32;
  }
  const auto& type = types[index];
  if (type == "float") return spec::Dtype::Fp32;
  if (type == "c10::BFloat16") return spec::Dtype::Bf16;
  if (type == "c10::Half") return spec::Dtype::Fp16;
  return std::nullopt;
}

struct GemmSample {
  model::Gemm shape;
  spec::Dtype dtype;
  double seconds;
  double flops;
  const RankTrace* trace;
};

std::vector<GemmSample> gemm_samples(const RankTrace& t, std::int64_t& untyped) {
  std::map<std::int64_t, std::vector<std::size_t>> launched_ops;  // correlation -> GPU ops
  for (std::size_t i = 0; i < t.gpu.size(); ++i)
    if (t.gpu[i].kind == GpuKind::Kernel && !t.gpu[i].collective) launched_ops[t.gpu[i].correlation].push_back(i);
  std::vector<GemmSample> out;
  std::size_t next_call = 0;
  for (const auto& op : t.cpu_ops) {
    const auto name = t.names.at(op.name);
    const auto shape = gemm_of(name, op.input_dims);
    if (!shape) continue;
    const auto dtype = operand_dtype(name, op.input_types, untyped);
    if (!dtype) continue;
    // the kernels launched by the op's thread while it ran
    while (next_call < t.runtime.size() && t.runtime[next_call].start_ns < op.start_ns) ++next_call;
    double seconds = 0;
    for (std::size_t c = next_call; c < t.runtime.size() && t.runtime[c].start_ns <= op.end_ns(); ++c) {
      if (t.runtime[c].thread != op.thread) continue;
      if (const auto it = launched_ops.find(t.runtime[c].correlation); it != launched_ops.end())
        for (const auto i : it->second) seconds += static_cast<double>(t.gpu[i].dur_ns) * 1e-9;
    }
    const double flops = 2.0 * static_cast<double>(shape->m) * static_cast<double>(shape->n) *
                         static_cast<double>(shape->k) * static_cast<double>(shape->count);
    if (seconds > 0 && flops > 0) out.push_back({*shape, *dtype, seconds, flops, &t});
  }
  return out;
}

}  // namespace

namespace {

// Collectives: latency and bandwidth per operation and group size, from each size's fastest kernel.
void fit_collectives(const std::vector<RankTrace>& traces, CalibrationReport& report) {
  std::map<std::pair<std::string, int>, std::vector<Sample>> samples;
  std::int64_t unsized = 0;
  for (const auto& t : traces) {
    for (const auto& g : t.gpu) {
      if (!g.collective) continue;
      const auto bytes = g.collective->bytes();
      if (bytes <= 0 || g.collective->group_size < 2) {
        ++unsized;
        continue;
      }
      samples[{g.collective->op, g.collective->group_size}].push_back({bytes, static_cast<double>(g.dur_ns) * 1e-9});
    }
  }
  if (unsized > 0)
    report.notes.push_back(fmt::format("{} NCCL kernel(s) without size or group metadata left out", unsized));
  for (const auto& [key, list] : samples) {
    if (auto fit = fit_collective(key.first, key.second, list, report.notes)) {
      report.calibration.fits.push_back(fit->fit);
      report.collectives.push_back(std::move(*fit));
    }
  }
}

// Each shape's fastest instance of at least kMinGemmFlops: the others ran beside other kernels or
// waited (as with the collectives' lower envelope); small products are launch- and latency-bound,
// not a test of the sustained rate.
std::vector<GemmSample> fastest_gemms(const std::vector<RankTrace>& traces, CalibrationReport& report) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, spec::Dtype>, GemmSample> fastest;
  std::int64_t untyped = 0;
  for (const auto& t : traces) {
    for (auto& s : gemm_samples(t, untyped)) {
      if (s.flops < kMinGemmFlops) continue;
      const auto key = std::tuple(s.shape.m, s.shape.n, s.shape.k, s.shape.count, s.dtype);
      auto [it, inserted] = fastest.try_emplace(key, s);
      if (!inserted && s.seconds < it->second.seconds) it->second = s;
    }
  }
  if (untyped > 0)
    report.notes.push_back(fmt::format("{} matrix product(s) without a recorded input type: taken as fp32", untyped));
  std::vector<GemmSample> gemms;
  for (const auto& [key, s] : fastest) gemms.push_back(s);
  return gemms;
}

// The peak a product's kernels may reach: fp32 products on tensor cores when TF32 is allowed.
std::optional<double> fastest_peak(const spec::DeviceSpec& device, spec::Dtype dtype) {
  const auto peak = [&](spec::Dtype d) -> std::optional<double> {
    const auto it = device.peak_flops.find(d);
    return it != device.peak_flops.end() ? std::optional(it->second.flop_per_s) : std::nullopt;
  };
  if (dtype == spec::Dtype::Fp32)
    if (const auto tf32 = peak(spec::Dtype::Tf32)) return tf32;
  return peak(dtype);
}

// A recorded product faster than the device can multiply (beyond the boost clock's 10%; H100 SXM's
// 1,980 MHz against the 1,830 its peak is quoted at) was recorded on another device than -t's.
void check_physical(const std::vector<GemmSample>& gemms, const spec::ClusterSpec& cluster) {
  for (const auto& g : gemms) {
    const auto peak = fastest_peak(cluster.device, g.dtype);
    const auto what = [&] {
      return fmt::format("a {} matrix product {}x{}x{}{}", spec::dtype_name(g.dtype), g.shape.m, g.shape.n, g.shape.k,
                         g.shape.count > 1 ? fmt::format(" (batch {})", g.shape.count) : "");
    };
    if (!peak)
      throw SpecError(g.trace->path, "",
                      fmt::format("{}, which {} (-t {}) cannot run: recorded on another device?", what(),
                                  cluster.device.name, cluster.name));
    if (const double rate = g.flops / g.seconds; rate > *peak * kBoostClockMargin)
      throw SpecError(g.trace->path, "",
                      fmt::format("{} ran at {:.4g} TFLOP/s, above {}'s peak of {:.4g} (-t {}): recorded on another "
                                  "device?",
                                  what(), rate / 1e12, cluster.device.name, *peak / 1e12, cluster.name));
  }
}

// The sustained fraction of the kernel model that best matches the recorded products (least squares
// on the log ratio, weighted by FLOPs). Half-precision products run at their dtype's peak; fp32
// products on CUDA cores or, with TF32 allowed, on tensor cores: the search runs against either.
void fit_gemm(const std::vector<GemmSample>& gemms, const spec::DeviceSpec& device, CalibrationReport& report) {
  const auto loss = [&](spec::Dtype fp32_as, double fraction) {
    double sum = 0, weight = 0;
    for (const auto& g : gemms) {
      model::KernelContext ctx{.device = &device, .dtype = g.dtype == spec::Dtype::Fp32 ? fp32_as : g.dtype};
      ctx.tuning.sustained_fraction = fraction;
      const model::Op op{.name = "gemm", .shape = g.shape, .fwd_flops = g.flops};
      const double predicted = model::kernel_time(op, model::Pass::Forward, ctx).seconds();
      const double e = std::log(predicted / g.seconds);
      sum += g.flops * e * e;
      weight += g.flops;
    }
    return sum / weight;
  };
  const bool fp32 = std::any_of(gemms.begin(), gemms.end(), [](const auto& g) { return g.dtype == spec::Dtype::Fp32; });
  std::optional<std::pair<spec::Dtype, double>> best;
  double best_loss = 0;
  for (const auto fp32_as : {spec::Dtype::Fp32, spec::Dtype::Tf32}) {
    if (fp32 && !device.peak_flops.contains(fp32_as)) continue;
    for (int i = 1; i <= 200; ++i) {
      const double f = 0.005 * i;
      const double l = loss(fp32_as, f);
      if (!best || l < best_loss) {
        best_loss = l;
        best = {fp32_as, f};
      }
    }
  }
  if (!best) {
    report.notes.push_back("the device has neither an fp32 nor a tf32 peak: GEMM efficiency not fitted");
    return;
  }
  std::map<spec::Dtype, std::int64_t> by_dtype;
  for (const auto& g : gemms) ++by_dtype[g.dtype == spec::Dtype::Fp32 ? best->first : g.dtype];
  std::vector<std::string> counts;
  for (const auto& [dtype, n] : by_dtype) counts.push_back(fmt::format("{} {}", n, spec::dtype_name(dtype)));
  report.calibration.values.set("kernels", "sustained_fraction", best->second);
  report.notes.push_back(fmt::format(
      "sustained_fraction {:.3f} of the peak from {} matrix product shapes ({}; {:.3g} GFLOP), rms log error {:.3f}",
      best->second, gemms.size(), fmt::join(counts, ", "), report.gemm_flops * 1e-9, std::sqrt(best_loss)));
  if (best->second >= 1.0)
    report.notes.push_back(
        "the fraction is at its bound of 1: the recorded products run faster than the kernel model's microbenchmark "
        "rate, a device's tunables (kernels.gemm_ceiling) to revisit");
}

}  // namespace

CalibrationReport calibrate(const std::vector<RankTrace>& traces, const std::optional<spec::ClusterSpec>& cluster,
                            bool memory_fit) {
  CalibrationReport report;
  fit_collectives(traces, report);
  // a calibration that fits nothing would write defaults as if they were measured
  const auto nothing = [&](std::string_view why) {
    const auto where = traces.size() == 1 ? traces.front().path : fmt::format("{} traces", traces.size());
    return SpecError(where, "", fmt::format("nothing to fit: no NCCL kernels with sizes (the profiler's \"In msg "
                                            "nelems\" and \"Group size\"), and {}",
                                            why));
  };
  if (memory_fit && report.collectives.empty())
    report.notes.push_back("no NCCL kernels with sizes: no collective fitted");
  if (!cluster) {
    if (report.collectives.empty() && !memory_fit) throw nothing("no topology to fit GEMMs against (-t)");
    report.notes.push_back("no topology given: the GEMM efficiency is not fitted (pass -t for the device's peak)");
    return report;
  }
  const auto gemms = fastest_gemms(traces, report);
  check_physical(gemms, *cluster);
  report.gemm_samples = static_cast<std::int64_t>(gemms.size());
  for (const auto& g : gemms) report.gemm_flops += g.flops;
  if (gemms.empty()) {
    if (report.collectives.empty() && !memory_fit)
      throw nothing("no matrix product of 1 GFLOP or more with recorded shapes");
    report.notes.push_back("no matrix product of 1 GFLOP or more with recorded shapes: GEMM efficiency not fitted");
    return report;
  }
  fit_gemm(gemms, cluster->device, report);
  return report;
}

}  // namespace trainsim::trace
