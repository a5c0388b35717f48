// Hugging Face model configs (config.json) as trainsim models. Each family reads the key names of
// its configuration_*.py in transformers; docs/cli.md "Hugging Face configs" lists them.
#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::spec {
namespace {

enum class Family { Llama, Mistral, Mixtral, Qwen2, Qwen2Moe, Qwen3, Qwen3Moe, DeepseekV2, DeepseekV3, Gpt2, GptNeox };

constexpr std::array<Choice<Family>, 11> kFamilies{{{"llama", Family::Llama},
                                                    {"mistral", Family::Mistral},
                                                    {"mixtral", Family::Mixtral},
                                                    {"qwen2", Family::Qwen2},
                                                    {"qwen2_moe", Family::Qwen2Moe},
                                                    {"qwen3", Family::Qwen3},
                                                    {"qwen3_moe", Family::Qwen3Moe},
                                                    {"deepseek_v2", Family::DeepseekV2},
                                                    {"deepseek_v3", Family::DeepseekV3},
                                                    {"gpt2", Family::Gpt2},
                                                    {"gpt_neox", Family::GptNeox}}};

// Keys that do not change what a training step costs: token ids, initialisation, norm epsilons,
// rotary frequencies and scaling, dropout of inference-only heads, routing details that leave the
// expert count and top-k alone, bookkeeping. Read silently.
const std::set<std::string, std::less<>> kCostFreeKeys{"_name_or_path",
                                                       "architectures",
                                                       "auto_map",
                                                       "aux_loss_alpha",
                                                       "bos_token_id",
                                                       "classifier_dropout",
                                                       "decoder_start_token_id",
                                                       "eos_token_id",
                                                       "ep_size",
                                                       "id2label",
                                                       "initializer_range",
                                                       "label2id",
                                                       "layer_norm_eps",
                                                       "layer_norm_epsilon",
                                                       "max_position_embeddings",
                                                       "max_window_layers",
                                                       "model_type",
                                                       "n_ctx",
                                                       "norm_topk_prob",
                                                       "output_router_logits",
                                                       "pad_token_id",
                                                       "pretraining_tp",
                                                       "quantization_config",
                                                       "rms_norm_eps",
                                                       "rope_interleave",
                                                       "rope_scaling",
                                                       "rope_theta",
                                                       "rotary_emb_base",
                                                       "routed_scaling_factor",
                                                       "router_aux_loss_coef",
                                                       "router_jitter_noise",
                                                       "scale_attn_by_inverse_layer_idx",
                                                       "scale_attn_weights",
                                                       "reorder_and_upcast_attn",
                                                       "scoring_func",
                                                       "seq_aux",
                                                       "summary_activation",
                                                       "summary_first_dropout",
                                                       "summary_proj_to_labels",
                                                       "summary_type",
                                                       "summary_use_proj",
                                                       "task_specific_params",
                                                       "torch_dtype",
                                                       "transformers_version",
                                                       "use_cache",
                                                       "use_parallel_residual",
                                                       "hidden_act",
                                                       "activation_function",
                                                       "attention_dropout",
                                                       "hidden_dropout",
                                                       "tokenizer_class",
                                                       "is_decoder",
                                                       "bad_words_ids",
                                                       "dtype",
                                                       "moe_layer_freq"};

// The keys every Llama-like family shares (LlamaConfig): dimensions, GQA, tying, biases.
struct LlamaLike {
  Reader& r;
  ModelSpec& m;
  void read(bool bias_default) {
    m.layers = static_cast<int>(r.integer("num_hidden_layers", {1, 10000}));
    m.hidden = r.integer("hidden_size", {1, 1 << 20});
    m.heads = static_cast<int>(r.integer("num_attention_heads", {1, 1 << 14}));
    m.kv_heads = static_cast<int>(r.integer_or("num_key_value_heads", m.heads, {1, 1 << 14}));
    m.vocab = r.integer("vocab_size", {1, 1 << 24});
    m.mlp = MlpKind::Swiglu;  // gate, up and down projections whatever hidden_act is
    m.norm = NormKind::RmsNorm;
    m.position = PositionKind::Rope;
    m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
    m.dropout = false;
    // (one flag adds biases to every projection: Qwen2's q, k and v biases alone are a
    // hundred-thousandth of its parameters)
    const bool attention_bias = r.boolean_or("attention_bias", bias_default);
    const bool mlp_bias = r.boolean_or("mlp_bias", false);
    m.bias = attention_bias || mlp_bias;
  }
  void head_dim() {
    const auto d = r.optional_integer("head_dim", {1, 1 << 14});
    // (a missing dimension is reported already)
    if (!r.has("hidden_size") || !r.has("num_attention_heads")) return;
    if (d) {
      m.head_dim = *d;
    } else if (m.hidden % m.heads != 0) {
      r.error_at("num_attention_heads", fmt::format("{} does not divide hidden_size ({}) and no head_dim is given",
                                                    m.heads, m.hidden));
    } else {
      m.head_dim = m.hidden / m.heads;
    }
    if (m.heads % m.kv_heads != 0)
      r.error_at("num_key_value_heads",
                 fmt::format("{} does not divide num_attention_heads ({})", m.kv_heads, m.heads));
  }
};

// A sliding window shorter than any sequence changes attention's cost; it is not modelled.
void sliding_window(Reader& r, bool enabled, std::vector<std::string>& warnings) {
  if (!r.has("sliding_window")) return;
  if (enabled)
    warnings.push_back(fmt::format("{}/sliding_window: attention over a window of {} tokens is not modelled: "
                                   "attention is costed over the whole sequence",
                                   r.pointer(), r.value("sliding_window")->dump()));
}

// The MoE keys of the Qwen2-MoE and Qwen3-MoE configs: experts, top-k, expert width, shared
// experts, and which layers are sparse (decoder_sparse_step, mlp_only_layers).
MoeSpec read_qwen_moe(Reader& r, const ModelSpec& m, bool shared) {
  MoeSpec e;
  e.experts = static_cast<int>(r.integer("num_experts", {1, 1 << 16}));
  e.top_k = static_cast<int>(r.integer("num_experts_per_tok", {1, 1 << 16}));
  e.expert_ffn_hidden = r.integer("moe_intermediate_size", {1, 1 << 22});
  if (shared) {
    const auto width = r.integer_or("shared_expert_intermediate_size", 0, {0, 1 << 24});
    if (width % e.expert_ffn_hidden != 0)
      r.error_at("shared_expert_intermediate_size",
                 fmt::format("{} is not a multiple of moe_intermediate_size ({}): shared experts are modelled as "
                             "whole experts",
                             width, e.expert_ffn_hidden));
    e.shared_experts = static_cast<int>(width / e.expert_ffn_hidden);
  }
  e.layer_step = static_cast<int>(r.integer_or("decoder_sparse_step", 1, {1, 10000}));
  if (const auto* dense = r.value("mlp_only_layers")) {
    // a leading run 0, 1, …, k−1 of dense layers is modelled; any other pattern is not
    bool prefix = dense->is_array();
    for (std::size_t i = 0; prefix && i < dense->size(); ++i)
      prefix = (*dense)[i].is_number_integer() && (*dense)[i].get<std::int64_t>() == static_cast<std::int64_t>(i);
    if (!prefix)
      r.error_at("mlp_only_layers", fmt::format("{} is not a leading run of layers (0, 1, …, k−1): only such dense "
                                                "layers are modelled",
                                                dense->dump()));
    else
      e.dense_layers = static_cast<int>(dense->size());
  }
  if (e.top_k > e.experts)
    r.error_at("num_experts_per_tok", fmt::format("{} exceeds num_experts ({})", e.top_k, e.experts));
  if (e.dense_layers >= m.layers)
    r.error_at("mlp_only_layers", fmt::format("leaves no MoE layer among the {} layers", m.layers));
  return e;
}

// DeepSeek-V2/V3: Llama's keys, multi-head latent attention, routed and shared experts after the
// first dense layers, the multi-token prediction modules (V3's one).
void read_deepseek(Reader& r, ModelSpec& m) {
  LlamaLike llama{r, m};
  llama.read(false);
  m.ffn_hidden = r.integer("intermediate_size", {1, 1 << 22});
  // (the Hugging Face config names the keys as a workload's model.mla does)
  const auto a = read_mla_keys(r);
  m.mla = a;
  m.head_dim = a.qk_head_dim();
  if (m.kv_heads != m.heads)
    r.error_at("num_key_value_heads",
               fmt::format("{} differs from num_attention_heads ({}): multi-head latent attention gives every "
                           "head its own key and value",
                           m.kv_heads, m.heads));
  MoeSpec e;
  e.experts = static_cast<int>(r.integer("n_routed_experts", {1, 1 << 16}));
  e.top_k = static_cast<int>(r.integer("num_experts_per_tok", {1, 1 << 16}));
  e.expert_ffn_hidden = r.integer("moe_intermediate_size", {1, 1 << 22});
  e.shared_experts = static_cast<int>(r.integer_or("n_shared_experts", 0, {0, 64}));
  e.dense_layers = static_cast<int>(r.integer_or("first_k_dense_replace", 0, {0, 10000}));
  // group-limited routing (DeepSeek-V2's group_limited_greedy, V3's noaux_tc: 8 groups, the best 3
  // or 4 per token); topk_method "greedy" picks from every expert whatever n_group says
  e.groups = static_cast<int>(r.integer_or("n_group", 1, {1, 1 << 16}));
  e.group_top_k = static_cast<int>(r.integer_or("topk_group", e.groups, {1, 1 << 16}));
  const auto topk_method = r.string_or("topk_method", "greedy");
  if (topk_method == "greedy") e.groups = e.group_top_k = 1;
  // DeepSeek-V3's noaux_tc balances the experts by a bias on their scores, not an auxiliary loss
  if (topk_method == "noaux_tc") e.balancing = Balancing::AuxFree;
  if (e.top_k <= e.experts) check_routing_groups(r, e, "n_group", "topk_group");
  if (const auto freq = r.optional_integer("moe_layer_freq", {1, 10000}); freq && *freq != 1)
    r.error_at("moe_layer_freq", fmt::format("{}: only every layer after first_k_dense_replace being an MoE "
                                             "layer (1) is modelled",
                                             *freq));
  if (e.top_k > e.experts)
    r.error_at("num_experts_per_tok", fmt::format("{} exceeds n_routed_experts ({})", e.top_k, e.experts));
  if (e.dense_layers >= m.layers)
    r.error_at("first_k_dense_replace", fmt::format("{} leaves no MoE layer among the {} layers",
                                                    e.dense_layers, m.layers));
  m.moe = e;
  m.mtp_layers = static_cast<int>(r.integer_or("num_nextn_predict_layers", 0, {0, 64}));
}

// GPT-2: GeLU MLP, LayerNorm, learned positions, tied embeddings, biases, dropout.
void read_gpt2(Reader& r, ModelSpec& m) {
  m.layers = static_cast<int>(r.integer("n_layer", {1, 10000}));
  m.hidden = r.integer("n_embd", {1, 1 << 20});
  m.heads = static_cast<int>(r.integer("n_head", {1, 1 << 14}));
  m.kv_heads = m.heads;
  m.vocab = r.integer("vocab_size", {1, 1 << 24});
  m.ffn_hidden = r.integer_or("n_inner", 4 * m.hidden, {1, 1 << 22});
  r.has("n_positions");  // learned positions: as many as the training sequence uses
  m.mlp = MlpKind::Gelu;
  m.norm = NormKind::LayerNorm;
  m.position = PositionKind::Learned;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  m.bias = true;
  double dropout = 0;
  for (const auto* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"})
    dropout = std::max(dropout, r.number_or(key, 0.1, {0, 1}));
  m.dropout = dropout > 0;
  if (!r.has("n_embd") || !r.has("n_head")) return;  // reported already
  if (m.hidden % m.heads != 0)
    r.error_at("n_head", fmt::format("{} does not divide n_embd ({})", m.heads, m.hidden));
  else
    m.head_dim = m.hidden / m.heads;
}

// GPT-NeoX: GeLU MLP, LayerNorm, rotary embeddings (on rotary_pct of each head).
void read_gpt_neox(Reader& r, ModelSpec& m, std::vector<std::string>& warnings) {
  m.layers = static_cast<int>(r.integer("num_hidden_layers", {1, 10000}));
  m.hidden = r.integer("hidden_size", {1, 1 << 20});
  m.heads = static_cast<int>(r.integer("num_attention_heads", {1, 1 << 14}));
  m.kv_heads = m.heads;
  m.vocab = r.integer("vocab_size", {1, 1 << 24});
  m.ffn_hidden = r.integer("intermediate_size", {1, 1 << 22});
  m.mlp = MlpKind::Gelu;
  m.norm = NormKind::LayerNorm;
  m.position = PositionKind::Rope;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.bias = r.boolean_or("attention_bias", true);
  m.dropout = std::max(r.number_or("hidden_dropout", 0, {0, 1}), r.number_or("attention_dropout", 0, {0, 1})) > 0;
  if (const double pct = r.number_or("rotary_pct", 1.0, {0, 1}); pct < 1)
    warnings.push_back(fmt::format("{}/rotary_pct: rotary embeddings on {:g} of each head are costed as on all "
                                   "of it",
                                   r.pointer(), pct));
  if (!r.has("hidden_size") || !r.has("num_attention_heads")) return;  // reported already
  if (m.hidden % m.heads != 0)
    r.error_at("num_attention_heads", fmt::format("{} does not divide hidden_size ({})", m.heads, m.hidden));
  else
    m.head_dim = m.hidden / m.heads;
}

ModelSpec read_family(Family family, Reader& r, std::vector<std::string>& warnings) {
  ModelSpec m;
  LlamaLike llama{r, m};
  switch (family) {
    case Family::Llama:
      llama.read(false);
      llama.head_dim();
      m.ffn_hidden = r.integer("intermediate_size", {1, 1 << 22});
      break;
    case Family::Mistral:
    case Family::Mixtral:
      llama.read(false);
      llama.head_dim();
      m.ffn_hidden = r.integer("intermediate_size", {1, 1 << 22});
      sliding_window(r, true, warnings);
      if (family == Family::Mixtral) {
        MoeSpec e;
        e.experts = static_cast<int>(r.integer("num_local_experts", {1, 1 << 16}));
        e.top_k = static_cast<int>(r.integer("num_experts_per_tok", {1, 1 << 16}));
        e.expert_ffn_hidden = m.ffn_hidden;
        if (e.top_k > e.experts)
          r.error_at("num_experts_per_tok", fmt::format("{} exceeds num_local_experts ({})", e.top_k, e.experts));
        m.moe = e;
      }
      break;
    case Family::Qwen2:
    case Family::Qwen2Moe:
    case Family::Qwen3:
    case Family::Qwen3Moe: {
      const bool qwen2 = family == Family::Qwen2 || family == Family::Qwen2Moe;
      // Qwen2's q, k and v projections always carry biases; Qwen3's follow attention_bias
      llama.read(qwen2);
      if (qwen2) {  // biases on q, k and v only (Qwen2Attention: o_proj and the MLP have none)
        m.bias = false;
        m.qkv_bias = true;
      }
      llama.head_dim();
      const bool moe = family == Family::Qwen2Moe || family == Family::Qwen3Moe;
      // an all-sparse MoE model still names intermediate_size for the dense layers it lacks
      m.ffn_hidden = moe ? r.integer_or("intermediate_size", 0, {0, 1 << 22})
                         : r.integer("intermediate_size", {1, 1 << 22});
      sliding_window(r, r.boolean_or("use_sliding_window", false), warnings);
      if (moe) {
        m.moe = read_qwen_moe(r, m, family == Family::Qwen2Moe);
        const bool dense_layers = m.moe->dense_layers > 0 || m.moe->layer_step > 1;
        if (dense_layers && m.ffn_hidden == 0)
          r.error_at("intermediate_size", "missing: the dense layers need their MLP width");
      }
      break;
    }
    case Family::DeepseekV2:
    case Family::DeepseekV3:
      read_deepseek(r, m);
      break;
    case Family::Gpt2:
      read_gpt2(r, m);
      break;
    case Family::GptNeox:
      read_gpt_neox(r, m, warnings);
      break;
  }
  return m;
}

}  // namespace

bool is_hf_config(const nlohmann::json& json) {
  return json.is_object() && (json.contains("model_type") || json.contains("architectures"));
}

std::vector<std::string_view> hf_model_types() {
  std::vector<std::string_view> out;
  for (const auto& f : kFamilies) out.push_back(f.name);
  return out;
}

ModelSpec read_hf_model(const nlohmann::json& json, const std::string& source, std::vector<std::string>& warnings) {
  Diagnostics diagnostics;
  Reader r(json, "", diagnostics);
  if (!r.has("model_type")) {
    r.error_at("model_type", fmt::format("missing; a Hugging Face config names its family: one of {}",
                                         fmt::join(hf_model_types(), ", ")));
    diagnostics.throw_if_any(source);
  }
  const auto type = r.string("model_type");
  const auto* family = std::find_if(kFamilies.begin(), kFamilies.end(), [&](const auto& f) { return f.name == type; });
  if (family == kFamilies.end()) {
    r.error_at("model_type", fmt::format("\"{}\" is not a supported family; supported: {}", type,
                                         fmt::join(hf_model_types(), ", ")));
    diagnostics.throw_if_any(source);
  }
  auto model = read_family(family->value, r, warnings);
  for (const auto* key : {"max_position_embeddings", "n_positions"})
    if (const auto it = json.find(key); it != json.end() && it->is_number_integer() && it->get<std::int64_t>() > 0)
      model.max_positions = it->get<std::int64_t>();
  // dropout probabilities and the like change nothing; keys the families above do not know may
  std::vector<std::string> unknown;
  for (auto& key : r.unread())
    if (!kCostFreeKeys.contains(key) && !key.ends_with("_dropout") && !key.ends_with("_pdrop")) unknown.push_back(key);
  if (!unknown.empty())
    warnings.push_back(fmt::format("{}: key(s) {} not read for model_type \"{}\": assumed not to change the cost",
                                   source, fmt::join(unknown, ", "), type));
  diagnostics.throw_if_any(source);
  return model;
}

}  // namespace trainsim::spec
