#include "trainsim/report/format.hpp"

#include <cmath>

#include <fmt/format.h>

#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

using nlohmann::ordered_json;

std::int64_t rounded(double v) {
  return static_cast<std::int64_t>(std::llround(v));
}

ordered_json memory_json(const model::MemoryBreakdown& m) {
  return {{"params", m.params.count},
          {"grads", m.grads.count},
          {"optimizer", m.optimizer.count},
          {"activations", m.activations.count},
          {"buffers", m.buffers.count}};
}

ordered_json shape_json(const model::OpShape& shape) {
  return std::visit(
      [](const auto& s) -> ordered_json {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, model::Gemm>)
          return {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"count", s.count}};
        else if constexpr (std::is_same_v<T, model::AttentionCore>)
          return {{"batch", s.batch},   {"heads", s.heads},       {"q_len", s.q_len},
                  {"kv_len", s.kv_len}, {"head_dim", s.head_dim}, {"causal", s.causal}};
        else
          return {{"bytes", s.bytes}};
      },
      shape);
}

ordered_json strategy_json(const spec::Job& job) {
  const auto& s = job.strategy;
  return {{"tp", s.tp},
          {"sp", s.sp},
          {"pp", s.pp},
          {"vpp", s.vpp},
          {"cp", s.cp},
          {"ep", s.ep},
          {"dp", job.dp},
          {"zero", s.zero},
          {"mb", s.mb},
          {"micro_batches", job.micro_batches},
          {"schedule", spec::schedule_name(s.schedule)},
          {"recompute", spec::recompute_name(s.recompute)},
          {"order", spec::order_text(s.order)},
          {"stage_layers", job.stage_layers}};
}

}  // namespace

std::string human_bytes(Bytes bytes) {
  const double b = bytes.as_double();
  if (b >= 1099511627776.0) return fmt::format("{:.2f} TiB", b / 1099511627776.0);
  if (b >= 1073741824.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= 1048576.0) return fmt::format("{:.2f} MiB", b / 1048576.0);
  return fmt::format("{} B", bytes.count);
}

std::string human_count(double count) {
  if (count >= 1e12) return fmt::format("{:.2f} T", count / 1e12);
  if (count >= 1e9) return fmt::format("{:.2f} B", count / 1e9);
  if (count >= 1e6) return fmt::format("{:.2f} M", count / 1e6);
  return fmt::format("{:.0f}", count);
}

ordered_json to_json(const RunReport& r) {
  const auto& job = *r.job;
  const auto& peak = r.memory.peak();
  ordered_json out;
  out["trainsim_version"] = TRAINSIM_VERSION;
  out["topology"] = job.cluster.name;
  out["workload"] = job.workload.name;
  out["strategy"] = strategy_json(job);
  out["params_total"] = rounded(r.params_total);
  out["params_per_gpu"] = rounded(r.params_per_gpu);
  out["gpus"] = job.gpus;
  out["flops"] = {{"model_per_step", r.flops.model},
                  {"hardware_per_step", r.flops.hardware},
                  {"megatron_formula_per_step", r.megatron_formula_flops},
                  {"model_per_token", r.flops.per_token}};
  out["peak_memory_bytes"] = peak.bytes.total().count;
  out["device_memory_bytes"] = r.device_memory.count;
  out["fits"] = r.fits;
  out["memory"] = memory_json(peak.bytes);
  out["per_stage"] = ordered_json::array();
  for (const auto& s : r.memory.stages) {
    out["per_stage"].push_back({{"stage", s.stage},
                                {"layers", job.stage_layers.at(static_cast<std::size_t>(s.stage))},
                                {"params", rounded(s.params)},
                                {"peak_memory_bytes", s.bytes.total().count},
                                {"memory", memory_json(s.bytes)}});
  }
  out["layers"] = ordered_json::array();
  for (const auto& layer : r.layers) {
    ordered_json ops = ordered_json::array();
    for (const auto& op : layer.ops) {
      ops.push_back({{"name", op.name},
                     {"class", model::op_class_name(model::op_class(op.shape))},
                     {"shape", shape_json(op.shape)},
                     {"fwd_flops", op.fwd_flops},
                     {"bwd_flops", op.bwd_data_flops + op.bwd_weight_flops},
                     {"fwd_bytes", op.fwd_bytes},
                     {"bwd_bytes", op.bwd_bytes}});
    }
    out["layers"].push_back({{"kind", layer.kind}, {"ops", ops}});
  }
  out["warnings"] = r.warnings;
  return out;
}

