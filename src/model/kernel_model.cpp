#include "trainsim/model/kernel_model.hpp"

#include <algorithm>
#include <cmath>

#include "trainsim/model/memory.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::model {
namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

double hbm(const KernelContext& ctx) {
  return ctx.device->memory_bandwidth.bytes_per_s * ctx.tuning.hbm_efficiency;
}

double tiles(std::int64_t m, std::int64_t n, std::int64_t count, std::int64_t tm, std::int64_t tn) {
  return ceil_div(static_cast<double>(m), static_cast<double>(tm)) *
         ceil_div(static_cast<double>(n), static_cast<double>(tn)) * static_cast<double>(count);
}

// Wave and tile quantisation with `split` K slices per tile: useful work over the work the
// launched waves could do. A partly filled last wave costs `quantization` of a whole one
// (1: classical waves; less where persistent, stream-K kernels share the last wave's work).
double utilisation(std::int64_t m, std::int64_t n, std::int64_t count, int sms, std::int64_t tm, std::int64_t tn,
                   std::int64_t split, double quantization) {
  const double units = tiles(m, n, count, tm, tn) * static_cast<double>(split);
  const double exact = units / sms;
  const double waves = exact + quantization * (std::ceil(exact) - exact);
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(count) * static_cast<double>(split) /
         (waves * sms * static_cast<double>(tm * tn));
}

// Split-K (cuBLAS's splitKreduce kernels): when the output tiles cannot fill the SMs, the K loop
// is cut into slices computed side by side and summed by a reduction pass. Slices stay at least
// split_k_min_slice deep.
std::int64_t split_k(double output_tiles, std::int64_t k, int sms, const spec::KernelTuning& t) {
  if (output_tiles >= sms) return 1;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(sms / output_tiles), 1,
                                  std::max<std::int64_t>(k / t.split_k_min_slice, 1));
}

// The tile cuBLAS would pick: the large tile in either orientation, or a square one of tile_m
// (which fits small outputs better at small_tile_efficiency of the large tile's rate), whichever
// computes the product fastest; and its split-K.
struct TileChoice {
  double efficiency = 0;  // of the dtype's ceiling
  std::int64_t split = 1;
};

TileChoice choose_tile(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, int sms,
                       const spec::KernelTuning& t) {
  struct Candidate {
    std::int64_t tm, tn;
    double factor;
  };
  const Candidate candidates[] = {
      {t.tile_m, t.tile_n, 1.0}, {t.tile_n, t.tile_m, 1.0}, {t.tile_m, t.tile_m, t.small_tile_efficiency}};
  TileChoice best;
  for (const auto& c : candidates) {
    const auto split = split_k(tiles(m, n, count, c.tm, c.tn), k, sms, t);
    const double slice = static_cast<double>(k) / static_cast<double>(split);
    const double e = c.factor * utilisation(m, n, count, sms, c.tm, c.tn, split, t.wave_quantization) * slice /
                     (slice + t.k_overhead);
    if (e > best.efficiency) best = {e, split};
  }
  return best;
}

// A kernel bound by both its arithmetic and its memory traffic overlaps them imperfectly: the
// p-norm of the two times (p → ∞ is the roofline's max).
double overlap(double compute, double memory, double p) {
  const double top = std::max(compute, memory);
  if (top <= 0) return 0;
  return top * std::pow(std::pow(compute / top, p) + std::pow(memory / top, p), 1.0 / p);
}

double ceiling(const KernelContext& ctx, spec::Dtype dtype) {
  return dtype == spec::Dtype::Fp8 ? ctx.tuning.fp8_gemm_ceiling : ctx.tuning.gemm_ceiling;
}

