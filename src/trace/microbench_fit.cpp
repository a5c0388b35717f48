// Fitting the kernel and collective models of a device to its microbenchmarks: least squares on
// log ratios (every row counts by its relative error), over small grids of the physical
// parameters (docs/model.md "Devices").
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "trainsim/trace/microbench.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

// FlashAttention-2's backward over its forward efficiency on H100 (README charts: 370 TFLOP/s
// forward, 335 forward + backward at head dim 128, 8k tokens): the ratio assumed for kernels
// whose backward no microbenchmark measured.
constexpr double kDefaultBackwardRatio = 0.87;

double sq(double x) {
  return x * x;
}

double log_error(double modelled, double measured) {
  return std::log(modelled / measured);
}

// The minimum of a unimodal function on [lo, hi] by golden-section search.
template <class F>
double golden_minimum(F&& f, double lo, double hi) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi;
  double c = b - g * (b - a), d = a + g * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < 40; ++i) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - g * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + g * (b - a), fd = f(d);
    }
  }
  return (a + b) / 2;
}

// ------------------------------------------------------------------------------------------ GEMMs

bool is_fp8(const GemmBench& g) {
  return g.dtype == spec::Dtype::Fp8;
}

double gemm_loss(const std::vector<GemmBench>& rows, const model::KernelContext& ctx, bool fp8) {
  double loss = 0;
  for (const auto& g : rows)
    if (is_fp8(g) == fp8 && ctx.device->peak_flops.contains(g.dtype))
      loss += sq(log_error(modelled_tflops(g, ctx), g.tflops));
  return loss;
}

// The best ceiling of one dtype class for the rest of the tuning.
double best_ceiling(const std::vector<GemmBench>& rows, model::KernelContext ctx, bool fp8, double& loss) {
  double best = fp8 ? ctx.tuning.fp8_gemm_ceiling : ctx.tuning.gemm_ceiling;
  loss = std::numeric_limits<double>::infinity();
  for (int i = 0; i <= 240; ++i) {
    const double c = 0.40 + 0.0025 * i;
    (fp8 ? ctx.tuning.fp8_gemm_ceiling : ctx.tuning.gemm_ceiling) = c;
    const double l = gemm_loss(rows, ctx, fp8);
    if (l < loss) loss = l, best = c;
  }
  return best;
}

// The ceilings of both dtype classes fitted for the rest of the tuning; returns the loss.
double refit_ceilings(const std::vector<GemmBench>& rows, model::KernelContext& ctx, const bool (&has)[2]) {
  double loss = 0;
  for (const bool fp8 : {false, true}) {
    if (!has[fp8]) continue;
    double l = 0;
    const double c = best_ceiling(rows, ctx, fp8, l);
    (fp8 ? ctx.tuning.fp8_gemm_ceiling : ctx.tuning.gemm_ceiling) = c;
    loss += l;
  }
  return loss;
}

// Coordinate descent over the K overhead, the small tile's rate and the roofline's sharpness, the
// ceilings refitted at every point. (The gap between kernels is not the device's: a microbenchmark
// launches back to back and hides it.)
void fit_gemms(const std::vector<GemmBench>& rows, model::KernelContext ctx, spec::TunableValues& out) {
  const bool has[2] = {std::any_of(rows.begin(), rows.end(), [](const auto& g) { return !is_fp8(g); }),
                       std::any_of(rows.begin(), rows.end(), [](const auto& g) { return is_fp8(g); })};
  double best = refit_ceilings(rows, ctx, has);
  const auto try_value = [&](auto set) {
    auto trial = ctx;
    set(trial.tuning);
    const double l = refit_ceilings(rows, trial, has);
    if (l < best) best = l, ctx = trial;
  };
  for (int round = 0; round < 4; ++round) {
    for (int k0 = 0; k0 <= 1024; k0 += 16) try_value([&](spec::KernelTuning& t) { t.k_overhead = k0; });
    for (int i = 0; i <= 20; ++i) try_value([&](spec::KernelTuning& t) { t.wave_quantization = 0.05 * i; });
    for (int i = 5; i <= 20; ++i) try_value([&](spec::KernelTuning& t) { t.unaligned_efficiency = 0.05 * i; });
    for (int i = 0; i <= 10; ++i)
      try_value([&](spec::KernelTuning& t) { t.small_tile_efficiency = i == 0 ? 0.0 : 0.5 + 0.05 * i; });
    for (const double p : {1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 1000.0})
      try_value([&](spec::KernelTuning& t) { t.roofline_sharpness = p; });
  }
  if (has[0]) out.set("kernels", "gemm_ceiling", ctx.tuning.gemm_ceiling);
  if (has[1]) out.set("kernels", "fp8_gemm_ceiling", ctx.tuning.fp8_gemm_ceiling);
  out.set("kernels", "k_overhead", ctx.tuning.k_overhead);
  out.set("kernels", "small_tile_efficiency", ctx.tuning.small_tile_efficiency);
  out.set("kernels", "wave_quantization", ctx.tuning.wave_quantization);
  out.set("kernels", "unaligned_efficiency", ctx.tuning.unaligned_efficiency);
  out.set("kernels", "roofline_sharpness", ctx.tuning.roofline_sharpness);
}

