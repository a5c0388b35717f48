#pragma once
// The model and the job (docs/cli.md, workloads/*.json).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/spec/cluster_spec.hpp"

namespace trainsim::spec {

enum class MlpKind { Gelu, Swiglu };
enum class NormKind { LayerNorm, RmsNorm };
enum class PositionKind { Learned, Rope };
enum class Optimizer { Adam, Sgd };
// How training keeps the experts' loads even (`moe.balancing`), which sets how far dropless routing's
// busiest expert exceeds the mean in a micro-batch: an auxiliary loss on each micro-batch's routing
// (Switch/GShard's, Megatron-Core's default --moe-router-load-balancing-type aux_loss), one on the
// global batch's (global_aux_loss, Qwen3's), DeepSeek-V3's auxiliary-loss-free expert bias
// (--moe-router-enable-expert-bias), or routing forced to be balanced (benchmarks' stand-in,
// --moe-router-force-load-balancing).
enum class Balancing { AuxLoss, GlobalAuxLoss, AuxFree, Forced };

struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  std::int64_t expert_ffn_hidden = 0;
  int shared_experts = 0;        // always-active experts of expert_ffn_hidden each (DeepSeek)
  // Tokens an expert takes, relative to a perfectly balanced share, dropped beyond and padded to it
  // (Megatron-Core's --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity): every
  // rank computes and sends that many. Absent: dropless, each rank what its experts are routed.
  std::optional<double> capacity_factor;
  Balancing balancing = Balancing::AuxLoss;
  // Dropless: the busiest expert's routed tokens in a micro-batch over the mean, at most
  // experts/top_k (every token choosing it); absent, from the balancing method's published
  // measurements (model::expert_load_cv).
  std::optional<double> load_imbalance;
  // Dropless: the experts' loads of every MoE layer drawn with this seed instead of the expected
  // busiest rank (model::busiest_rank_load).
  std::optional<std::uint64_t> load_seed;
  int dense_layers = 0;          // the first layers keep a dense MLP of ffn_hidden (DeepSeek-V3: 3)
  // after those, every layer_step-th layer is an MoE layer (layer i when (i + 1) % layer_step == 0,
  // Qwen2-MoE's decoder_sparse_step), the others dense
  int layer_step = 1;
  // Group-limited routing (DeepSeek-V3's n_group and topk_group, Megatron-Core's
  // --moe-router-num-groups and --moe-router-group-topk): the experts form `groups` equal groups
  // and a token takes its top_k experts from its best `group_top_k` groups only (1 and 1: no limit).
  // Under expert parallelism the groups lie on consecutive ranks, so a token reaches fewer nodes.
  int groups = 1;
  int group_top_k = 1;
  friend bool operator==(const MoeSpec&, const MoeSpec&) = default;
};

class Reader;
// Checks group-limited routing (`groups` divides the experts, a token picks at most all groups,
// and its top_k experts fit in the groups it picks), errors named by the keys the file uses.
void check_routing_groups(Reader& r, const MoeSpec& moe, std::string_view groups_key, std::string_view top_key);

// Multi-head latent attention (DeepSeek-V2/V3): queries through a low-rank bottleneck (none when
// q_lora_rank is 0), keys and values from one compressed latent of kv_lora_rank per token plus a
// shared rotary key of qk_rope_head_dim; each head's query and key have qk_nope_head_dim +
// qk_rope_head_dim dimensions, its value v_head_dim.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  friend bool operator==(const MlaSpec&, const MlaSpec&) = default;
};

