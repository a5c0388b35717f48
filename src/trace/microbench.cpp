#include "trainsim/trace/microbench.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

using nlohmann::json;

constexpr spec::IntRange kDimension{1, std::int64_t{1} << 24};
constexpr spec::NumberRange kPositive{0, 1e30, true};
constexpr spec::Choice<spec::Dtype> kGemmDtypes[] = {
    {"FP8", spec::Dtype::Fp8}, {"FP16", spec::Dtype::Fp16}, {"BF16", spec::Dtype::Bf16}};

// "FP8 (e4m3, cuBLASLt)", "FP16 (cuBLASLt; A100 has no FP8)", "BF16": the leading word names it.
spec::Dtype dtype_of(spec::Reader& row) {
  const auto text = row.string("dtype");
  for (const auto& [name, dtype] : kGemmDtypes)
    if (text.starts_with(name)) return dtype;
  if (!text.empty()) row.error_at("dtype", fmt::format("\"{}\" does not start with FP8, FP16 or BF16", text));
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

// nccl-tests' operations the fit reads, by the row's kind.
std::optional<cost::CollectiveKind> collective_of(const std::string& kind) {
  if (kind == "nccl_all_reduce") return cost::CollectiveKind::AllReduce;
  if (kind == "nccl_all_gather") return cost::CollectiveKind::AllGather;
  if (kind == "nccl_reduce_scatter") return cost::CollectiveKind::ReduceScatter;
  return std::nullopt;
}

GemmBench read_gemm(spec::Reader& row, bool scan) {
  GemmBench g{.dtype = dtype_of(row)};
  g.tflops = row.number("tflops", kPositive);
  if (!scan) {
    g.m = row.integer("m", kDimension);
    g.n = row.integer("n", kDimension);
    g.k = row.integer("k", kDimension);
    return g;
  }
  // the best shape of a brute-force scan, "MxNxK"
  const auto shape = row.string("best_shape_MxNxK");
  long m = 0, n = 0, k = 0;
  char rest = 0;
  if (std::sscanf(shape.c_str(), "%ldx%ldx%ld%c", &m, &n, &k, &rest) != 3 || m < 1 || n < 1 || k < 1 ||
      m > kDimension.max || n > kDimension.max || k > kDimension.max) {
    if (!shape.empty()) row.error_at("best_shape_MxNxK", fmt::format("\"{}\" is not MxNxK of positive sizes", shape));
    return g;
  }
  g.m = m, g.n = n, g.k = k;
  return g;
}

constexpr spec::Choice<bool> kPasses[] = {{"forward", true}, {"forward+backward", false}};

AttentionBench read_attention(spec::Reader& row, spec::AttentionImpl impl) {
  AttentionBench a{.impl = impl};
  a.forward_only = row.choice<bool>("pass", kPasses);
  a.causal = row.boolean("causal");
  a.head_dim = row.integer("head_dim", {1, 1024});
  a.seq_len = row.integer("seq_len", kDimension);
  a.tflops = row.number("tflops", kPositive);
  // FlashAttention's benchmark keeps 16k tokens per batch and a 2048 hidden size unless stated
  a.batch = row.integer_or("batch", std::max<std::int64_t>(16384 / a.seq_len, 1), kDimension);
  const auto hidden = row.integer_or("hidden", 2048, kDimension);
  a.heads = hidden / a.head_dim;
  if (a.heads < 1) row.error_at("head_dim", fmt::format("{} is above the hidden size {}", a.head_dim, hidden));
  return a;
}

constexpr spec::IntRange kNodeGpus{2, spec::kMaxDomainDevices};

// Rows left out, by reason.
using Skipped = std::map<std::string, std::vector<std::size_t>>;

// One matched row into `out`; what no model covers goes to `skipped`.
void read_row(const json& value, spec::Reader& row, std::size_t index, Microbenchmarks& out, Skipped& skipped) {
  const auto kind = row.string("kind");
  // a row whose measurement is null was not read off its source (a hidden chart label): skipped, named
  for (const char* measured : {"tflops", "tb_per_s", "busbw_gb_s"}) {
    if (const auto it = value.find(measured); it != value.end() && it->is_null()) {
      skipped[fmt::format("\"{}\" null, no measurement", measured)].push_back(index);
      return;
    }
  }
  if (kind == "gemm" || kind == "gemm_mamf") {
    out.gemms.push_back(read_gemm(row, kind == "gemm_mamf"));
    out.gemms.back().row = index;
  } else if (kind == "attention") {
    const auto impl_name = row.string("impl");
    const auto impl = impl_of(impl_name);
    if (!impl) {
      skipped[fmt::format("attention \"{}\": not a modelled fused implementation", impl_name)].push_back(index);
      return;
    }
    out.attention.push_back(read_attention(row, *impl));
    out.attention.back().row = index;
  } else if (kind == "hbm_stream") {
    const auto op = row.string("op");
    if (op != "Triad") {
      skipped[fmt::format("hbm_stream \"{}\": the fit reads the triad", op)].push_back(index);
      return;
    }
    out.triad_Bps = row.number("tb_per_s", kPositive) * 1e12;
    out.triad_row = index;
  } else if (const auto op = collective_of(kind)) {
    if (const auto nodes = row.integer("nodes", {1, spec::kMaxDevices}); nodes != 1) {
      skipped[fmt::format("{} over several nodes: the fit covers one node", kind)].push_back(index);
      return;
    }
    const auto algo = row.string("algo");
    out.collectives.push_back({.row = index,
                               .op = *op,
                               .gpus = static_cast<int>(row.integer("gpus", kNodeGpus)),
                               .algorithm = algo.find("NVLS") != std::string::npos ? "nvls" : "auto",
                               .bytes = row.integer("message_bytes_derived", {1, std::int64_t{1} << 40}),
                               .busbw_Bps = row.number("busbw_gb_s", kPositive) * 1e9});
  } else {
    skipped[fmt::format("kind \"{}\": no model fits it", kind)].push_back(index);
  }
}

}  // namespace

