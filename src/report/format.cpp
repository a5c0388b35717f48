#include "trainsim/report/format.hpp"

#include "trainsim/driver/memory_timeline.hpp"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/model/expert_load.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

using driver::RunReport;
using nlohmann::ordered_json;

std::int64_t rounded(double v) {
  return static_cast<std::int64_t>(std::llround(v));
}

ordered_json memory_json(const model::MemoryBreakdown& m) {
  return {{"params", m.params.count},           {"grads", m.grads.count},     {"optimizer", m.optimizer.count},
          {"activations", m.activations.count}, {"buffers", m.buffers.count}, {"fragmentation", m.fragmentation.count}};
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

// The dtype gradients are reduced in: the key's, or the training dtype's gradients.
std::string grad_reduce_text(const spec::Job& job) {
  const auto& s = job.strategy;
  if (s.grad_reduce_dtype) return std::string(spec::dtype_name(*s.grad_reduce_dtype));
  return model::weight_bytes(job.workload.training.dtype) == 4 ? "fp32" : "bf16";
}

// The keys the framework preset set, with their values.
ordered_json assumed_json(const spec::StrategySpec& s) {
  ordered_json out = ordered_json::object();
  for (const auto& [key, value] : s.assumed.keys) out[key] = value;
  return out;
}

// The keys given over a named framework preset's values: the given value wins.
ordered_json overrides_json(const spec::StrategySpec& s) {
  ordered_json out = ordered_json::object();
  for (const auto& o : s.overrides.keys) out[o.key] = {{"given", o.given}, {"preset", o.preset}};
  return out;
}

ordered_json strategy_json(const spec::Job& job) {
  const auto& s = job.strategy;
  ordered_json out = {{"tp", s.tp},
                      {"sp", s.sp},
                      {"pp", s.pp},
                      {"vpp", s.vpp},
                      {"cp", s.cp},
                      {"cp_comm", spec::cp_comm_name(s.cp_comm)},
                      {"ep", s.ep},
                      {"ep_overlap", s.ep_overlap},
                      {"dispatcher", spec::dispatcher_name(s.deepep_dispatch)},
                      {"dp", job.dp},
                      {"zero", s.zero},
                      {"mb", s.mb},
                      {"micro_batches", job.micro_batches},
                      {"schedule", spec::schedule_name(s.schedule)},
                      {"recompute", spec::recompute_name(s.recompute)},
                      {"order", spec::order_text(s.order)},
                      {"stage_layers", job.stage_layers},
                      {"framework", spec::framework_name(s.framework)},
                      {"attention", spec::attention_name(spec::attention_of(s))},
                      {"tp_overlap", s.tp_overlap},
                      {"grad_reduce_dtype", grad_reduce_text(job)},
                      {"overlap_grad_reduce", s.overlap_grad_reduce},
                      {"overlap_param_gather", s.overlap_param_gather},
                      {"fp8", spec::fp8_recipe_name(spec::fp8_of(s))},
                      {"compile", s.compile},
                      {"reshard_after_forward", spec::reshard_after_forward_of(s)},
                      {"loss", spec::loss_name(s.loss)},
                      {"assumed", assumed_json(s)},
                      {"overrides", overrides_json(s)}};
  if (s.pipeline_layout) out["pipeline_layout"] = s.pipeline_layout->text;
  return out;
}

}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string human_bytes(Bytes bytes) {
  const double b = bytes.as_double();
  if (b >= 1099511627776.0) return fmt::format("{:.2f} TiB", b / 1099511627776.0);
  if (b >= 1073741824.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= 1048576.0) return fmt::format("{:.2f} MiB", b / 1048576.0);
  return fmt::format("{} B", bytes.count);
}

std::string does_not_fit_text(std::int64_t peak_memory, Bytes device_memory) {
  return fmt::format("DOES NOT FIT: peak {} per GPU exceeds the device's {}", human_bytes(Bytes{peak_memory}),
                     human_bytes(device_memory));
}

std::string fit_verdict(bool fits, bool at_risk, std::int64_t peak_memory, Bytes device_memory) {
  if (!fits) return "does NOT fit";
  if (peak_memory > device_memory.count) return "fits, at risk (the allocator must give back its reserve)";
  return at_risk ? "fits, at risk (headroom)" : "fits";
}

