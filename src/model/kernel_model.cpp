#include "trainsim/model/kernel_model.hpp"

#include <algorithm>
#include <cmath>

#include "trainsim/util/error.hpp"

namespace trainsim::model {
namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// The rate compute-bound kernels are measured against: the datasheet peak, sustained.
double peak(const KernelContext& ctx) {
  const auto it = ctx.device->peak_flops.find(ctx.dtype);
  SIM_ASSERT(it != ctx.device->peak_flops.end(), "no peak for the training dtype");
  return it->second.flop_per_s * ctx.tuning.sustained_fraction;
}

double hbm(const KernelContext& ctx) {
  return ctx.device->memory_bandwidth.bytes_per_s * ctx.tuning.hbm_efficiency;
}

double tiles(std::int64_t m, std::int64_t n, std::int64_t count, std::int64_t tm, std::int64_t tn) {
  return ceil_div(static_cast<double>(m), static_cast<double>(tm)) *
         ceil_div(static_cast<double>(n), static_cast<double>(tn)) * static_cast<double>(count);
}

// Wave and tile quantisation with `split` K slices per tile: useful work over the work the
// launched waves could do.
double utilisation(std::int64_t m, std::int64_t n, std::int64_t count, int sms, std::int64_t tm, std::int64_t tn,
                   std::int64_t split) {
  const double units = tiles(m, n, count, tm, tn) * static_cast<double>(split);
  const double waves = ceil_div(units, sms);
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(count) * static_cast<double>(split) /
         (waves * sms * static_cast<double>(tm * tn));
}

// Split-K (cuBLAS's splitKreduce kernels): when the output tiles cannot fill the SMs, the K loop
// is cut into slices computed side by side and summed by a reduction pass. Slices stay at least
// split_k_min_slice deep.
std::int64_t split_k(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, int sms,
                     const spec::KernelTuning& t) {
  const double fewest = std::min(tiles(m, n, count, t.tile_m, t.tile_n), tiles(m, n, count, t.tile_n, t.tile_m));
  if (fewest >= sms) return 1;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(sms / fewest), 1,
                                  std::max<std::int64_t>(k / t.split_k_min_slice, 1));
}

double gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, const KernelContext& ctx) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * count;
  const double compute = flops / (peak(ctx) * gemm_efficiency(m, n, k, count, ctx.device->sms, ctx.tuning));
  const double e = activation_bytes(ctx.dtype);
  const double outputs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(count);
  const double bytes =
      e * count * (static_cast<double>(m) * static_cast<double>(k) + static_cast<double>(k) * static_cast<double>(n)) +
      e * outputs;
  // the split-K reduction writes and reads one fp32 partial per slice
  const auto split = split_k(m, n, k, count, ctx.device->sms, ctx.tuning);
  const double reduce = split > 1 ? 2.0 * 4.0 * outputs * static_cast<double>(split) / hbm(ctx) : 0.0;
  return std::max(compute, bytes / hbm(ctx)) + reduce;
}

double elementwise_seconds(double bytes, const KernelContext& ctx) {
  return bytes / hbm(ctx);
}

// Unfused attention (Megatron-LM before flash attention): Q·Kᵀ and P·V as batched GEMMs, and the
// fused scale-mask-softmax plus dropout as memory-bound passes over the b·a·q·kv scores.
double unfused_attention_seconds(const AttentionCore& a, Pass pass, const KernelContext& ctx, bool dropout) {
  const std::int64_t batch = a.batch * a.heads;
  const double scores = static_cast<double>(batch) * static_cast<double>(a.q_len) * static_cast<double>(a.kv_len);
  const double e = activation_bytes(ctx.dtype);
  const double softmax = (pass == Pass::Forward ? 2 * e : 3 * e) * scores;
  const double drop = dropout ? (2 * e + 1) * scores : 0;
  if (pass == Pass::Forward)
    return gemm_seconds(a.q_len, a.kv_len, a.head_dim, batch, ctx) +
           gemm_seconds(a.q_len, a.head_dim, a.kv_len, batch, ctx) + elementwise_seconds(softmax + drop, ctx);
  // dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q
  return gemm_seconds(a.q_len, a.kv_len, a.head_dim, batch, ctx) +
         gemm_seconds(a.kv_len, a.head_dim, a.q_len, batch, ctx) +
         gemm_seconds(a.q_len, a.head_dim, a.kv_len, batch, ctx) +
         gemm_seconds(a.kv_len, a.head_dim, a.q_len, batch, ctx) + elementwise_seconds(softmax + drop, ctx);
}