// C[m×n] = A[m×k]·B[k×n] with operands in `dtype`.
double gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, spec::Dtype dtype,
                    const KernelContext& ctx) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * count;
  const auto tile = choose_tile(m, n, k, count, ctx.device->sms, ctx.tuning);
  // tensor-core kernels load 16-byte-aligned rows; other shapes fall back to slower kernels
  const std::int64_t align = 16 / spec::dtype_bytes(dtype);
  const bool aligned = m % align == 0 && n % align == 0 && k % align == 0;
  const double compute = flops / (sustained_peak(ctx, dtype) * ceiling(ctx, dtype) * tile.efficiency *
                                  (aligned ? 1.0 : ctx.tuning.unaligned_efficiency));
  // operands in the GEMM's dtype (FP8 operands are 1 byte), output in the activations' dtype
  const double in = spec::dtype_bytes(dtype == spec::Dtype::Fp8 ? spec::Dtype::Fp8 : ctx.dtype);
  const double out = activation_bytes(ctx.dtype);
  const double outputs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(count);
  const double bytes =
      in * count * (static_cast<double>(m) * static_cast<double>(k) + static_cast<double>(k) * static_cast<double>(n)) +
      out * outputs;
  // the split-K reduction writes and reads one fp32 partial per slice
  const double reduce = tile.split > 1 ? 2.0 * 4.0 * outputs * static_cast<double>(tile.split) / hbm(ctx) : 0.0;
  return overlap(compute, bytes / hbm(ctx), ctx.tuning.roofline_sharpness) + reduce;
}

double elementwise_seconds(double bytes, const KernelContext& ctx) {
  return bytes / hbm(ctx);
}

// Unfused attention (Megatron-LM before flash attention): Q·Kᵀ and P·V as batched GEMMs, and the
// fused scale-mask-softmax plus dropout as memory-bound passes over the b·a·q·kv scores.
double unfused_attention_seconds(const AttentionCore& a, Pass pass, const KernelContext& ctx, bool dropout) {
  const auto dt = ctx.dtype;  // the batched GEMMs of the attention core stay in the activations' dtype
  const std::int64_t batch = a.batch * a.heads;
  const double scores = static_cast<double>(batch) * static_cast<double>(a.q_len) * static_cast<double>(a.kv_len);
  const double e = activation_bytes(ctx.dtype);
  const double softmax = (pass == Pass::Forward ? 2 * e : 3 * e) * scores;
  const double drop = dropout ? (2 * e + 1) * scores : 0;
  if (pass == Pass::Forward)
    return gemm_seconds(a.q_len, a.kv_len, a.head_dim, batch, dt, ctx) +
           gemm_seconds(a.q_len, a.head_dim, a.kv_len, batch, dt, ctx) + elementwise_seconds(softmax + drop, ctx);
  // dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q
  return gemm_seconds(a.q_len, a.kv_len, a.head_dim, batch, dt, ctx) +
         gemm_seconds(a.kv_len, a.head_dim, a.q_len, batch, dt, ctx) +
         gemm_seconds(a.q_len, a.head_dim, a.kv_len, batch, dt, ctx) +
         gemm_seconds(a.kv_len, a.head_dim, a.q_len, batch, dt, ctx) + elementwise_seconds(softmax + drop, ctx);
}

// Fused attention computes only the unmasked half of a causal square; its backward recomputes the
// scores: 2.5× the forward's FLOPs. Always in the activations' dtype (FP8 attention is not modelled).
double fused_attention_seconds(const AttentionCore& a, Pass pass, const KernelContext& ctx) {
  double flops = 4.0 * static_cast<double>(a.batch) * static_cast<double>(a.heads) * static_cast<double>(a.q_len) *
                 static_cast<double>(a.kv_len) * static_cast<double>(a.head_dim);
  if (a.causal) flops *= 0.5;
  if (pass != Pass::Forward) flops *= 2.5;
  return flops / (sustained_peak(ctx, ctx.dtype) * attention_efficiency(a, pass, ctx.attention, ctx.tuning));
}

struct ImplEfficiency {
  double fwd, bwd, hd64, hd256;
};

ImplEfficiency impl_efficiency(spec::AttentionImpl impl, const spec::KernelTuning& t) {
  switch (impl) {
    case spec::AttentionImpl::Flash3:
      return {t.flash3_fwd_efficiency, t.flash3_bwd_efficiency, t.flash3_hd64_factor, t.flash3_hd256_factor};
    case spec::AttentionImpl::Cudnn:
      return {t.cudnn_fwd_efficiency, t.cudnn_bwd_efficiency, t.cudnn_hd64_factor, t.cudnn_hd256_factor};
    case spec::AttentionImpl::Flash1:
      return {t.flash1_fwd_efficiency, t.flash1_bwd_efficiency, t.flash1_hd64_factor, t.flash1_hd256_factor};
    case spec::AttentionImpl::Triton:
      return {t.triton_fwd_efficiency, t.triton_bwd_efficiency, t.triton_hd64_factor, t.triton_hd256_factor};
    case spec::AttentionImpl::Flash:
    case spec::AttentionImpl::Unfused:
      break;
  }
  return {t.flash_fwd_efficiency, t.flash_bwd_efficiency, t.flash_hd64_factor, t.flash_hd256_factor};
}