std::string mfu_text(const driver::RunReport& r) {
  std::string out = fmt::format("MFU {:.1f}% of the {:.0f} TFLOP/s {} peak", r.mfu * 100, r.mfu_peak_flops / 1e12,
                                spec::dtype_name(r.mfu_dtype));
  if (r.mfu_dtype != spec::Dtype::Bf16 && r.mfu_bf16)
    out += fmt::format(" ({:.1f}% of the bf16 peak, as Megatron-LM and NeMo report it)", *r.mfu_bf16 * 100);
  return out;
}

std::string precision_text(const driver::RunReport& r) {
  const auto recipe = spec::fp8_of(r.job->strategy);
  return fmt::format(
      "{} training{}", spec::dtype_name(r.training_dtype),
      recipe == spec::Fp8Recipe::Off ? std::string() : fmt::format(", FP8 GEMMs ({})", spec::fp8_recipe_name(recipe)));
}

std::string human_count(double count) {
  if (count >= 1e12) return fmt::format("{:.2f} T", count / 1e12);
  if (count >= 1e9) return fmt::format("{:.2f} B", count / 1e9);
  if (count >= 1e6) return fmt::format("{:.2f} M", count / 1e6);
  return fmt::format("{:.0f}", count);
}

std::vector<std::string_view> lora_module_names(const spec::LoraSpec& lora) {
  std::vector<std::string_view> names;
  for (const auto m : lora.modules) names.push_back(spec::lora_module_name(m));
  return names;
}

// The adapters of the whole model.
double lora_trainable_params(const spec::Job& job, const spec::LoraSpec& lora) {
  return model::lora_params_on_gpu(job.workload.model, lora, 1) * job.workload.model.layers;
}

// "; LoRA rank 16 on qkv, out_proj: 65.5 M train" (empty without LoRA)
std::string lora_text(const spec::Job& job) {
  const auto& lora = job.workload.training.lora;
  if (!lora) return {};
  return fmt::format("; LoRA rank {} on {}: {} train, the rest frozen", lora->rank,
                     fmt::join(lora_module_names(*lora), ", "), human_count(lora_trainable_params(job, *lora)));
}

namespace {

// "busiest of 8 expert-parallel ranks 1.083x a balanced share (aux_loss routing: busiest expert
// 1.694x the mean)", or the capacity every expert is padded to
std::string expert_load_text(const spec::Job& job) {
  const auto& moe = *job.workload.model.moe;
  const double busiest = model::gpu_layer_shape(job).routed_load;
  if (moe.capacity_factor)
    return fmt::format("capacity factor {:.3g}: every expert takes and is padded to {:.3g}x a balanced share",
                       *moe.capacity_factor, *moe.capacity_factor);
  return fmt::format(
      "busiest of {} expert-parallel ranks {:.3f}x a balanced share ({} routing{}: busiest expert "
      "{:.3f}x the mean{})",
      job.strategy.ep, busiest, spec::balancing_name(moe.balancing), moe.load_imbalance ? ", given" : "",
      model::expert_load_imbalance(moe),
      moe.load_seed ? fmt::format(", loads drawn with seed {}", *moe.load_seed) : std::string());
}

ordered_json expert_load_json(const spec::Job& job) {
  const auto& moe = *job.workload.model.moe;
  const bool dropless = !moe.capacity_factor;
  return {{"dropless", dropless},
          {"capacity_factor", dropless ? ordered_json() : ordered_json(*moe.capacity_factor)},
          {"balancing", spec::balancing_name(moe.balancing)},
          {"busiest_expert", dropless ? ordered_json(model::expert_load_imbalance(moe)) : ordered_json()},
          {"load_seed", moe.load_seed ? ordered_json(*moe.load_seed) : ordered_json()},
          {"busiest_rank", model::gpu_layer_shape(job).routed_load}};
}

ordered_json memory_peak_json(const driver::MemoryPeak& p) {
  return {{"stage", p.stage},
          {"rank", p.rank},
          {"time_s", p.time_s},
          {"task", p.task.empty() ? ordered_json() : ordered_json(p.task)},
          {"microbatch", p.microbatch >= 0 ? ordered_json(p.microbatch) : ordered_json()},
          {"phase", p.phase.empty() ? ordered_json() : ordered_json(p.phase)},
          {"live",
           {{"static", p.live_static.count},
            {"activations", p.live_activations.count},
            {"buffers", p.live_buffers.count}}}};
}

// Live bytes of each stage's first simulated rank over the step, kMemoryCurvePoints slices.
constexpr std::size_t kMemoryCurvePoints = 100;
ordered_json memory_curve_json(const RunReport& r) {
  ordered_json out = ordered_json::array();
  for (const auto& c : driver::memory_curves(r, kMemoryCurvePoints)) {
    ordered_json points = ordered_json::array();
    for (const auto& [t, bytes] : c.points) points.push_back({t, static_cast<std::int64_t>(bytes)});
    out.push_back({{"stage", c.stage}, {"rank", c.rank}, {"points", std::move(points)}});
  }
  return out;
}

// Memory of a stage: static parts from the model, the rest as the timeline saw it at the peak.
model::MemoryBreakdown stage_breakdown(const RunReport& r, int stage) {
  const auto& estimate = r.memory.stages.at(static_cast<std::size_t>(stage));
  auto m = estimate.bytes;
  if (!r.simulation) return m;
  for (const auto& f : r.simulation->per_stage) {
    if (f.stage != stage) continue;
    m.activations = Bytes{f.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)]};
    m.buffers = Bytes{f.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Buffers)]};
    m.fragmentation = Bytes{f.reserve};
    m.buffers = m.buffers + r.runtime_memory + estimate.held_buffers;
  }
  return m;
}

}  // namespace

