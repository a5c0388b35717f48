#pragma once
// Parameter counts of a transformer (GPT/Megatron or Llama style, dense or MoE) and the share a
// GPU holds under tensor, pipeline and expert parallelism.
#include <cstdint>
#include <vector>

#include "trainsim/spec/job.hpp"
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::model {

// Parameters of one transformer layer, split by how they are sharded.
struct LayerParams {
  double attention = 0;  // Q, K, V, output projection (weights and biases)
  double mlp = 0;        // dense MLP, or the shared experts of an MoE layer
  double norms = 0;      // the two layer norms
  double router = 0;     // MoE gate
  double experts = 0;    // all routed experts
  double total() const { return attention + mlp + norms + router + experts; }
};

struct ParamCounts {
  double embedding = 0;  // word embeddings, V·h
  double position = 0;   // learned position embeddings, s·h
  double final_norm = 0;
  double output = 0;  // the output layer when untied (a tied one shares the embedding)
  LayerParams dense_layer;
  LayerParams moe_layer;  // zero when the model has no experts
  int dense_layers = 0;
  int moe_layers = 0;
  double active_expert_fraction = 0;  // top_k / experts
  // Multi-token prediction modules: each a layer of the last layer's kind and its own parameters
  // (the projection of [hidden; embedding] to hidden and three norms); the embedding and the
  // output layer are the model's.
  int mtp_modules = 0;
  LayerParams mtp_layer;
  double mtp_own = 0;
  double mtp() const { return mtp_modules * (mtp_layer.total() + mtp_own); }
  double total() const;
  // Parameters a token passes through in one forward pass (MoE: top_k of the routed experts).
  double active() const;
};

ParamCounts count_params(const spec::ModelSpec& model, std::int64_t seq_len);

// Parameters one GPU of a pipeline stage holds, before ZeRO sharding. `dense` is sharded over the
// data-parallel group (dp·cp) by ZeRO; `expert` over the expert-data-parallel group (dp·cp/ep).
struct StageParams {
  double dense = 0;
  double expert = 0;
  double largest_layer = 0;  // one layer's parameters on this GPU (ZeRO-3 gathers layer by layer)
  double total() const { return dense + expert; }
};

// Whether a layer index (0-based over the whole model) holds an MoE block.
bool is_moe_layer(const spec::ModelSpec& model, int layer);

std::vector<StageParams> stage_params(const spec::Job& job);
// The parameters that train (with gradients and optimizer states): all of them, or under LoRA only
// the adapters (docs/model.md "Fine-tuning with LoRA").
std::vector<StageParams> trainable_stage_params(const spec::Job& job);
// One layer's LoRA adapters on one GPU: rank × (in + out) per adapted linear layer, split over the
// tensor-parallel ranks (NeMo's ParallelLinearAdapter shards both A and B).
double lora_params_on_gpu(const spec::ModelSpec& model, const spec::LoraSpec& lora, int tp);

// One layer's parameters on one GPU under tensor and expert parallelism (before ZeRO).
StageParams layer_params_on_gpu(const spec::ModelSpec& model, bool moe, int tp, int ep, int etp);
// The first stage's embeddings and the last stage's final norm and output layer (or the tied
// embedding's copy), with the multi-token prediction modules' own parameters, per GPU.
double embedding_params_on_gpu(const spec::Job& job);
double head_params_on_gpu(const spec::Job& job);
// One multi-token prediction module's own parameters on one GPU: the projection of [hidden;
// embedding] to hidden (split over `tp`) and its three norms (of each input and of its output).
double mtp_own_params(const spec::ModelSpec& model, int tp);
// Parameter tensors of a layer on one GPU, as an optimizer iterates over them: each linear's weight
// (and bias), each norm's weight (and LayerNorm's bias); an MoE layer's router and its `local_experts`
// experts' matrices.
int layer_parameter_tensors(const spec::ModelSpec& model, bool moe, int local_experts);

// One parameter tensor on one GPU: its elements, and whether it is an expert's (sharded over the
// expert-data-parallel group).
struct ParamTensor {
  double elements = 0;
  bool expert = false;
  int module = 0;  // the module holding it, numbered in the unit's forward order (a linear, a norm)
};
// The parameter tensors of a layer on one GPU, in the order its forward uses them, as Megatron's
// modules hold them: the input norm (weight, LayerNorm's bias), the fused QKV projection's weight
// and bias (or multi-head latent attention's projections and norms), the output projection, the
// second norm, then fc1 (SwiGLU's gate and up fused) and fc2, or an MoE block's router, shared
// experts and local experts (`ep`, `etp`). They sum to layer_params_on_gpu.
std::vector<ParamTensor> layer_param_tensors(const spec::ModelSpec& model, bool moe, int tp, int ep, int etp);
// The embedding unit's tensors (the word and learned position embeddings) and the head's (the final
// norm, the output layer or the tied embedding's copies, the multi-token prediction modules' own
// projections and norms): they sum to embedding_params_on_gpu and head_params_on_gpu.
std::vector<ParamTensor> embedding_param_tensors(const spec::Job& job);
std::vector<ParamTensor> head_param_tensors(const spec::Job& job);

}  // namespace trainsim::model