// The head-dim factor: the device's measured factors at 64 and 256 relative to 128, linear in
// log2(head dim) between them and flat beyond.
double head_dim_factor(std::int64_t head_dim, const ImplEfficiency& e) {
  const double x = std::log2(static_cast<double>(std::max<std::int64_t>(head_dim, 1)));
  if (x <= 6) return e.hd64;
  if (x <= 7) return e.hd64 + (1.0 - e.hd64) * (x - 6);
  if (x <= 8) return 1.0 + (e.hd256 - 1.0) * (x - 7);
  return e.hd256;
}

// An element-wise op of the layer run in eager PyTorch as the Llama reference code writes it, against
// the one fused pass the model charges (read the input, write the output, in bf16): the HBM bytes of
// its eager kernels relative to that pass, and how many kernels it takes.
//   RMSNorm  x.float() 6 B, pow 8, mean 4, x·rsqrt 8, type_as 6, ·weight 4: 36 B per element, 4 fused
//   RoPE     .float() 6, complex multiply 8, type_as 6: 20 B, 4 fused
//   SwiGLU   silu 4, ·up 6: 10 B per output element, 6 fused
//   loss     its traffic is the implementation's own (spec::loss_traffic_per_logit): only the
//            kernels of PyTorch's eager F.cross_entropy (cast, log_softmax, nll and their backward)
struct EagerOp {
  std::string_view name;
  double traffic;
  int kernels;
};
constexpr EagerOp kEagerOps[] = {{"norm1", 9.0, 6},
                                 {"norm2", 9.0, 6},
                                 {"final_norm", 9.0, 6},
                                 {"rope", 5.0, 6},
                                 {"act", 10.0 / 6.0, 2},
                                 {"expert_act", 10.0 / 6.0, 2},
                                 {"shared_act", 10.0 / 6.0, 2},
                                 {"loss", 1.0, 4},
                                 {"mtp_enorm", 9.0, 6},
                                 {"mtp_hnorm", 9.0, 6},
                                 {"mtp_final_norm", 9.0, 6},
                                 {"mtp_loss", 1.0, 4},
                                 {"q_norm", 9.0, 6},
                                 {"kv_norm", 9.0, 6},
                                 // a LoRA adapter: dropout, A, B, the scaling and the add (its
                                 // traffic is already the unfused kernels')
                                 {"qkv_lora", 1.0, 5},
                                 {"out_proj_lora", 1.0, 5},
                                 {"fc1_lora", 1.0, 5},
                                 {"fc2_lora", 1.0, 5}};

// The time an element-wise op adds beyond its fused pass when it runs eagerly.
double eager_extra_seconds(const Op& op, double fused_seconds, const KernelContext& ctx) {
  if (!ctx.eager) return 0;
  for (const auto& e : kEagerOps)
    if (e.name == op.name) return fused_seconds * (e.traffic - 1) + (e.kernels - 1) * ctx.tuning.kernel_gap.seconds();
  return 0;
}

}  // namespace

KernelContext kernel_context(const spec::Job& job, const spec::KernelTuning& tuning) {
  const auto training = job.workload.training.dtype;
  const auto recipe = spec::fp8_of(job.strategy);
  const auto& preset = spec::framework_preset(job.strategy.framework);
  const bool fp8 = recipe != spec::Fp8Recipe::Off;
  Fp8Casts casts{.recipe = recipe, .scaling = preset.fp8_scaling};
  // Transformer Engine keeps the FP8 weights of the first micro-batch for the rest of the step
  // (not under ZeRO-3, which gathers the weights again for each micro-batch: as the memory holds)
  if (spec::fp8_weight_copies_kept(job) && job.micro_batches > 0)
    casts.weight_cast_share = 1.0 / static_cast<double>(job.micro_batches);
  // Transformer Engine (the presets that keep FP8 casts for the backward) asks for the transpose
  // only where the GEMMs need it (non_tn_fp8_gemm_supported); torchao's Float8Linear always writes it
  casts.writes_transpose = !(preset.fp8_saves_casts && job.cluster.device.fp8_gemm_all_layouts);
  casts.transposes_weight_per_backward = fp8_transposes_transient(job);
  return {.device = &job.cluster.device,
          .dtype = training == spec::Dtype::Fp8 ? spec::Dtype::Bf16 : training,
          .gemm_dtype = fp8 ? spec::Dtype::Fp8 : training,
          .attention = spec::attention_of(job.strategy),
          .tuning = tuning,
          .fp8 = casts,
          .eager = !job.strategy.compile,
          .frozen_weights = job.workload.training.lora.has_value(),
          .separate_bias_grad = !job.strategy.bias_grad_fused,
          .separate_norm_grad = !job.strategy.norm_grad_fused};
}

