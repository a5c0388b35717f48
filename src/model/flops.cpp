#include "trainsim/model/flops.hpp"

#include "trainsim/model/expert_load.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/model/saved_tensors.hpp"

namespace trainsim::model {

LayerShape gpu_layer_shape(const spec::Job& job) {
  const auto& s = job.strategy;
  const auto& m = job.workload.model;
  return LayerShape{.micro_batch = s.mb,
                    .seq_len = job.workload.training.seq_len,
                    .tp = s.tp,
                    .cp = s.cp,
                    .ep = s.ep,
                    .etp = spec::expert_tp_of(s),
                    .sp = s.sp && s.tp > 1,
                    .activation_bytes = activation_bytes(job.workload.training.dtype),
                    .loss_bytes_per_logit = spec::loss_bytes_per_logit(s.loss),
                    .loss_cached_bytes_per_logit = spec::loss_cached_bytes_per_logit(s.loss),
                    .loss_fused_linear = s.loss == spec::LossImpl::FusedLinear,
                    .loss_traffic = spec::loss_traffic_per_logit(
                        s.loss, s.compile && spec::framework_preset(s.framework).compile_is_torch_compile),
                    .sp_saves_gathered = s.sp_saves_gathered,
                    .lora = spec::lora_of(job.workload.training),
                    .routed_load = m.moe ? busiest_rank_load(*m.moe, s.ep, count_params(m, 0).moe_layers) : 1.0};
}

double replayed_fwd_flops(const std::vector<Op>& ops, const LayerCheckpoint& checkpoint) {
  double flops = 0;
  for (const auto& op : ops) {
    if (checkpoint.whole_layer) {
      flops += op.fwd_flops;
      continue;
    }
    for (const auto& r : checkpoint.replayed)
      if (r.op == op.name) flops += op.fwd_flops * r.share;
  }
  return flops;
}

namespace {
// The weight-gradient FLOPs among `ops`, which frozen weights (LoRA) skip.
double weight_grad_flops(const std::vector<Op>& ops) {
  double flops = 0;
  for (const auto& op : ops)
    if (multiplies_weights(op)) flops += op.bwd_weight_flops;
  return flops;
}
}  // namespace

StepFlops step_flops(const spec::Job& job) {
  // Count the whole batch on one unsharded "GPU": sharding changes who computes, not how much.
  // (routed_load stays 1: padding slots and the busiest rank's excess are not model work)
  const spec::ModelSpec& model = job.workload.model;
  const LayerShape whole{.micro_batch = job.workload.training.global_batch,
                         .seq_len = job.workload.training.seq_len,
                         .activation_bytes = 2,
                         .lora = spec::lora_of(job.workload.training)};
  StepFlops f;
  const bool frozen = job.workload.training.lora.has_value();  // no weight gradients of the base model
  double recompute = 0;
  // the share of the layers recomputed whole: full recomputation's (all, or recompute_layers per
  // chunk) with the compiler's (remat_to_fit); the policy's replay on the others
  const auto& st = job.strategy;
  double recomputed_share = st.recompute == spec::Recompute::Full ? 1.0 : 0.0;
  if ((st.recompute_layers || st.recompute_period || st.remat_layers > 0) && !job.stage_layers.empty()) {
    int recomputed = 0;
    for (std::size_t s = 0; s < job.stage_layers.size(); ++s)
      recomputed += spec::recomputed_layers(job, static_cast<int>(s));
    recomputed_share = static_cast<double>(recomputed) / model.layers;
  }
  // the multi-token prediction modules' layers after the model's, each recomputed as the lowering
  // numbers it (spec::recomputes_mtp_layer)
  const auto module_share = [&](int j) {
    if (job.stage_layers.empty()) return recomputed_share;
    return spec::recomputes_mtp_layer(job, j) ? 1.0 : 0.0;
  };
  for (int layer = 0; layer < model.layers + model.mtp_layers; ++layer) {
    const auto ops = layer_ops(model, whole, is_moe_layer(model, layer));
    const auto flops = sum_flops(ops);
    const double share = layer < model.layers ? recomputed_share : module_share(layer - model.layers);
    f.model += flops.total() - (frozen ? weight_grad_flops(ops) : 0.0);
    switch (st.recompute) {
      case spec::Recompute::Full:
        recompute += flops.fwd * share;
        break;
      case spec::Recompute::Selective:
      case spec::Recompute::Op:
      case spec::Recompute::Dots:
        recompute += flops.fwd * share +
                     (1 - share) * replayed_fwd_flops(
                                       ops, layer_checkpoint(job, model, whole, is_moe_layer(model, layer), false));
        break;
      case spec::Recompute::None:
        recompute += flops.fwd * share;
        break;
    }
  }
  const auto head = head_ops(model, whole);
  f.model += sum_flops(head).total() - (frozen ? weight_grad_flops(head) : 0.0);
  f.hardware = f.model + recompute;
  f.per_token = f.model / (static_cast<double>(job.workload.training.global_batch) *
                           static_cast<double>(job.workload.training.seq_len));
  return f;
}

double megatron_formula_flops(const spec::WorkloadSpec& workload, bool full_recompute) {
  const double B = static_cast<double>(workload.training.global_batch);
  const double s = static_cast<double>(workload.training.seq_len);
  const double l = workload.model.layers;
  const double h = static_cast<double>(workload.model.hidden);
  const double V = static_cast<double>(workload.model.vocab);
  if (full_recompute) return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

}  // namespace trainsim::model
