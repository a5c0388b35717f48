#pragma once
// The model and the job (docs/cli.md, workloads/*.json).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/spec/cluster_spec.hpp"

namespace trainsim::spec {

enum class MlpKind { Gelu, Swiglu };
enum class NormKind { LayerNorm, RmsNorm };
enum class PositionKind { Learned, Rope };
enum class Optimizer { Adam, Sgd };

struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  std::int64_t expert_ffn_hidden = 0;
  int shared_experts = 0;        // always-active experts of expert_ffn_hidden each (DeepSeek)
  double capacity_factor = 1.0;  // tokens an expert may take, relative to a perfectly balanced share
  int dense_layers = 0;          // the first layers keep a dense MLP of ffn_hidden (DeepSeek-V3: 3)
  friend bool operator==(const MoeSpec&, const MoeSpec&) = default;
};

struct ModelSpec {
  int layers = 0;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  std::int64_t head_dim = 0;  // hidden / heads unless given
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  MlpKind mlp = MlpKind::Gelu;
  std::optional<MoeSpec> moe;
  // Megatron GPT defaults; Llama-style files say false / rmsnorm / rope / false / false.
  bool bias = true;
  NormKind norm = NormKind::LayerNorm;
  PositionKind position = PositionKind::Learned;
  bool tied_embeddings = true;
  bool dropout = true;
  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

struct TrainingSpec {
  std::int64_t seq_len = 0;
  std::int64_t global_batch = 0;  // sequences per optimizer step
  Dtype dtype = Dtype::Bf16;
  Optimizer optimizer = Optimizer::Adam;
  friend bool operator==(const TrainingSpec&, const TrainingSpec&) = default;
};

struct WorkloadSpec {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  friend bool operator==(const WorkloadSpec&, const WorkloadSpec&) = default;
};

WorkloadSpec read_workload_spec(const nlohmann::json& json, const std::string& source);
WorkloadSpec load_workload_spec(const std::string& path);

std::string_view mlp_name(MlpKind kind);
std::string_view optimizer_name(Optimizer optimizer);

}  // namespace trainsim::spec