// -------------------------------------------------------------------------------------- attention

struct ImplKeys {
  spec::AttentionImpl impl;
  const char* prefix;
};
constexpr ImplKeys kImpls[] = {{spec::AttentionImpl::Flash, "flash"},
                               {spec::AttentionImpl::Flash3, "flash3"},
                               {spec::AttentionImpl::Cudnn, "cudnn"},
                               {spec::AttentionImpl::Flash1, "flash1"}};

// One implementation's parameters: forward efficiency at head dim 128, the head-dim factors, the
// backward over forward ratio.
struct ImplFit {
  double fwd = 1, hd64 = 1, hd256 = 1, ratio = kDefaultBackwardRatio;
  bool has64 = false, has128 = false, has256 = false, fitted_ratio = false;
};

void set_impl(spec::KernelTuning& t, spec::AttentionImpl impl, const ImplFit& f) {
  const double bwd = f.fwd * f.ratio;
  switch (impl) {
    case spec::AttentionImpl::Flash3:
      t.flash3_fwd_efficiency = f.fwd, t.flash3_bwd_efficiency = bwd, t.flash3_hd64_factor = f.hd64,
      t.flash3_hd256_factor = f.hd256;
      return;
    case spec::AttentionImpl::Cudnn:
      t.cudnn_fwd_efficiency = f.fwd, t.cudnn_bwd_efficiency = bwd, t.cudnn_hd64_factor = f.hd64,
      t.cudnn_hd256_factor = f.hd256;
      return;
    case spec::AttentionImpl::Flash1:
      t.flash1_fwd_efficiency = f.fwd, t.flash1_bwd_efficiency = bwd, t.flash1_hd64_factor = f.hd64,
      t.flash1_hd256_factor = f.hd256;
      return;
    case spec::AttentionImpl::Triton:  // (no microbenchmark names it: tools/fit-triton fits it on steps)
      t.triton_fwd_efficiency = f.fwd, t.triton_bwd_efficiency = bwd, t.triton_hd64_factor = f.hd64,
      t.triton_hd256_factor = f.hd256;
      return;
    case spec::AttentionImpl::Flash:
    case spec::AttentionImpl::Unfused:
      t.flash_fwd_efficiency = f.fwd, t.flash_bwd_efficiency = bwd, t.flash_hd64_factor = f.hd64,
      t.flash_hd256_factor = f.hd256;
      return;
  }
}

// Log of a row's measured rate over the model's with unit efficiency (forward only) or with the
// forward efficiency 1 and the backward `ratio` (forward + backward).
double log_gap(const AttentionBench& a, model::KernelContext ctx, double ratio) {
  set_impl(ctx.tuning, a.impl, ImplFit{.ratio = ratio});
  return std::log(a.tflops / modelled_tflops(a, ctx));
}

// The implementation's parameters for the sequence terms in `ctx`, and the squared log residuals
// they leave. `shared_ratio`: the backward ratio when the implementation's own rows cannot tell.
ImplFit fit_impl(const std::vector<AttentionBench>& rows, spec::AttentionImpl impl, const model::KernelContext& ctx,
                 double shared_ratio, double& loss) {
  std::vector<const AttentionBench*> fwd, both;
  for (const auto& a : rows)
    if (a.impl == impl) (a.forward_only ? fwd : both).push_back(&a);
  ImplFit f;
  f.ratio = shared_ratio;
  const auto by_head_dim = [&](const std::vector<const AttentionBench*>& list, double ratio) {
    std::map<std::int64_t, std::pair<double, int>> sums;
    for (const auto* a : list) {
      auto& [sum, n] = sums[a->head_dim];
      sum += log_gap(*a, ctx, ratio);
      ++n;
    }
    const auto mean = [&](std::int64_t hd) { return sums[hd].first / sums[hd].second; };
    f.has128 = sums.contains(128), f.has64 = sums.contains(64), f.has256 = sums.contains(256);
    if (!f.has128) return;
    f.fwd = std::exp(mean(128));
    if (f.has64) f.hd64 = std::exp(mean(64) - mean(128));
    if (f.has256) f.hd256 = std::exp(mean(256) - mean(128));
  };
  if (!fwd.empty()) {
    by_head_dim(fwd, f.ratio);
    if (!both.empty()) {  // the forward is known: the combined rows give the backward
      const auto combined_loss = [&](double ratio) {
        ImplFit trial = f;
        trial.ratio = ratio;
        auto t = ctx;
        set_impl(t.tuning, impl, trial);
        double l = 0;
        for (const auto* a : both) l += sq(log_error(modelled_tflops(*a, t), a->tflops));
        return l;
      };
      f.ratio = golden_minimum(combined_loss, 0.3, 1.5);
      f.fitted_ratio = true;
    }
  } else if (!both.empty()) {
    by_head_dim(both, f.ratio);
  }
  auto t = ctx;
  set_impl(t.tuning, impl, f);
  loss = 0;
  for (const auto* list : {&fwd, &both})
    for (const auto* a : *list) loss += sq(log_error(modelled_tflops(*a, t), a->tflops));
  return f;
}

