#include "trainsim/spec/workload_spec.hpp"

#include <algorithm>
#include <array>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {

MlaSpec read_mla_keys(Reader& r) {
  MlaSpec a;
  a.q_lora_rank = r.integer_or("q_lora_rank", 0, {0, 1 << 20});
  a.kv_lora_rank = r.integer("kv_lora_rank", {1, 1 << 20});
  a.qk_nope_head_dim = r.integer("qk_nope_head_dim", {1, 1 << 14});
  a.qk_rope_head_dim = r.integer("qk_rope_head_dim", {1, 1 << 14});
  a.v_head_dim = r.integer("v_head_dim", {1, 1 << 14});
  return a;
}

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
constexpr std::array<Choice<Balancing>, 4> kBalancings{{{"aux_loss", Balancing::AuxLoss},
                                                        {"global_aux_loss", Balancing::GlobalAuxLoss},
                                                        {"aux_free", Balancing::AuxFree},
                                                        {"forced", Balancing::Forced}}};
constexpr std::array<Choice<Dtype>, 4> kTrainingDtypes{
    {{"bf16", Dtype::Bf16}, {"fp16", Dtype::Fp16}, {"fp32", Dtype::Fp32}, {"fp8", Dtype::Fp8}}};

// How the experts' loads are given (docs/model.md "Expert load"): a capacity every expert is
// padded to, or dropless routing's balancing, busiest expert and seed; each key only where it acts.
void read_expert_load(Reader& r, MoeSpec& m) {
  if (r.has("capacity_factor")) m.capacity_factor = r.number("capacity_factor", {1.0, 64.0});
  for (const auto* key : {"balancing", "load_imbalance", "load_seed"})
    if (m.capacity_factor && r.has(key))
      r.error_at(key, "applies to dropless routing only; with capacity_factor every expert takes its capacity");
  m.balancing = r.choice_or<Balancing>("balancing", Balancing::AuxLoss, kBalancings);
  // every token choosing one expert gives it experts/top_k times the mean, the most there is
  const double most = static_cast<double>(m.experts) / m.top_k;
  if (r.has("load_imbalance")) m.load_imbalance = r.number("load_imbalance", {1.0, std::max(1.0, most)});
  if (const auto seed = r.optional_integer("load_seed", {0, std::int64_t{1} << 62}))
    m.load_seed = static_cast<std::uint64_t>(*seed);
  if (m.balancing == Balancing::Forced && m.load_imbalance && *m.load_imbalance != 1.0)
    r.error_at("load_imbalance", fmt::format("{} contradicts balancing \"forced\" (1)", *m.load_imbalance));
  const bool even = m.balancing == Balancing::Forced || m.load_imbalance == 1.0 || m.experts <= m.top_k;
  if (m.load_seed && even) r.error_at("load_seed", "draws nothing: the experts' loads are even");
}

MoeSpec read_moe(Reader r, int layers) {
  MoeSpec m;
  m.experts = static_cast<int>(r.integer("experts", {1, 1 << 16}));
  m.top_k = static_cast<int>(r.integer("top_k", {1, 1 << 16}));
  m.expert_ffn_hidden = r.integer("expert_ffn_hidden", {1, 1 << 22});
  m.shared_experts = static_cast<int>(r.integer_or("shared_experts", 0, {0, 64}));
  read_expert_load(r, m);
  m.dense_layers = static_cast<int>(r.integer_or("dense_layers", 0, {0, 10000}));
  m.layer_step = static_cast<int>(r.integer_or("layer_step", 1, {1, 10000}));
  m.groups = static_cast<int>(r.integer_or("groups", 1, {1, 1 << 16}));
  m.group_top_k = static_cast<int>(r.integer_or("group_top_k", m.groups, {1, 1 << 16}));
  if (m.top_k > m.experts)
    r.error_at("top_k", fmt::format("{} exceeds the number of experts ({})", m.top_k, m.experts));
  else
    check_routing_groups(r, m, "groups", "group_top_k");
  if (m.dense_layers >= layers)
    r.error_at("dense_layers",
               fmt::format("{} leaves no MoE layer among the model's {} layers", m.dense_layers, layers));
  else if (m.layer_step > layers)
    r.error_at("layer_step", fmt::format("{} leaves no MoE layer among the model's {} layers", m.layer_step, layers));
  r.finish();
  return m;
}