// Flash attention computes only the unmasked half of a causal square; its backward recomputes the
// scores: 2.5× the forward's FLOPs.
double flash_attention_seconds(const AttentionCore& a, Pass pass, const KernelContext& ctx) {
  double flops = 4.0 * static_cast<double>(a.batch) * static_cast<double>(a.heads) * static_cast<double>(a.q_len) *
                 static_cast<double>(a.kv_len) * static_cast<double>(a.head_dim);
  if (a.causal) flops *= 0.5;
  if (pass == Pass::Forward) return flops / (peak(ctx) * ctx.tuning.flash_fwd_efficiency);
  return 2.5 * flops / (peak(ctx) * ctx.tuning.flash_bwd_efficiency);
}

}  // namespace

double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, int sms,
                       const spec::KernelTuning& t) {
  const auto split = split_k(m, n, k, count, sms, t);
  const double util = std::max(utilisation(m, n, count, sms, t.tile_m, t.tile_n, split),
                               utilisation(m, n, count, sms, t.tile_n, t.tile_m, split));
  const double slice = static_cast<double>(k) / static_cast<double>(split);
  return t.gemm_ceiling * util * slice / (slice + t.k_overhead);
}

Duration kernel_time(const Op& op, Pass pass, const KernelContext& ctx) {
  SIM_ASSERT(ctx.device != nullptr, "kernel context without a device");
  const double seconds = std::visit(
      [&](const auto& shape) -> double {
        using T = std::decay_t<decltype(shape)>;
        if constexpr (std::is_same_v<T, Gemm>) {
          const auto& g = shape;
          switch (pass) {
            case Pass::Forward:
              return gemm_seconds(g.m, g.n, g.k, g.count, ctx);
            case Pass::BackwardData:
              return gemm_seconds(g.m, g.k, g.n, g.count, ctx);
            case Pass::BackwardWeight:
              return gemm_seconds(g.k, g.n, g.m, g.count, ctx);
          }
          return 0.0;
        } else if constexpr (std::is_same_v<T, AttentionCore>) {
          if (pass == Pass::BackwardWeight) return 0.0;
          return ctx.attention == AttentionKind::Flash ? flash_attention_seconds(shape, pass, ctx)
                                                       : unfused_attention_seconds(shape, pass, ctx, shape.dropout);
        } else {
          if (pass == Pass::BackwardWeight) return 0.0;
          return elementwise_seconds(pass == Pass::Forward ? op.fwd_bytes : op.bwd_bytes, ctx);
        }
      },
      op.shape);
  if (seconds <= 0) return Duration::zero();
  return Duration::from_seconds(seconds) + ctx.tuning.kernel_gap;
}

Duration forward_time(const std::vector<Op>& ops, const KernelContext& ctx) {
  Duration d = Duration::zero();
  for (const auto& op : ops) d += kernel_time(op, Pass::Forward, ctx);
  return d;
}

Duration backward_time(const std::vector<Op>& ops, const KernelContext& ctx) {
  Duration d = Duration::zero();
  for (const auto& op : ops) d += kernel_time(op, Pass::BackwardData, ctx) + kernel_time(op, Pass::BackwardWeight, ctx);
  return d;
}

Duration optimizer_time(double params, spec::Optimizer optimizer, const KernelContext& ctx) {
  // Adam: read gradient (2), master weight (4), m (4), v (4); write master, m, v (12) and the bf16
  // copy (2): 28 bytes. SGD with momentum: 2 + 4 + 4 + 8 + 2 = 20. Then the norm reads the gradients.
  const double step = optimizer == spec::Optimizer::Adam ? 28.0 : 20.0;
  const double norm = 2.0;
  return Duration::from_seconds(params * (step + norm) / hbm(ctx)) + ctx.tuning.kernel_gap * 2;
}

}  // namespace trainsim::model
