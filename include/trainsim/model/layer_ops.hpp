#pragma once
// The kernels of one transformer layer on one GPU, with their shapes after tensor, context and
// expert parallelism: the unit of work that FLOP counting, the kernel model and lowering share.
#include <array>
#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "trainsim/spec/framework.hpp"
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::model {

// C[m×n] = A[m×k]·B[k×n], `count` independent instances (the local experts of an MoE layer).
struct Gemm {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t count = 1;
  // A linear layer of the transformer block (activations times weights): the GEMMs an FP8 recipe
  // runs in FP8. The router, the logits and the attention core stay in the activations' dtype.
  bool linear = false;
  // The layer adds a bias to C (model.bias): its gradient is the sum of dC over the m rows, in
  // the weight-gradient pass (strategy key bias_grad).
  bool bias = false;
  friend bool operator==(const Gemm&, const Gemm&) = default;
};

// softmax(Q·Kᵀ)·V over `heads` local heads; kv_len ≥ q_len under context parallelism.
struct AttentionCore {
  std::int64_t batch = 0;
  std::int64_t heads = 0;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t head_dim = 0;
  bool causal = true;
  bool dropout = false;  // on the attention probabilities (unfused attention stores and applies a mask)
  friend bool operator==(const AttentionCore&, const AttentionCore&) = default;
};

// A memory-bound kernel (norm, activation, residual, dropout, rotary, loss): bytes through HBM.
struct Elementwise {
  double bytes = 0;
  friend bool operator==(const Elementwise&, const Elementwise&) = default;
};

using OpShape = std::variant<Gemm, AttentionCore, Elementwise>;

enum class OpClass { Gemm, Attention, Elementwise };
OpClass op_class(const OpShape& shape);
std::string_view op_class_name(OpClass cls);

struct Op {
  std::string_view name;
  OpShape shape;
  double fwd_flops = 0;         // forward pass
  double bwd_data_flops = 0;    // backward, activation gradient ("B" of zero-bubble schedules)
  double bwd_weight_flops = 0;  // backward, weight gradient ("W")
  double fwd_bytes = 0;         // HBM traffic of memory-bound kernels
  double bwd_bytes = 0;
  // A norm's weight (and LayerNorm's bias) gradient: a reduction over the tokens of its input
  // times the output gradient, which reads both again unless the data-gradient kernel computes it
  // alongside (strategy key norm_grad)
  double wgrad_bytes = 0;
  bool attention_core = false;  // recomputed by selective recompute
  friend bool operator==(const Op&, const Op&) = default;
};

// Bytes per activation element of a training dtype: fp32 jobs keep fp32 activations; bf16, fp16
// and fp8 jobs bf16/fp16 ones (FP8 casts only the GEMM inputs).
int activation_bytes(spec::Dtype dtype);
// Bytes per element of the weights and gradients the training copy keeps (fp32: 4, else 2).
int weight_bytes(spec::Dtype dtype);

// What one GPU runs for one micro-batch.
struct LayerShape {
  std::int64_t micro_batch = 1;  // sequences
  std::int64_t seq_len = 0;      // full sequence; each cp rank holds seq_len / cp
  int tp = 1;
  int cp = 1;
  int ep = 1;
  int etp = 1;  // expert tensor parallelism: tp, or 1 when the experts fold over the tp ranks
  bool sp = false;
  int activation_bytes = 2;  // bytes per activation element (bf16/fp16: 2)
  double loss_bytes_per_logit = 6;  // the cross-entropy's memory per logit at its peak (spec::LossImpl)
  double loss_cached_bytes_per_logit = 0;                // and what the allocator keeps reserved after it
  // Liger's fused linear cross entropy: logits in chunks (spec::loss_chunk_tokens), the input and
  // weight gradients computed in the forward and saved for the backward
  bool loss_fused_linear = false;
  spec::LossTraffic loss_traffic{.fwd = 38, .bwd = 14};  // its kernels' HBM bytes per logit
  // Under SP the column-parallel linears save their all-gathered input (DTensor's, TorchTitan)
  // rather than the sequence shard they gather again in the backward (Megatron-LM).
  bool sp_saves_gathered = false;
  // LoRA adapters beside the listed linear layers (training.lora), priced as memory-bound kernels
  const spec::LoraSpec* lora = nullptr;
  // The busiest expert-parallel rank's routed copies over a balanced share (busiest_rank_load):
  // what this rank's experts receive, compute and keep (and send back), as every rank of the group
  // waits for it; the rank's own tokens' copies, permuted and weighed, stay its share.
  double routed_load = 1.0;
  // MoE parallel folding: tokens reach the experts sequence-sharded (T/tp per rank), the experts
  // whole, the expert-parallel group spanning the tensor-parallel ranks.
  bool folded() const { return tp > 1 && etp == 1; }
  // Tokens of the micro-batch one rank routes to the experts.
  std::int64_t routed_tokens() const { return micro_batch * (seq_len / cp) / (folded() ? tp : 1); }
};

// The routed copies this rank's experts receive: its tokens' top_k copies times the busiest rank's
// load (the capacity factor where experts are padded to it).
double received_copies(const spec::MoeSpec& moe, const LayerShape& shape);
// The copies of its own tokens a rank permutes before the dispatch and weighs after the combine:
// its balanced share, or as received where every expert is padded to its capacity.
double own_copies(const spec::MoeSpec& moe, const LayerShape& shape);

// Bytes of one hidden-state tensor of the micro-batch on this cp rank (b·s/cp·h elements): what a
// TP collective of the layer, or a pipeline stage boundary, carries.
double hidden_state_bytes(const spec::ModelSpec& model, const LayerShape& shape);

// The op layer_ops adds beside each adapted linear layer under LoRA, in LoraModule's order (the
// layer itself is named as the module: spec::lora_module_name).
inline constexpr std::array<std::string_view, 4> kLoraAdapterOps{"qkv_lora", "out_proj_lora", "fc1_lora", "fc2_lora"};

// The kernels of one transformer layer (dense MLP or MoE block).
std::vector<Op> layer_ops(const spec::ModelSpec& model, const LayerShape& shape, bool moe);
// Embedding lookup on the first pipeline stage.
std::vector<Op> embedding_ops(const spec::ModelSpec& model, const LayerShape& shape);
// Final norm, output projection and cross-entropy on the last pipeline stage.
std::vector<Op> head_ops(const spec::ModelSpec& model, const LayerShape& shape);

// The scale-up domains that hold at least one of a token's top_k experts, on average, when the
// expert-parallel group spans `domains` equal domains (experts spread evenly over its ranks, a group
// of experts on consecutive ranks) and a token's experts are drawn uniformly from its best
// group_top_k groups (DeepSeek-V3's node-limited routing; all experts without groups): how many
// times DeepEP sends a token across the network, its own domain included. Group boundaries that
// neither contain nor split the domains evenly are taken as no limit.
double expected_domains_per_token(const spec::MoeSpec& moe, int domains);

// FLOPs of a kernel list; GEMMs and attention only, as the Megatron-LM paper counts them.
struct OpFlops {
  double fwd = 0;
  double bwd = 0;
  double total() const { return fwd + bwd; }
};
OpFlops sum_flops(const std::vector<Op>& ops);
// Whether the op multiplies activations by the model's weights (a linear layer, the logits, the
// router), so that its backward computes a weight gradient unless the weights are frozen.
bool multiplies_weights(const Op& op);

}  // namespace trainsim::model