std::string to_table(const RunReport& r) {
  const auto& job = *r.job;
  const auto& s = job.strategy;
  const auto& peak = r.memory.peak();
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<22}{}\n", label, value);
  };
  line("workload", fmt::format("{} on {} ({} of {} devices)", job.workload.name, job.cluster.name, job.gpus,
                               job.cluster.num_devices()));
  line("strategy", fmt::format("tp={} sp={} pp={} vpp={} cp={} ep={} dp={} zero={} mb={} schedule={} recompute={}",
                               s.tp, s.sp ? "on" : "off", s.pp, s.vpp, s.cp, s.ep, job.dp, s.zero, s.mb,
                               spec::schedule_name(s.schedule), spec::recompute_name(s.recompute)));
  line("micro-batches", fmt::format("{} per step and pipeline", job.micro_batches));
  line("parameters", fmt::format("{} total, {} per GPU", human_count(r.params_total), human_count(r.params_per_gpu)));
  line("model FLOPs/step", fmt::format("{:.4g} (Megatron formula {:.4g})", r.flops.model, r.megatron_formula_flops));
  line("hardware FLOPs/step", fmt::format("{:.4g}", r.flops.hardware));
  out += fmt::format("memory per GPU (stage {}, the largest)\n", peak.stage);
  line("  params", human_bytes(peak.bytes.params));
  line("  grads", human_bytes(peak.bytes.grads));
  line("  optimizer", human_bytes(peak.bytes.optimizer));
  line("  activations", human_bytes(peak.bytes.activations));
  line("  buffers", human_bytes(peak.bytes.buffers));
  line("  peak", fmt::format("{} of {}: {}", human_bytes(peak.bytes.total()), human_bytes(r.device_memory),
                             r.fits ? "fits" : "does NOT fit"));
  if (r.memory.stages.size() > 1) {
    out += "per stage\n";
    for (const auto& st : r.memory.stages)
      out += fmt::format("  stage {:<4} {:>3} layers  {:>10} params  peak {}\n", st.stage,
                         job.stage_layers.at(static_cast<std::size_t>(st.stage)), human_count(st.params),
                         human_bytes(st.bytes.total()));
  }
  for (const auto& w : r.warnings) out += fmt::format("warning: {}\n", w);
  return out;
}

std::string to_csv(const RunReport& r) {
  const auto& job = *r.job;
  const auto& peak = r.memory.peak().bytes;
  std::string out =
      "workload,topology,gpus,tp,pp,dp,cp,ep,zero,mb,params_total,params_per_gpu,model_flops_per_step,"
      "peak_memory_bytes,params_bytes,grads_bytes,optimizer_bytes,activations_bytes,buffers_bytes,fits\n";
  out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.6e},{},{},{},{},{},{},{}\n", job.workload.name,
                     job.cluster.name, job.gpus, job.strategy.tp, job.strategy.pp, job.dp, job.strategy.cp,
                     job.strategy.ep, job.strategy.zero, job.strategy.mb, rounded(r.params_total),
                     rounded(r.params_per_gpu), r.flops.model, peak.total().count, peak.params.count, peak.grads.count,
                     peak.optimizer.count, peak.activations.count, peak.buffers.count, r.fits ? "true" : "false");
  return out;
}

std::string render(const RunReport& report, Format format) {
  switch (format) {
    case Format::Json:
      return to_json(report).dump(2) + "\n";
    case Format::Csv:
      return to_csv(report);
    case Format::Table:
      return to_table(report);
  }
  SIM_ASSERT(false, "unhandled format");
}

}  // namespace trainsim::report
