#include "trainsim/spec/workload_spec.hpp"

#include <array>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

enum class ModelKind { Transformer };
constexpr std::array<Choice<ModelKind>, 1> kModelKinds{{{"transformer", ModelKind::Transformer}}};
constexpr std::array<Choice<MlpKind>, 2> kMlpKinds{{{"gelu", MlpKind::Gelu}, {"swiglu", MlpKind::Swiglu}}};
constexpr std::array<Choice<NormKind>, 2> kNormKinds{
    {{"layernorm", NormKind::LayerNorm}, {"rmsnorm", NormKind::RmsNorm}}};
constexpr std::array<Choice<PositionKind>, 2> kPositionKinds{
    {{"learned", PositionKind::Learned}, {"rope", PositionKind::Rope}}};
constexpr std::array<Choice<Optimizer>, 3> kOptimizers{
    {{"adam", Optimizer::Adam}, {"adamw", Optimizer::Adam}, {"sgd", Optimizer::Sgd}}};
constexpr std::array<Choice<Dtype>, 4> kTrainingDtypes{
    {{"bf16", Dtype::Bf16}, {"fp16", Dtype::Fp16}, {"fp32", Dtype::Fp32}, {"fp8", Dtype::Fp8}}};

MoeSpec read_moe(Reader r, int layers) {
  MoeSpec m;
  m.experts = static_cast<int>(r.integer("experts", {1, 1 << 16}));
  m.top_k = static_cast<int>(r.integer("top_k", {1, 1 << 16}));
  m.expert_ffn_hidden = r.integer("expert_ffn_hidden", {1, 1 << 22});
  m.shared_experts = static_cast<int>(r.integer_or("shared_experts", 0, {0, 64}));
  m.capacity_factor = r.number_or("capacity_factor", 1.0, {1.0, 64.0});
  m.dense_layers = static_cast<int>(r.integer_or("dense_layers", 0, {0, 10000}));
  if (m.top_k > m.experts)
    r.error_at("top_k", fmt::format("{} exceeds the number of experts ({})", m.top_k, m.experts));
  if (m.dense_layers >= layers)
    r.error_at("dense_layers",
               fmt::format("{} leaves no MoE layer among the model's {} layers", m.dense_layers, layers));
  r.finish();
  return m;
}

ModelSpec read_model(Reader r) {
  ModelSpec m;
  r.choice<ModelKind>("kind", kModelKinds);
  m.layers = static_cast<int>(r.integer("layers", {1, 10000}));
  m.hidden = r.integer("hidden", {1, 1 << 20});
  m.heads = static_cast<int>(r.integer("heads", {1, 1 << 14}));
  m.kv_heads = static_cast<int>(r.integer_or("kv_heads", m.heads, {1, 1 << 14}));
  const auto head_dim = r.optional_integer("head_dim", {1, 1 << 14});
  // a model whose every layer is an expert layer has no dense MLP, so no ffn_hidden to give
  const auto* moe_json = r.has("moe") ? r.value("moe") : nullptr;
  bool all_experts = moe_json && moe_json->is_object();
  if (all_experts && moe_json->contains("dense_layers")) {
    const auto& d = moe_json->at("dense_layers");
    all_experts = d.is_number() && d.get<double>() == 0;
  }
  if (all_experts) {
    m.ffn_hidden = r.optional_integer("ffn_hidden", {1, 1 << 22}).value_or(0);
  } else {
    m.ffn_hidden = r.integer("ffn_hidden", {1, 1 << 22});
  }
  m.vocab = r.integer("vocab", {1, 1 << 24});
  m.mlp = r.choice<MlpKind>("mlp", kMlpKinds);
  m.bias = r.boolean_or("bias", true);
  m.norm = r.choice_or<NormKind>("norm", NormKind::LayerNorm, kNormKinds);
  m.position = r.choice_or<PositionKind>("position", PositionKind::Learned, kPositionKinds);
  m.tied_embeddings = r.boolean_or("tied_embeddings", true);
  m.dropout = r.boolean_or("dropout", true);
  if (auto moe = r.optional_object("moe")) m.moe = read_moe(*moe, m.layers);

  if (m.heads % m.kv_heads != 0)
    r.error_at("kv_heads", fmt::format("{} does not divide heads ({})", m.kv_heads, m.heads));
  if (head_dim) {
    m.head_dim = *head_dim;
  } else if (m.hidden % m.heads != 0) {
    r.error_at("heads", fmt::format("{} does not divide hidden ({}); give head_dim to use another head size", m.heads,
                                    m.hidden));
  } else {
    m.head_dim = m.hidden / m.heads;
  }
  r.finish();
  return m;
}

TrainingSpec read_training(Reader r) {
  TrainingSpec t;
  t.seq_len = r.integer("seq_len", {1, 1 << 24});
  t.global_batch = r.integer("global_batch", {1, 1 << 30});
  t.dtype = r.choice<Dtype>("dtype", kTrainingDtypes);
  t.optimizer = r.choice<Optimizer>("optimizer", kOptimizers);
  r.finish();
  return t;
}

}  // namespace

std::string_view mlp_name(MlpKind kind) {
  return choice_name<MlpKind>(kMlpKinds, kind);
}
std::string_view optimizer_name(Optimizer optimizer) {
  return choice_name<Optimizer>(kOptimizers, optimizer);
}

WorkloadSpec read_workload_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader root(json, "", diagnostics);
  WorkloadSpec w;
  w.name = root.string("name");
  root.sources();
  if (auto model = root.optional_object("model"))
    w.model = read_model(*model);
  else
    root.error_at("model", "missing; expected an object with kind, layers, hidden, heads, ffn_hidden, vocab, mlp");
  if (auto training = root.optional_object("training"))
    w.training = read_training(*training);
  else
    root.error_at("training", "missing; expected an object with seq_len, global_batch, dtype, optimizer");
  root.finish();
  diagnostics.throw_if_any(source);
  return w;
}

WorkloadSpec load_workload_spec(const std::string& path) {
  return read_workload_spec(load_json_file(path), path);
}

}  // namespace trainsim::spec