double weight_grad_bytes(const Op& op, const KernelContext& ctx) {
  if (ctx.frozen_weights) return 0;  // LoRA freezes the biases and norms with the weights
  if (const auto* g = std::get_if<Gemm>(&op.shape)) {
    if (!g->bias || !ctx.separate_bias_grad) return 0;
    // read dY (m×n per instance); the n sums are negligible
    return activation_bytes(ctx.dtype) * static_cast<double>(g->m) * static_cast<double>(g->n) *
           static_cast<double>(g->count);
  }
  return ctx.separate_norm_grad ? op.wgrad_bytes : 0;
}

CastTraffic fp8_cast_traffic(const Gemm& g, Pass pass, const KernelContext& ctx) {
  const auto& f = ctx.fp8;
  if (f.recipe == spec::Fp8Recipe::Off) return {};
  const double e = activation_bytes(ctx.dtype);
  const double count = static_cast<double>(g.count);
  const double input = static_cast<double>(g.m) * static_cast<double>(g.k) * count;
  const double weight = static_cast<double>(g.k) * static_cast<double>(g.n) * count;
  const double out_grad = static_cast<double>(g.m) * static_cast<double>(g.n) * count;
  const double w = f.weight_cast_share;
  if (f.recipe == spec::Fp8Recipe::Tensorwise) {
    // one fused cast-transpose per operand: read it, write the FP8 copy and, unless the library
    // skips it, its transpose (which the backward's GEMMs take); current scaling first reads the
    // tensor for its amax
    const double written = f.writes_transpose ? 2 : 1;
    const double per_element = e + written + (f.scaling == spec::Fp8Scaling::Current ? e : 0);
    const double weight_per_element = per_element - (f.transposes_weight_per_backward ? 1 : 0);
    switch (pass) {
      case Pass::Forward:
        return {per_element * input + weight_per_element * w * weight, w >= 1 ? 2 : 1};
      case Pass::BackwardData:
        if (f.transposes_weight_per_backward) return {per_element * out_grad + 2 * weight, 2};
        return {per_element * out_grad, 1};
      case Pass::BackwardWeight:
        return {};
    }
    return {};
  }
  // row- and block-wise scales follow the GEMM's reduction dimension: every GEMM casts its own
  // operands (read, write FP8 and its scales), none is reused transposed
  const double per_element = e + 1;
  switch (pass) {
    case Pass::Forward:
      return {per_element * (input + w * weight), 2};
    case Pass::BackwardData:
      return {per_element * (out_grad + w * weight), 2};
    case Pass::BackwardWeight:
      return {per_element * (input + out_grad), 2};
  }
  return {};
}

double clock_factor(const spec::DeviceSpec& device, double static_power_share) {
  if (!device.tdp_w || !device.power_limit_w || *device.power_limit_w >= *device.tdp_w) return 1.0;
  const double fixed = static_power_share * *device.tdp_w;
  // (a limit is at least half the TDP and the share at most 0.45: device_spec and tunables check)
  SIM_ASSERT(*device.power_limit_w > fixed, "power limit {} W within the static share {} W", *device.power_limit_w,
             fixed);
  return std::cbrt((*device.power_limit_w - fixed) / (*device.tdp_w - fixed));
}

double sustained_peak(const KernelContext& ctx, spec::Dtype dtype) {
  const auto it = ctx.device->peak_flops.find(dtype);
  SIM_ASSERT(it != ctx.device->peak_flops.end(), "no peak for dtype {}", spec::dtype_name(dtype));
  return it->second.flop_per_s * ctx.tuning.sustained_fraction *
         clock_factor(*ctx.device, ctx.tuning.static_power_share);
}