namespace {

// Busy seconds of every task category, in the order of lower::Category, zero when the step has none.
ordered_json busy_json(const driver::Simulation& s) {
  ordered_json out = ordered_json::object();
  for (int c = 0; c < lower::kCategories; ++c) {
    const auto name = std::string(lower::category_name(static_cast<lower::Category>(c)));
    double seconds = 0;
    for (const auto& [category, busy] : s.comm_busy_s)
      if (category == name) seconds = busy;
    out[name] = seconds;
  }
  return out;
}

ordered_json perturbation_json(const driver::Perturbation& p) {
  return {{"steps", p.steps},
          {"unperturbed_step_time_s", p.unperturbed_step_s},
          {"slowdown", p.mean_step_s / p.unperturbed_step_s - 1},
          {"slow_ranks", p.slow_ranks},
          {"degraded_nic_ranks", p.degraded_ranks},
          {"critical_resource", p.critical_resource},
          {"critical_resource_share", p.critical_share},
          {"gpu_hours_per_day", p.gpu_hours_per_day}};
}

std::string stragglers_line(const driver::Perturbation& p, const driver::Simulation& sim, std::int64_t gpus) {
  return fmt::format(
             "mean of {} steps, {}: p50 {:.4f} s, p90 {:.4f} s, p99 {:.4f} s; {:+.1f}% against {:.4f} s "
             "unperturbed, {:.0f} GPU-hours a day; critical path: rank {}, {} {:.0f}%",
             p.steps,
             sim.simulated_ranks == static_cast<std::size_t>(gpus)
                 ? std::string("every rank simulated")
                 : fmt::format("{} of {} ranks simulated (the rest folded)", sim.simulated_ranks, gpus),
             p.p50, p.p90, p.p99, (p.mean_step_s / p.unperturbed_step_s - 1) * 100, p.unperturbed_step_s,
             p.gpu_hours_per_day, p.critical_rank, p.critical_resource, p.critical_share * 100) +
         (p.degraded_ranks.empty() ? std::string()
                                   : fmt::format("; NICs degraded: rank {}", fmt::join(p.degraded_ranks, ", ")));
}

}  // namespace

namespace {

// The stage whose peak the report gives: the first with the simulated step's highest peak, or the
// analytic estimate's.
int reported_peak_stage(const RunReport& r) {
  if (r.simulation)
    for (const auto& f : r.simulation->per_stage)
      if (f.peak_memory == r.simulation->peak_memory) return f.stage;
  return static_cast<int>(r.memory.peak_stage);
}

ordered_json per_stage_json(const RunReport& r) {
  ordered_json out = ordered_json::array();
  for (const auto& st : r.memory.stages) {
    ordered_json entry = {{"stage", st.stage},
                          {"layers", r.job->stage_layers.at(static_cast<std::size_t>(st.stage))},
                          {"params", rounded(st.params)}};
    const auto m = stage_breakdown(r, st.stage);
    if (r.simulation) {
      const auto& f = r.simulation->per_stage.at(static_cast<std::size_t>(st.stage));
      entry["busy_s"] = f.busy_s;
      entry["idle_s"] = f.idle_s;
      entry["bubble_fraction"] = f.bubble_fraction;
      entry["peak_memory_bytes"] = f.peak_memory;
    } else {
      entry["peak_memory_bytes"] = m.total().count;
    }
    entry["memory"] = memory_json(m);
    out.push_back(entry);
  }
  return out;
}

ordered_json layers_json(const RunReport& r) {
  ordered_json out = ordered_json::array();
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
    out.push_back({{"kind", layer.kind}, {"ops", ops}});
  }
  return out;
}

}  // namespace