struct ModelSpec {
  int layers = 0;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  std::int64_t head_dim = 0;  // hidden / heads unless given; with MLA the query/key head size
  std::optional<MlaSpec> mla;
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  MlpKind mlp = MlpKind::Gelu;
  std::optional<MoeSpec> moe;
  // Multi-token prediction modules (DeepSeek-V3's num_nextn_predict_layers, Megatron-Core's
  // --mtp-num-layers): each a projection of the last hidden state and the next token's embedding, a
  // transformer layer of the last layer's kind and a second pass through the shared output layer
  // and the loss, on the last pipeline stage.
  int mtp_layers = 0;
  // Megatron GPT defaults; Llama-style files say false / rmsnorm / rope / false / false.
  bool bias = true;
  // Without `bias`, biases on the query, key and value projections alone (Qwen2's attention).
  bool qkv_bias = false;
  NormKind norm = NormKind::LayerNorm;
  PositionKind position = PositionKind::Learned;
  bool tied_embeddings = true;
  bool dropout = true;
  // The positions a Hugging Face config says the model takes (max_position_embeddings, GPT-2's
  // n_positions); absent when the model's file does not say. A longer training sequence is noted.
  std::optional<std::int64_t> max_positions;
  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

// The linear layers of a dense transformer layer a LoRA adapter may sit beside (Megatron-Core's
// linear_qkv, linear_proj, linear_fc1, linear_fc2).
enum class LoraModule { Qkv, OutProj, Fc1, Fc2 };

// Low-rank adaptation (Hu et al. 2021): every weight of the model frozen, and beside each chosen
// linear layer W (in × out) a trainable pair A (in × rank) and B (rank × out) whose product is added
// to its output, with dropout on the adapter's input (docs/model.md "Fine-tuning with LoRA").
struct LoraSpec {
  int rank = 0;
  std::vector<LoraModule> modules;  // in the order given, no repeats
  double dropout = 0;               // on the adapter's input: its mask and the dropped input are saved
  friend bool operator==(const LoraSpec&, const LoraSpec&) = default;
};
std::string_view lora_module_name(LoraModule module);

struct TrainingSpec {
  std::int64_t seq_len = 0;
  std::int64_t global_batch = 0;  // sequences per optimizer step
  Dtype dtype = Dtype::Bf16;
  Optimizer optimizer = Optimizer::Adam;
  std::optional<LoraSpec> lora;  // fine-tuning with LoRA: only the adapters train
  friend bool operator==(const TrainingSpec&, const TrainingSpec&) = default;
};
// The LoRA spec, or null when every weight trains (for the model's option structs, which point).
inline const LoraSpec* lora_of(const TrainingSpec& training) {
  return training.lora ? &*training.lora : nullptr;
}

struct WorkloadSpec {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  std::vector<std::string> warnings;  // what a Hugging Face config held that is not modelled
  friend bool operator==(const WorkloadSpec&, const WorkloadSpec&) = default;
};

// Training settings from the command line (--seq-len, --global-batch, --dtype, --optimizer): they
// complete a Hugging Face config and override what a workload file or wrapper says.
struct TrainingOverrides {
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> global_batch;
  std::optional<std::string> dtype;
  std::optional<std::string> optimizer;
  bool empty() const { return !seq_len && !global_batch && !dtype && !optimizer; }
};

class Reader;
// The five keys of multi-head latent attention (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
// qk_rope_head_dim, v_head_dim): a workload's model.mla and a DeepSeek config name them alike.
MlaSpec read_mla_keys(Reader& r);

WorkloadSpec read_workload_spec(const nlohmann::json& json, const std::string& source);
// A workload file, a Hugging Face config.json (recognised by model_type or architectures) or a
// wrapper {"hf_config": "PATH", "training": {...}} (PATH relative to the wrapper's folder).
WorkloadSpec load_workload_spec(const std::string& path, const TrainingOverrides& overrides = {});
// The same from a JSON value already read (a Python dict); `source` names it in errors.
WorkloadSpec workload_from_json(nlohmann::json json, const std::string& source,
                                const TrainingOverrides& overrides = {});

// Whether a JSON object is a Hugging Face model config.
bool is_hf_config(const nlohmann::json& json);
// The model of a Hugging Face config (docs/cli.md "Hugging Face configs"): the families' own key
// names; keys that change cost but are not modelled add a warning naming them.
ModelSpec read_hf_model(const nlohmann::json& json, const std::string& source, std::vector<std::string>& warnings);
// The Hugging Face model types read, in the order the docs list them.
std::vector<std::string_view> hf_model_types();

std::string_view mlp_name(MlpKind kind);
std::string_view balancing_name(Balancing balancing);
// A training dtype or optimizer by its workload name ("bf16", "adamw"); anything else is a
// SpecError naming `source` and the choices.
Dtype training_dtype_named(std::string_view name, const std::string& source);
Optimizer optimizer_named(std::string_view name, const std::string& source);
std::string_view optimizer_name(Optimizer optimizer);

}  // namespace trainsim::spec