void fit_attention(const std::vector<AttentionBench>& rows, model::KernelContext ctx, spec::TunableValues& out,
                   std::vector<std::string>& notes) {
  double best_loss = std::numeric_limits<double>::infinity();
  spec::KernelTuning best = ctx.tuning;
  std::map<spec::AttentionImpl, ImplFit> best_fits;
  for (int s0 = 0; s0 <= 1000; s0 += 50) {
    for (int c = 70; c <= 100; c += 2) {
      for (int sc = 0; sc <= 2000; sc += 100) {
        ctx.tuning.attention_seq_overhead = s0;
        ctx.tuning.attention_causal_efficiency = c / 100.0;
        ctx.tuning.attention_causal_seq_overhead = sc;
        double loss = 0;
        std::map<spec::AttentionImpl, ImplFit> fits;
        double l = 0;
        // FlashAttention-2 first: its backward ratio serves the others
        fits[spec::AttentionImpl::Flash] = fit_impl(rows, spec::AttentionImpl::Flash, ctx, kDefaultBackwardRatio, l);
        loss += l;
        const double ratio = fits[spec::AttentionImpl::Flash].fitted_ratio ? fits[spec::AttentionImpl::Flash].ratio
                                                                           : kDefaultBackwardRatio;
        for (const auto impl : {spec::AttentionImpl::Flash3, spec::AttentionImpl::Cudnn}) {
          fits[impl] = fit_impl(rows, impl, ctx, ratio, l);
          loss += l;
        }
        if (loss < best_loss) best_loss = loss, best = ctx.tuning, best_fits = fits;
      }
    }
  }
  // FlashAttention v1 at the sequence terms the current kernels chose (its older kernel does not
  // choose them), with FlashAttention-2's backward ratio unless its own rows tell
  {
    auto t = ctx;
    t.tuning = best;
    const auto& flash = best_fits[spec::AttentionImpl::Flash];
    double l = 0;
    best_fits[spec::AttentionImpl::Flash1] =
        fit_impl(rows, spec::AttentionImpl::Flash1, t, flash.fitted_ratio ? flash.ratio : kDefaultBackwardRatio, l);
  }
  out.set("kernels", "attention_seq_overhead", best.attention_seq_overhead);
  out.set("kernels", "attention_causal_efficiency", best.attention_causal_efficiency);
  out.set("kernels", "attention_causal_seq_overhead", best.attention_causal_seq_overhead);
  for (const auto& [impl, prefix] : kImpls) {
    const auto& f = best_fits[impl];
    if (!f.has128) continue;
    const std::string p(prefix);
    out.set("kernels", p + "_fwd_efficiency", f.fwd);
    out.set("kernels", p + "_bwd_efficiency", f.fwd * f.ratio);
    if (f.has64) out.set("kernels", p + "_hd64_factor", f.hd64);
    if (f.has256) out.set("kernels", p + "_hd256_factor", f.hd256);
    notes.push_back(fmt::format("{}: forward {:.3f} of peak at head dim 128, backward {:.3f} ({})", p, f.fwd,
                                f.fwd * f.ratio, f.fitted_ratio ? "fitted" : "FlashAttention-2's ratio assumed"));
  }
}

// ------------------------------------------------------------------------------------ collectives

// The smallest collective of the sizes a training step moves in bulk.
constexpr std::int64_t kTrainingCollectiveBytes = std::int64_t{1} << 20;

double collective_loss(const std::vector<CollectiveBench>& rows, const CostModelFactory& factory,
                       const cost::CollectiveTuning& tuning) {
  const auto costs = factory(tuning);
  double loss = 0;
  for (const auto& a : rows) loss += sq(log_error(modelled_busbw(a, *costs), a.busbw_Bps));
  return loss;
}