MlaSpec read_mla(Reader r) {
  auto a = read_mla_keys(r);
  r.finish();
  return a;
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
  for (const auto* key : {"dense_layers", "layer_step"}) {
    if (!all_experts || !moe_json->contains(key)) continue;
    const auto& d = moe_json->at(key);
    all_experts = d.is_number() && d.get<double>() == (std::string_view(key) == "layer_step" ? 1 : 0);
  }
  if (all_experts) {
    m.ffn_hidden = r.optional_integer("ffn_hidden", {1, 1 << 22}).value_or(0);
  } else {
    m.ffn_hidden = r.integer("ffn_hidden", {1, 1 << 22});
  }
  m.vocab = r.integer("vocab", {1, 1 << 24});
  m.mlp = r.choice<MlpKind>("mlp", kMlpKinds);
  m.bias = r.boolean_or("bias", true);
  m.qkv_bias = r.boolean_or("qkv_bias", false);
  m.norm = r.choice_or<NormKind>("norm", NormKind::LayerNorm, kNormKinds);
  m.position = r.choice_or<PositionKind>("position", PositionKind::Learned, kPositionKinds);
  m.tied_embeddings = r.boolean_or("tied_embeddings", true);
  m.dropout = r.boolean_or("dropout", true);
  if (auto moe = r.optional_object("moe")) m.moe = read_moe(*moe, m.layers);
  m.mtp_layers = static_cast<int>(r.integer_or("mtp_layers", 0, {0, 64}));
  if (auto mla = r.optional_object("mla")) m.mla = read_mla(*mla);

  if (m.heads % m.kv_heads != 0)
    r.error_at("kv_heads", fmt::format("{} does not divide heads ({})", m.kv_heads, m.heads));
  if (m.mla) {
    // every head has its own key and value, rebuilt from the shared latent
    if (m.kv_heads != m.heads)
      r.error_at("kv_heads", fmt::format("{} differs from heads ({}): multi-head latent attention gives every head "
                                         "its own key and value",
                                         m.kv_heads, m.heads));
    if (head_dim && *head_dim != m.mla->qk_head_dim())
      r.error_at("head_dim", fmt::format("{} differs from mla's qk_nope_head_dim + qk_rope_head_dim ({})", *head_dim,
                                         m.mla->qk_head_dim()));
    m.head_dim = m.mla->qk_head_dim();
  } else if (head_dim) {
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

constexpr std::array<Choice<LoraModule>, 4> kLoraModules{
    {{"qkv", LoraModule::Qkv}, {"out_proj", LoraModule::OutProj}, {"fc1", LoraModule::Fc1}, {"fc2", LoraModule::Fc2}}};

LoraSpec read_lora(Reader r) {
  LoraSpec lora;
  lora.rank = static_cast<int>(r.integer("rank", {1, 1 << 16}));
  lora.dropout = r.number_or("dropout", 0.0, {0.0, 0.99});
  std::vector<std::string_view> names;
  for (const auto& c : kLoraModules) names.push_back(c.name);
  const auto* modules = r.value("modules");
  if (modules == nullptr || !modules->is_array() || modules->empty()) {
    r.error_at("modules", fmt::format("expected a non-empty array of {}", fmt::join(names, ", ")));
  } else {
    auto list = r.child("modules");  // element errors at /modules/<i>
    for (std::size_t i = 0; i < modules->size(); ++i) {
      const auto& m = (*modules)[i];
      const auto it = m.is_string() ? std::find_if(kLoraModules.begin(), kLoraModules.end(),
                                                   [&](const auto& c) { return c.name == m.get<std::string>(); })
                                    : kLoraModules.end();
      if (it == kLoraModules.end()) {
        list.error_at(std::to_string(i), fmt::format("{} is not one of {}", describe(m), fmt::join(names, ", ")));
      } else if (std::find(lora.modules.begin(), lora.modules.end(), it->value) != lora.modules.end()) {
        list.error_at(std::to_string(i), fmt::format("\"{}\" is given twice", it->name));
      } else {
        lora.modules.push_back(it->value);
      }
    }
  }
  r.finish();
  return lora;
}

TrainingSpec read_training(Reader r) {
  TrainingSpec t;
  t.seq_len = r.integer("seq_len", {1, 1 << 24});
  t.global_batch = r.integer("global_batch", {1, 1 << 30});
  t.dtype = r.choice<Dtype>("dtype", kTrainingDtypes);
  t.optimizer = r.choice<Optimizer>("optimizer", kOptimizers);
  if (auto lora = r.optional_object("lora")) t.lora = read_lora(*lora);
  r.finish();
  return t;
}

}  // namespace

void check_routing_groups(Reader& r, const MoeSpec& m, std::string_view groups_key, std::string_view top_key) {
  if (m.experts % m.groups != 0) {
    r.error_at(groups_key, fmt::format("{} does not divide the {} experts into equal groups", m.groups, m.experts));
  } else if (m.group_top_k > m.groups) {
    r.error_at(top_key, fmt::format("{} exceeds the number of groups ({})", m.group_top_k, m.groups));
  } else if (m.top_k > m.group_top_k * (m.experts / m.groups)) {
    r.error_at(top_key, fmt::format("{} group(s) of {} experts cannot hold the top_k of {}", m.group_top_k,
                                    m.experts / m.groups, m.top_k));
  }
}

std::string_view balancing_name(Balancing balancing) {
  return choice_name<Balancing>(kBalancings, balancing);
}

std::string_view mlp_name(MlpKind kind) {
  return choice_name<MlpKind>(kMlpKinds, kind);
}
namespace {
template <class E, std::size_t N>
E named(const std::array<Choice<E>, N>& choices, std::string_view name, const std::string& source,
        std::string_view what) {
  for (const auto& c : choices)
    if (c.name == name) return c.value;
  std::vector<std::string_view> names;
  for (const auto& c : choices) names.push_back(c.name);
  throw SpecError(source, "", fmt::format("{} \"{}\" is not one of {}", what, name, fmt::join(names, ", ")));
}
}  // namespace

Dtype training_dtype_named(std::string_view name, const std::string& source) {
  return named(kTrainingDtypes, name, source, "training dtype");
}
Optimizer optimizer_named(std::string_view name, const std::string& source) {
  return named(kOptimizers, name, source, "optimizer");
}

std::string_view lora_module_name(LoraModule module) {
  return choice_name<LoraModule>(kLoraModules, module);
}

std::string_view optimizer_name(Optimizer optimizer) {
  return choice_name<Optimizer>(kOptimizers, optimizer);
}

namespace {
// LoRA adapters sit beside a dense layer's four linear layers; an MoE block's experts and
// multi-head latent attention's projections have no adapter placement here.
void check_lora(const WorkloadSpec& w, const std::string& source) {
  if (!w.training.lora) return;
  if (w.model.moe)
    throw SpecError(source, "/training/lora",
                    "LoRA is modelled on dense layers (qkv, out_proj, fc1, fc2); this model has experts");
  if (w.model.mla)
    throw SpecError(source, "/training/lora",
                    "LoRA is modelled on dense layers (qkv, out_proj, fc1, fc2); this model has multi-head latent "
                    "attention");
  if (w.model.mtp_layers > 0)
    throw SpecError(source, "/training/lora",
                    "LoRA is modelled on the model's layers; this model has multi-token prediction modules "
                    "(model.mtp_layers), whose adapters are not placed");
}
}  // namespace

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
  check_lora(w, source);
  return w;
}