Microbenchmarks read_microbenchmarks(const std::string& path, const std::string& device_match) {
  const auto doc = spec::load_json_file(path);
  if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array())
    throw SpecError(path, "/rows",
                    "missing; expected a list of microbenchmark rows (tests/reference/modern/devices.json)");
  Microbenchmarks out{.path = path, .device = device_match};
  spec::Diagnostics diagnostics;
  std::set<std::string> devices;
  Skipped skipped;
  const auto& rows = doc["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    spec::Reader row(rows[i], fmt::format("/rows/{}", i), diagnostics);
    if (!rows[i].is_object()) {
      row.error("expected an object with \"kind\" and \"gpu\"");
      continue;
    }
    if (!row.has("gpu")) continue;  // a summary of no one device
    const auto gpu = row.string("gpu");
    devices.insert(gpu);
    if (matches(gpu, device_match)) read_row(rows[i], row, i, out, skipped);
  }
  for (const auto& [why, indices] : skipped)
    out.skipped.push_back(fmt::format("{} row(s), {} (/rows/{})", indices.size(), why, fmt::join(indices, ", ")));
  diagnostics.throw_if_any(path);
  if (out.gemms.empty() && out.attention.empty() && !out.triad_Bps && out.collectives.empty())
    throw SpecError(path, "/rows",
                    fmt::format("no row to fit has a \"gpu\" containing \"{}\" (--match); the file's devices: {}",
                                device_match, fmt::join(devices, "; ")));
  return out;
}

namespace {

// A measured bandwidth may exceed its datasheet figure by the rounding of a published figure (a rate
// by kBoostClockMargin).
constexpr double kBandwidthMargin = 1.05;
constexpr std::string_view kOtherDevice = ": a measurement of another device, or in another unit?";

SpecError implausible(const Microbenchmarks& bench, std::size_t row, std::string_view key, std::string why) {
  return SpecError(bench.path, fmt::format("/rows/{}/{}", row, key), std::move(why));
}

}  // namespace

void check_physical(const Microbenchmarks& bench, const spec::ClusterSpec& cluster) {
  const auto& device = cluster.device;
  const auto peak = [&](spec::Dtype dtype, std::size_t row) {
    const auto it = device.peak_flops.find(dtype);
    if (it == device.peak_flops.end())
      throw implausible(bench, row, "dtype", fmt::format("{} has no {} peak", device.name, spec::dtype_name(dtype)));
    return it->second.flop_per_s / 1e12;
  };
  for (const auto& g : bench.gemms)
    if (const double p = peak(g.dtype, g.row); g.tflops > p * kBoostClockMargin)
      throw implausible(bench, g.row, "tflops",
                        fmt::format("{:.4g} TFLOP/s is above {}'s dense {} peak of {:.4g}{}", g.tflops, device.name,
                                    spec::dtype_name(g.dtype), p, kOtherDevice));
  for (const auto& a : bench.attention)
    if (const double p = peak(spec::Dtype::Bf16, a.row); a.tflops > p * kBoostClockMargin)
      throw implausible(bench, a.row, "tflops",
                        fmt::format("{:.4g} TFLOP/s is above {}'s dense bf16 peak of {:.4g}{}", a.tflops, device.name,
                                    p, kOtherDevice));
  const double hbm = device.memory_bandwidth.bytes_per_s;
  if (bench.triad_Bps && *bench.triad_Bps > hbm * kBandwidthMargin)
    throw implausible(bench, bench.triad_row, "tb_per_s",
                      fmt::format("{:.4g} TB/s is above {}'s HBM bandwidth of {:.4g} TB/s{}", *bench.triad_Bps / 1e12,
                                  device.name, hbm / 1e12, kOtherDevice));
  const auto& fabric = cluster.node.fabric;
  // a ring's bus bandwidth is at most a device's own; in-switch reduction sends each byte once
  // each way, at most twice that
  const double busbw_limit = fabric.bandwidth.bytes_per_s * (fabric.in_network_reduction ? 2.0 : 1.0);
  for (const auto& a : bench.collectives) {
    if (a.gpus > cluster.node.devices)
      throw implausible(
          bench, a.row, "gpus",
          fmt::format("{} GPUs on one node; {}'s nodes have {}", a.gpus, cluster.name, cluster.node.devices));
    if (a.busbw_Bps > busbw_limit * kBandwidthMargin)
      throw implausible(bench, a.row, "busbw_gb_s",
                        fmt::format("{:.4g} GB/s is above what {}'s fabric carries ({:.4g} GB/s per device{}){}",
                                    a.busbw_Bps / 1e9, cluster.name, busbw_limit / 1e9,
                                    fabric.in_network_reduction ? ", twice the link rate with in-switch reduction" : "",
                                    kOtherDevice));
  }
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

double modelled_busbw(const CollectiveBench& a, cost::CostModel& costs) {
  cost::Group group;
  for (int d = 0; d < a.gpus; ++d) group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(d)});
  return costs.cost(cost::make_collective(a.op, Bytes{a.bytes}), group, a.algorithm).busbw_Bps;
}

}  // namespace trainsim::trace