// Coordinate descent over the launch cost and, when a sweep forced in-switch reduction, its
// latency, efficiency and pipelining channels.
void fit_collectives(const std::vector<CollectiveBench>& rows, const CostModelFactory& factory,
                     cost::CollectiveTuning tuning, spec::TunableValues& out) {
  // NCCL's own choice ("auto") may be in-switch reduction too: fit its parameters whenever the
  // model reaches for it
  const bool nvls = std::any_of(rows.begin(), rows.end(), [&](const auto& a) {
    return a.algorithm == "nvls" ||
           factory(tuning)
                   ->cost(cost::make_collective(a.op, Bytes{a.bytes}),
                          [&] {
                            cost::Group g;
                            for (int d = 0; d < a.gpus; ++d)
                              g.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(d)});
                            return g;
                          }())
                   .algorithm == "nvls";
  });
  double best = collective_loss(rows, factory, tuning);
  for (int round = 0; round < 4; ++round) {
    for (int us = 0; us <= 60; ++us) {
      auto t = tuning;
      t.launch = microseconds(us);
      if (const double l = collective_loss(rows, factory, t); l < best) best = l, tuning = t;
    }
    if (!nvls) continue;
    for (int us = 0; us <= 40; ++us) {
      auto t = tuning;
      t.in_switch_latency = microseconds(us);
      if (const double l = collective_loss(rows, factory, t); l < best) best = l, tuning = t;
    }
    for (int i = 0; i <= 80; ++i) {
      auto t = tuning;
      t.in_switch_efficiency = 0.45 + 0.005 * i;
      if (const double l = collective_loss(rows, factory, t); l < best) best = l, tuning = t;
    }
    for (int channels = 1; channels <= 32; ++channels) {
      auto t = tuning;
      t.in_switch_channels = channels;
      if (const double l = collective_loss(rows, factory, t); l < best) best = l, tuning = t;
    }
  }
  out.set("collectives", "launch", tuning.launch.seconds());
  if (nvls) {
    out.set("collectives", "in_switch_latency", tuning.in_switch_latency.seconds());
    out.set("collectives", "in_switch_efficiency", tuning.in_switch_efficiency);
    out.set("collectives", "in_switch_channels", static_cast<double>(tuning.in_switch_channels));
  }
}

}  // namespace

MicrobenchFit fit_microbenchmarks(const Microbenchmarks& bench, const spec::DeviceSpec& device,
                                  const spec::Tunables& start, const CostModelFactory& node_costs) {
  MicrobenchFit fit;
  auto& values = fit.calibration.values;
  model::KernelContext ctx{.device = &device, .tuning = start.kernels};
  if (bench.triad_Bps) {
    values.set("kernels", "hbm_efficiency", *bench.triad_Bps / device.memory_bandwidth.bytes_per_s);
    fit.residuals.push_back(
        {"HBM STREAM triad", *bench.triad_Bps / 1e12,
         device.memory_bandwidth.bytes_per_s / 1e12 * *bench.triad_Bps / device.memory_bandwidth.bytes_per_s});
  }
  if (!bench.gemms.empty()) fit_gemms(bench.gemms, ctx, values);
  spec::Tunables tuned = start;
  values.apply(tuned);
  ctx.tuning = tuned.kernels;
  if (!bench.attention.empty()) fit_attention(bench.attention, ctx, values, fit.notes);
  values.apply(tuned);
  if (node_costs && !bench.collectives.empty()) {
    // fitted on the sizes training moves (1 MiB and up: tensor-parallel activations, gradient
    // buckets); below, the latency the fit gives is kept and the residuals say how it does
    std::vector<CollectiveBench> training_sizes;
    for (const auto& a : bench.collectives)
      if (a.bytes >= kTrainingCollectiveBytes) training_sizes.push_back(a);
    fit_collectives(training_sizes.empty() ? bench.collectives : training_sizes, node_costs, tuned.collectives, values);
    values.apply(tuned);
  }

  ctx.tuning = tuned.kernels;
  for (const auto& g : bench.gemms)
    fit.residuals.push_back(
        {fmt::format("{} GEMM {}x{}x{}", spec::dtype_name(g.dtype), g.m, g.n, g.k), g.tflops, modelled_tflops(g, ctx)});
  for (const auto& a : bench.attention)
    fit.residuals.push_back(
        {fmt::format("{} {} hd{} s{}{}", spec::attention_name(a.impl), a.forward_only ? "fwd" : "fwd+bwd", a.head_dim,
                     a.seq_len, a.causal ? " causal" : ""),
         a.tflops, modelled_tflops(a, ctx)});
  if (node_costs) {
    const auto costs = node_costs(tuned.collectives);
    for (const auto& a : bench.collectives)
      fit.residuals.push_back(
          {fmt::format("{} {} GPUs {} {} B", cost::collective_name(a.op), a.gpus, a.algorithm, a.bytes),
           a.busbw_Bps / 1e9, modelled_busbw(a, *costs) / 1e9});
  }
  for (const auto& s : bench.skipped) fit.notes.push_back("skipped " + s);
  return fit;
}

}  // namespace trainsim::trace
