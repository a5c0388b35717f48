#include "trainsim/trace/microbench.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "trace/json_fields.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

using nlohmann::json;

// "FP8 (e4m3, cuBLASLt)", "FP16 (cuBLASLt; A100 has no FP8)", "BF16": the leading word names it.
spec::Dtype dtype_of(const std::string& text) {
  if (text.starts_with("FP8")) return spec::Dtype::Fp8;
  if (text.starts_with("FP16")) return spec::Dtype::Fp16;
  return spec::Dtype::Bf16;
}

// Whether a row's device is one of the '|'-separated alternatives of `match`.
bool matches(const std::string& gpu, const std::string& match) {
  std::size_t start = 0;
  while (start <= match.size()) {
    const auto end = std::min(match.find('|', start), match.size());
    if (end > start && gpu.find(match.substr(start, end - start)) != std::string::npos) return true;
    start = end + 1;
  }
  return false;
}

std::optional<spec::AttentionImpl> impl_of(const std::string& text) {
  if (text == "FlashAttention-2") return spec::AttentionImpl::Flash;
  if (text == "FlashAttention-3") return spec::AttentionImpl::Flash3;
  if (text == "cuDNN") return spec::AttentionImpl::Cudnn;
  if (text == "FlashAttention") return spec::AttentionImpl::Flash1;  // flash-attn 1.x
  return std::nullopt;  // PyTorch's unfused attention, Triton's tutorial kernel
}

std::optional<GemmBench> read_gemm(const json& r) {
  GemmBench g{.dtype = dtype_of(string_of(r, "dtype"))};
  if (!r.contains("tflops") || !r["tflops"].is_number()) return std::nullopt;
  g.tflops = r["tflops"].get<double>();
  if (string_of(r, "kind") == "gemm") {
    g.m = as_int(r.value("m", json()), 0);
    g.n = as_int(r.value("n", json()), 0);
    g.k = as_int(r.value("k", json()), 0);
  } else {  // the best shape of a brute-force scan, "MxNxK"
    const auto shape = string_of(r, "best_shape_MxNxK");
    if (std::sscanf(shape.c_str(), "%ldx%ldx%ld", &g.m, &g.n, &g.k) != 3) return std::nullopt;
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return std::nullopt;
  return g;
}

std::optional<AttentionBench> read_attention(const json& r, std::vector<std::string>& skipped) {
  const auto impl = impl_of(string_of(r, "impl"));
  if (!impl) {
    skipped.push_back(fmt::format("attention \"{}\": not a modelled fused implementation", string_of(r, "impl")));
    return std::nullopt;
  }
  if (!r.contains("tflops") || !r["tflops"].is_number()) return std::nullopt;
  AttentionBench a{.impl = *impl};
  a.forward_only = string_of(r, "pass") == "forward";
  a.causal = r.contains("causal") && r["causal"].is_boolean() && r["causal"].get<bool>();
  a.head_dim = as_int(r.value("head_dim", json()), 0);
  a.seq_len = as_int(r.value("seq_len", json()), 0);
  // FlashAttention's benchmark keeps 16k tokens per batch and a 2048 hidden size unless stated
  a.batch = r.contains("batch") ? as_int(r["batch"], 0) : (a.seq_len > 0 ? 16384 / a.seq_len : 0);
  const auto hidden = r.contains("hidden") ? as_int(r["hidden"], 0) : 2048;
  a.heads = a.head_dim > 0 ? hidden / a.head_dim : 0;
  a.tflops = r["tflops"].get<double>();
  if (a.head_dim <= 0 || a.seq_len <= 0 || a.batch <= 0 || a.heads <= 0) return std::nullopt;
  return a;
}

}  // namespace

Microbenchmarks read_microbenchmarks(const std::string& path, const std::string& device_match) {
  const auto doc = spec::load_json_file(path);
  if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array())
    throw SpecError(path, "/rows",
                    "missing; expected a list of microbenchmark rows (tests/reference/modern/devices.json)");
  Microbenchmarks out{.device = device_match};
  for (const auto& r : doc["rows"]) {
    if (!r.is_object() || !matches(string_of(r, "gpu"), device_match)) continue;
    const auto kind = string_of(r, "kind");
    if (kind == "gemm" || kind == "gemm_mamf") {
      if (auto g = read_gemm(r)) out.gemms.push_back(*g);
    } else if (kind == "attention") {
      if (auto a = read_attention(r, out.skipped)) out.attention.push_back(*a);
    } else if (kind == "hbm_stream" && string_of(r, "op") == "Triad" && r.contains("tb_per_s")) {
      out.triad_Bps = r["tb_per_s"].get<double>() * 1e12;
    } else if (kind == "nccl_all_reduce" && as_int(r.value("nodes", json()), 0) == 1) {
      if (!r.contains("busbw_gb_s") || !r["busbw_gb_s"].is_number()) continue;
      const auto algo = string_of(r, "algo");
      out.all_reduce.push_back({.gpus = static_cast<int>(as_int(r.value("gpus", json()), 0)),
                                .algorithm = algo.find("NVLS") != std::string::npos ? "nvls" : "auto",
                                .bytes = as_int(r.value("message_bytes_derived", json()), 0),
                                .busbw_Bps = r["busbw_gb_s"].get<double>() * 1e9});
    }
  }
  return out;
}

double modelled_tflops(const GemmBench& g, model::KernelContext ctx) {
  ctx.tuning.sustained_fraction = 1.0;       // a microbenchmark runs at its own clocks
  ctx.tuning.kernel_gap = Duration::zero();  // and launches back to back: the next launch hides in this kernel
  ctx.gemm_dtype = g.dtype;
  ctx.dtype = g.dtype == spec::Dtype::Fp8 ? spec::Dtype::Bf16 : g.dtype;
  const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  // a matmul benchmark: operands in the row's dtype, as a linear layer's GEMM takes them (no FP8 casts)
  const model::Op op{.name = "gemm", .shape = model::Gemm{g.m, g.n, g.k, 1, true}, .fwd_flops = flops};
  return flops / model::kernel_time(op, model::Pass::Forward, ctx).seconds() / 1e12;
}

double modelled_tflops(const AttentionBench& a, model::KernelContext ctx) {
  ctx.tuning.sustained_fraction = 1.0;
  ctx.tuning.kernel_gap = Duration::zero();
  ctx.attention = a.impl;
  const model::AttentionCore core{.batch = a.batch,
                                  .heads = a.heads,
                                  .q_len = a.seq_len,
                                  .kv_len = a.seq_len,
                                  .head_dim = a.head_dim,
                                  .causal = a.causal};
  const model::Op op{.name = "attention", .shape = core};
  double flops = 4.0 * static_cast<double>(a.batch) * static_cast<double>(a.heads) * static_cast<double>(a.seq_len) *
                 static_cast<double>(a.seq_len) * static_cast<double>(a.head_dim) * (a.causal ? 0.5 : 1.0);
  double seconds = model::kernel_time(op, model::Pass::Forward, ctx).seconds();
  if (!a.forward_only) {
    flops *= 3.5;
    seconds += model::kernel_time(op, model::Pass::BackwardData, ctx).seconds();
  }
  return flops / seconds / 1e12;
}

double modelled_busbw(const AllReduceBench& a, cost::CostModel& costs) {
  cost::Group group;
  for (int d = 0; d < a.gpus; ++d) group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(d)});
  return costs.cost(cost::AllReduce{Bytes{a.bytes}}, group, a.algorithm).busbw_Bps;
}

}  // namespace trainsim::trace