ordered_json to_json(const RunReport& r) {
  const auto& job = *r.job;
  ordered_json out;
  out["trainsim_version"] = TRAINSIM_VERSION;
  out["topology"] = job.cluster.name;
  out["device"] = job.cluster.device.name;
  out["workload"] = job.workload.name;
  out["training_dtype"] = spec::dtype_name(r.training_dtype);
  out["strategy"] = strategy_json(job);
  out["params_total"] = rounded(r.params_total);
  out["params_per_gpu"] = rounded(r.params_per_gpu);
  if (job.workload.model.moe) out["expert_load"] = expert_load_json(job);
  if (const auto& lora = job.workload.training.lora) {
    // only under LoRA, so that other reports keep their bytes
    out["lora"] = {{"rank", lora->rank},
                   {"modules", lora_module_names(*lora)},
                   {"dropout", lora->dropout},
                   {"params_trainable", rounded(lora_trainable_params(job, *lora))}};
  }
  out["gpus"] = job.gpus;
  if (r.simulation) {
    const auto& s = *r.simulation;
    out["step_time_s"] = s.step_time_s;
    if (const auto& p = r.perturbation) {
      out["step_time_percentiles"] = {{"p50", p->p50}, {"p90", p->p90}, {"p99", p->p99}};
      out["critical_rank"] = p->critical_rank;
      out["perturbation"] = perturbation_json(*p);
    }
    out["tokens_per_s"] = r.tokens_per_s;
    out["tflops_per_gpu"] = r.tflops_per_gpu;
    out["mfu"] = r.mfu;
    out["mfu_dtype"] = spec::dtype_name(r.mfu_dtype);
    out["mfu_peak_tflops"] = r.mfu_peak_flops / 1e12;
    out["mfu_bf16_peak"] = r.mfu_bf16 ? ordered_json(*r.mfu_bf16) : ordered_json();
    out["bubble_fraction"] = s.bubble_fraction;
    out["breakdown"] = {{"compute_s", s.breakdown.compute_s},
                        {"exposed_comm_s", s.breakdown.exposed_comm_s},
                        {"host_bound_s", s.breakdown.host_bound_s},
                        {"bubble_s", s.breakdown.bubble_s}};
    out["busy_s_by_category"] = busy_json(s);
  }
  out["flops"] = {
      {"model_per_step", r.flops.model},
      {"hardware_per_step", r.flops.hardware},
      {"megatron_formula_per_step", job.workload.model.moe ? ordered_json() : ordered_json(r.megatron_formula_flops)},
      {"model_per_token", r.flops.per_token}};
  out["peak_memory_bytes"] = r.peak_memory;
  out["live_peak_memory_bytes"] = r.live_peak_memory;
  out["analytic_peak_memory_bytes"] = r.memory.peak().bytes.total().count;
  out["device_memory_bytes"] = r.device_memory.count;
  out["fits"] = r.fits;
  out["memory_headroom"] = r.memory_headroom;
  out["memory_at_risk"] = r.memory_at_risk;
  out["memory"] = memory_json(stage_breakdown(r, reported_peak_stage(r)));
  if (const auto p = driver::memory_peak(r)) out["memory_peak"] = memory_peak_json(*p);
  out["per_stage"] = per_stage_json(r);
  if (r.simulation) out["memory_curve"] = memory_curve_json(r);
  out["layers"] = layers_json(r);
  if (r.simulation) {
    const auto& s = *r.simulation;
    out["simulation"] = {{"tasks", s.tasks},
                         {"events", s.events},
                         {"simulated_ranks", s.simulated_ranks},
                         {"ranks_per_simulated_rank", s.fold}};
  }
  out["warnings"] = r.warnings;
  return out;
}