namespace {

// The command line's training settings over a training object.
void apply_overrides(nlohmann::json& training, const TrainingOverrides& o) {
  if (o.seq_len) training["seq_len"] = *o.seq_len;
  if (o.global_batch) training["global_batch"] = *o.global_batch;
  if (o.dtype) training["dtype"] = *o.dtype;
  if (o.optimizer) training["optimizer"] = *o.optimizer;
}

// A name for a model read from a Hugging Face config: the hub name it records, else its folder
// (configs are called config.json), else the file's stem.
std::string hf_name(const nlohmann::json& config, const std::string& path) {
  if (const auto it = config.find("_name_or_path"); it != config.end() && it->is_string() && !it->empty())
    return it->get<std::string>();
  const std::filesystem::path p(path);
  if (p.filename() == "config.json" && p.has_parent_path() && !p.parent_path().filename().empty())
    return p.parent_path().filename().string();
  return p.stem().string();
}

// A Hugging Face config's model with training settings from a wrapper and the command line.
WorkloadSpec read_hf_workload(const nlohmann::json& config, const std::string& config_path, nlohmann::json training,
                              const std::string& source, const TrainingOverrides& overrides) {
  WorkloadSpec w;
  w.name = hf_name(config, config_path);
  w.model = read_hf_model(config, config_path, w.warnings);
  apply_overrides(training, overrides);
  std::vector<std::string> missing;
  for (const auto* key : {"seq_len", "global_batch"})
    if (!training.contains(key))
      missing.push_back(fmt::format("--{}", key == std::string_view("seq_len") ? "seq-len" : "global-batch"));
  if (!missing.empty())
    throw SpecError(source, "",
                    fmt::format("a Hugging Face config holds no training settings: give {} (or a wrapper "
                                "{{\"hf_config\": \"config.json\", \"training\": {{...}}}})",
                                fmt::join(missing, " and ")));
  for (const auto& [key, value] : {std::pair{"dtype", "bf16"}, std::pair{"optimizer", "adamw"}})
    if (!training.contains(key)) {
      training[key] = value;
      w.warnings.push_back(fmt::format("training {} not given (--{}): {} assumed", key, key, value));
    }
  Diagnostics diagnostics;
  w.training = read_training(Reader(training, "/training", diagnostics));
  diagnostics.throw_if_any(source);
  check_lora(w, source);
  return w;
}

// {"hf_config": "PATH", "name": ..., "training": {...}}: PATH relative to the wrapper's folder.
WorkloadSpec read_hf_wrapper(const nlohmann::json& json, const std::string& path, const TrainingOverrides& overrides) {
  Diagnostics diagnostics;
  Reader r(json, "", diagnostics);
  const auto config_file = r.string("hf_config");
  const auto name = r.has("name") ? std::optional(r.string("name")) : std::nullopt;
  nlohmann::json training = nlohmann::json::object();
  if (const auto* t = r.value("training")) {
    if (t->is_object())
      training = *t;
    else
      r.error_at("training", fmt::format("expected an object, got {}", describe(*t)));
  }
  r.sources();
  r.finish();
  diagnostics.throw_if_any(path);
  const auto config_path = (std::filesystem::path(path).parent_path() / config_file).string();
  const auto config = load_json_file(config_path);
  if (!is_hf_config(config))
    throw SpecError(config_path, "", "not a Hugging Face config: it has neither model_type nor architectures");
  auto w = read_hf_workload(config, config_path, std::move(training), path, overrides);
  if (name) w.name = *name;
  return w;
}

}  // namespace

WorkloadSpec workload_from_json(nlohmann::json json, const std::string& source, const TrainingOverrides& overrides) {
  if (json.is_object() && json.contains("hf_config")) return read_hf_wrapper(json, source, overrides);
  if (is_hf_config(json)) return read_hf_workload(json, source, nlohmann::json::object(), source, overrides);
  if (!overrides.empty() && json.is_object() && json.contains("training") && json["training"].is_object())
    apply_overrides(json["training"], overrides);
  return read_workload_spec(json, source);
}

WorkloadSpec load_workload_spec(const std::string& path, const TrainingOverrides& overrides) {
  return workload_from_json(load_json_file(path), path, overrides);
}

}  // namespace trainsim::spec