double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count, int sms,
                       const spec::KernelTuning& t, double gemm_ceiling) {
  return gemm_ceiling * choose_tile(m, n, k, count, sms, t).efficiency;
}

double attention_efficiency(const AttentionCore& a, Pass pass, spec::AttentionImpl impl, const spec::KernelTuning& t) {
  const auto e = impl_efficiency(impl, t);
  const double s = static_cast<double>(a.kv_len);
  const double sequence = a.causal ? t.attention_causal_efficiency * s / (s + t.attention_causal_seq_overhead)
                                   : s / (s + t.attention_seq_overhead);
  return (pass == Pass::Forward ? e.fwd : e.bwd) * head_dim_factor(a.head_dim, e) * sequence;
}

Duration kernel_time(const Op& op, Pass pass, const KernelContext& ctx) {
  SIM_ASSERT(ctx.device != nullptr, "kernel context without a device");
  const double seconds = std::visit(
      [&](const auto& shape) -> double {
        using T = std::decay_t<decltype(shape)>;
        if constexpr (std::is_same_v<T, Gemm>) {
          const auto& g = shape;
          if (ctx.frozen_weights && pass == Pass::BackwardWeight && multiplies_weights(op)) return 0.0;
          const auto dtype = g.linear ? ctx.gemm_dtype : ctx.dtype;
          const auto casts = g.linear ? fp8_cast_traffic(g, pass, ctx) : CastTraffic{};
          const double cast = casts.bytes / hbm(ctx) + casts.kernels * ctx.tuning.kernel_gap.seconds();
          switch (pass) {
            case Pass::Forward:
              return gemm_seconds(g.m, g.n, g.k, g.count, dtype, ctx) + cast;
            case Pass::BackwardData:
              return gemm_seconds(g.m, g.k, g.n, g.count, dtype, ctx) + cast;
            case Pass::BackwardWeight: {
              const double bias = weight_grad_bytes(op, ctx);
              return gemm_seconds(g.k, g.n, g.m, g.count, dtype, ctx) + cast +
                     (bias > 0 ? bias / hbm(ctx) + ctx.tuning.kernel_gap.seconds() : 0.0);
            }
          }
          return 0.0;
        } else if constexpr (std::is_same_v<T, AttentionCore>) {
          if (pass == Pass::BackwardWeight) return 0.0;
          return spec::is_fused(ctx.attention) ? fused_attention_seconds(shape, pass, ctx)
                                               : unfused_attention_seconds(shape, pass, ctx, shape.dropout);
        } else {
          if (pass == Pass::BackwardWeight) return elementwise_seconds(weight_grad_bytes(op, ctx), ctx);
          const double fused = elementwise_seconds(pass == Pass::Forward ? op.fwd_bytes : op.bwd_bytes, ctx);
          return fused + eager_extra_seconds(op, fused, ctx);
        }
      },
      op.shape);
  if (seconds <= 0) return Duration::zero();
  return Duration::from_seconds(seconds) + ctx.tuning.kernel_gap;
}

int kernel_launches(const Op& op, Pass pass, const KernelContext& ctx) {
  return std::visit(
      [&](const auto& shape) -> int {
        using T = std::decay_t<decltype(shape)>;
        if constexpr (std::is_same_v<T, Gemm>) {
          if (ctx.frozen_weights && pass == Pass::BackwardWeight && multiplies_weights(op)) return 0;
          const int bias = pass == Pass::BackwardWeight && weight_grad_bytes(op, ctx) > 0 ? 1 : 0;
          return 1 + bias + (shape.linear ? fp8_cast_traffic(shape, pass, ctx).kernels : 0);
        } else if constexpr (std::is_same_v<T, AttentionCore>) {
          if (pass == Pass::BackwardWeight) return 0;
          if (!spec::is_fused(ctx.attention)) return pass == Pass::Forward ? 4 : 6;  // GEMMs and softmax passes
          // FlashAttention-2's backward: dot(dO, O), the main kernel, dQ's conversion from fp32
          // (flash_attn csrc flash_bwd_launch_template.h)
          return pass == Pass::Forward ? 1 : 3;
        } else {
          if (pass == Pass::BackwardWeight) return weight_grad_bytes(op, ctx) > 0 ? 1 : 0;
          if (ctx.eager)
            for (const auto& e : kEagerOps)
              if (e.name == op.name) return e.kernels;
          return 1;
        }
      },
      op.shape);
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