namespace {

// The memory lines of the table: the peak stage's breakdown, where the peak happens, each stage.
std::string memory_table(const RunReport& r) {
  const auto& job = *r.job;
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<22}{}\n", label, value);
  };
  const int peak_stage = reported_peak_stage(r);
  const auto m = stage_breakdown(r, peak_stage);
  out += fmt::format("memory per GPU (stage {}, the largest{})\n", peak_stage,
                     r.simulation ? ", at its simulated peak" : "");
  line("  params", human_bytes(m.params));
  line("  grads", human_bytes(m.grads));
  line("  optimizer", human_bytes(m.optimizer));
  line("  activations", human_bytes(m.activations));
  line("  buffers", human_bytes(m.buffers));
  line("  fragmentation", human_bytes(m.fragmentation));
  line("  peak", fmt::format("{} of {}: {}", human_bytes(Bytes{r.peak_memory}), human_bytes(r.device_memory),
                             !r.fits ? "does NOT fit"
                             : r.peak_memory > r.device_memory.count
                                 ? fmt::format("the live tensors ({}) fit if the allocator gives back its "
                                               "reserve: at risk",
                                               human_bytes(Bytes{r.live_peak_memory}))
                             : r.memory_at_risk ? fmt::format("fits, but within the {:.0f}% headroom: at risk",
                                                              r.memory_headroom * 100)
                                                : std::string("fits")));
  if (const auto p = driver::memory_peak(r); p && !p->task.empty())
    line("  peak at",
         fmt::format("{}, {:.4f} s into the step ({}{}, stage {}, rank {})", p->task, p->time_s, p->phase,
                     p->microbatch >= 0 ? fmt::format(" of micro-batch {}", p->microbatch) : "", p->stage, p->rank));
  if (r.memory.stages.size() > 1) {
    out += "per stage\n";
    for (const auto& st : r.memory.stages) {
      const auto sm = stage_breakdown(r, st.stage);
      const std::string bubble =
          r.simulation
              ? fmt::format("  idle {:.1f}%",
                            r.simulation->per_stage.at(static_cast<std::size_t>(st.stage)).bubble_fraction * 100)
              : std::string();
      out += fmt::format("  stage {:<4} {:>3} layers  {:>10} params  peak {}{}\n", st.stage,
                         job.stage_layers.at(static_cast<std::size_t>(st.stage)), human_count(st.params),
                         human_bytes(sm.total()), bubble);
    }
  }
  return out;
}

}  // namespace

std::string to_table(const RunReport& r) {
  const auto& job = *r.job;
  const auto& s = job.strategy;
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<22}{}\n", label, value);
  };
  const auto& node = job.cluster.node;
  const std::string segment = node.idle_hosts == 0 ? ""
                                                   : fmt::format("; segment={}: {} of each {}-device domain",
                                                                 *s.segment, node.devices, node.domain_devices());
  line("workload", fmt::format("{} on {} ({} of {} devices{})", job.workload.name, job.cluster.name, job.gpus,
                               std::int64_t{job.cluster.nodes} * node.domain_devices(), segment));
  auto named = s;  // with its data-parallel degree rather than the device count
  named.dp = job.dp;
  named.gpus.reset();
  line("strategy", spec::strategy_text(named));
  if (!r.fits)
    line("memory",
         does_not_fit_text(r.peak_memory, r.device_memory) + ": every figure below is for a plan that cannot run");
  {
    std::string assumed;
    for (const auto& [key, value] : s.assumed.keys)
      assumed += fmt::format("{}{}={}", assumed.empty() ? "" : ", ", key, value);
    std::string given;
    for (const auto& o : s.overrides.keys)
      given += fmt::format("{}{}={} (preset: {})", given.empty() ? "" : ", ", o.key, o.given, o.preset);
    std::string notes = assumed.empty() ? std::string() : fmt::format("assumed: {}", assumed);
    if (!given.empty()) notes += fmt::format("{}given, winning over the preset: {}", notes.empty() ? "" : "; ", given);
    line("framework", fmt::format("{}{}", spec::framework_name(s.framework),
                                  notes.empty() ? std::string() : fmt::format(" ({})", notes)));
  }
  line("precision", precision_text(r));
  line("micro-batches", fmt::format("{} per step and pipeline", job.micro_batches));
  const int mtp = job.workload.model.mtp_layers;
  const std::string mtp_text =
      mtp == 0 ? std::string()
               : fmt::format(" ({} of them in {} multi-token prediction module{})",
                             human_count(model::count_params(job.workload.model, job.workload.training.seq_len).mtp()),
                             mtp, mtp > 1 ? "s" : "");
  line("parameters", fmt::format("{} total{}, {} per GPU{}", human_count(r.params_total), mtp_text,
                                 human_count(r.params_per_gpu), lora_text(job)));
  if (job.workload.model.moe) line("expert load", expert_load_text(job));
  // the Megatron-LM formula counts a dense GPT: no cross-check for a mixture of experts
  line("model FLOPs/step", job.workload.model.moe
                               ? fmt::format("{:.4g}", r.flops.model)
                               : fmt::format("{:.4g} (Megatron formula {:.4g}{})", r.flops.model,
                                             r.megatron_formula_flops, mtp > 0 ? ", without the modules" : ""));
  line("hardware FLOPs/step", fmt::format("{:.4g}", r.flops.hardware));
  if (r.simulation) {
    const auto& sim = *r.simulation;
    line("step time", fmt::format("{:.4f} s  ({:.0f} tokens/s)", sim.step_time_s, r.tokens_per_s));
    if (const auto& p = r.perturbation) line("stragglers", stragglers_line(*p, sim, job.gpus));
    line("throughput", fmt::format("{:.1f} TFLOP/s per GPU, {}", r.tflops_per_gpu, mfu_text(r)));
    line("breakdown",
         fmt::format("compute {:.4f} s, exposed comm {:.4f} s, host-bound {:.4f} s, bubble {:.4f} s ({:.1f}%)",
                     sim.breakdown.compute_s, sim.breakdown.exposed_comm_s, sim.breakdown.host_bound_s,
                     sim.breakdown.bubble_s, sim.bubble_fraction * 100));
    // kernels (compute, recompute, optimizer) on one line, collectives and transfers on the other
    std::string kernels;
    std::string comm;
    double host = 0;
    for (const auto& [category, seconds] : sim.comm_busy_s) {
      if (category == lower::category_name(lower::Category::Host)) {
        host = seconds;
        continue;
      }
      const bool kernel = category == lower::category_name(lower::Category::Compute) ||
                          category == lower::category_name(lower::Category::Recompute) ||
                          category == lower::category_name(lower::Category::Optimizer);
      auto& text = kernel ? kernels : comm;
      text += fmt::format("{}{} {:.4f} s", text.empty() ? "" : ", ", category, seconds);
    }
    if (!kernels.empty()) line("compute busy", kernels);
    if (!comm.empty()) line("communication busy", comm);
    line("host busy", fmt::format("{:.4f} s launching kernels and collectives ({})", host,
                                  spec::launch_name(spec::launch_of(job.strategy))));
  }
  out += memory_table(r);
  return out;
}

std::string to_csv(const RunReport& r) {
  const auto& job = *r.job;
  const double step = r.simulation ? r.simulation->step_time_s : 0;
  const double bubble = r.simulation ? r.simulation->bubble_fraction : 0;
  std::string out =
      "workload,topology,gpus,tp,pp,dp,cp,ep,zero,mb,params_total,params_per_gpu,model_flops_per_step,step_time_s,"
      "tokens_per_s,tflops_per_gpu,mfu,bubble_fraction,peak_memory_bytes,fits,strategy\n";
  auto named = job.strategy;  // the whole resolved strategy, as run -s reads it back
  named.dp = job.dp;
  named.gpus.reset();
  out +=
      fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.6e},{:.6e},{:.6e},{:.3f},{:.4f},{:.4f},{},{},{}\n",
                  csv_field(job.workload.name), csv_field(job.cluster.name), job.gpus, job.strategy.tp, job.strategy.pp,
                  job.dp, job.strategy.cp, job.strategy.ep, job.strategy.zero, job.strategy.mb, rounded(r.params_total),
                  rounded(r.params_per_gpu), r.flops.model, step, r.tokens_per_s, r.tflops_per_gpu, r.mfu, bubble,
                  r.peak_memory, r.fits ? "true" : "false", csv_field(spec::strategy_text(named)));
  return out;
}

std::string render(const RunReport& report, Format format) {
  switch (format) {
    case Format::Json:
      return json_text(to_json(report)) + "\n";
    case Format::Csv:
      return to_csv(report);
    case Format::Table:
      return to_table(report);
  }
  SIM_ASSERT(false, "unhandled format");
}

}  // namespace trainsim::report
