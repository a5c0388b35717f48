#pragma once
// The tensors one transformer layer keeps from its forward for its backward, op by op, as autograd
// saves them (docs/model.md "Activations as autograd saves them"), and what a checkpointing policy
// keeps of them: Korthikanti et al.'s 34·sbh + 5·as²b is what this table sums to for GPT-3 with
// unfused attention and dropout, not the model itself.
#include <cstdint>
#include <string_view>
#include <vector>

#include "trainsim/model/layer_ops.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::model {

// The parts of a layer a checkpointing policy may recompute instead of keeping (Megatron-Core's
// recompute_modules), as bits: a saved tensor lists the parts whose recomputation drops it.
enum class LayerPart : std::uint16_t {
  None = 0,
  CoreAttn = 1 << 0,       // the attention core (scores, softmax, dropout; a fused kernel's statistics)
  Layernorm = 1 << 1,      // the norms' outputs (recomputed from their inputs)
  Mlp = 1 << 2,            // a dense MLP's inner tensors
  MoeAct = 1 << 3,         // the routed experts' activation output
  Moe = 1 << 4,            // the whole MoE block's inner tensors (router, dispatch, experts, combine)
  SharedExperts = 1 << 5,  // the shared experts' inner tensors
  MlaUpProj = 1 << 6,      // multi-head latent attention's up projections (the heads' q, k, v)
};
constexpr LayerPart operator|(LayerPart a, LayerPart b) {
  return static_cast<LayerPart>(static_cast<std::uint16_t>(a) | static_cast<std::uint16_t>(b));
}
constexpr bool intersects(LayerPart a, LayerPart b) {
  return (static_cast<std::uint16_t>(a) & static_cast<std::uint16_t>(b)) != 0;
}

struct SavedTensor {
  std::string_view op;    // the op of layer_ops whose backward reads it
  std::string_view what;  // "input", "output", "mask", "stats", ...
  double bytes = 0;       // one micro-batch on one GPU
  LayerPart dropped_by = LayerPart::None;  // recomputing any of these parts drops it
  bool layer_input = false;                // the layer's input: what full recomputation keeps
};

// What the framework's kernels save, beyond the model's shape (docs/model.md).
struct SaveOptions {
  bool fused_attention = true;  // flash/cuDNN: q, k, v, the output and the log-sum-exp; no scores
  bool eager = false;           // element-wise ops one by one (compile=off): their own intermediates
  bool fp8_saved_casts = false;  // the linear layers' inputs kept as their FP8 casts (Transformer Engine)
  bool repeat_kv = false;        // K and V materialised at the query heads' count before attention
  // LoRA: the base weights frozen, so a linear layer saves its input only for its adapter's A
  // (its dropped copy and dropout mask under dropout), and each adapter saves A's output for B
  const spec::LoraSpec* lora = nullptr;
};
SaveOptions save_options(const spec::Job& job);

// The saved tensors of one layer (dense MLP or MoE block), in forward order.
std::vector<SavedTensor> saved_tensors(const spec::ModelSpec& model, const LayerShape& shape, const SaveOptions& options,
                                       bool moe);

// A forward kernel the backward replays, and the share of it (TorchTitan's op policy recomputes
// the key projection of a fused QKV GEMM, not the whole GEMM).
struct ReplayedOp {
  std::string_view op;
  double share = 1.0;
  friend bool operator==(const ReplayedOp&, const ReplayedOp&) = default;
};

// What a checkpointing policy does to one layer.
struct LayerCheckpoint {
  double kept = 0;     // bytes held from the layer's forward to its backward
  double rebuilt = 0;  // bytes the recomputation rebuilds during the layer's backward, beside `kept`
  double working = 0;  // gradients the layer's backward holds at once, beside both (backward_working_bytes)
  bool whole_layer = false;          // the whole forward replayed, its collectives included
  std::vector<ReplayedOp> replayed;  // otherwise these kernels (compute only)
};

// The policy of the job's strategy for one layer; `recomputed` says whether full recomputation
// (or TorchTitan's layer period) takes this layer.
LayerCheckpoint layer_checkpoint(const spec::Job& job, const spec::ModelSpec& model, const LayerShape& shape,
                                 bool moe, bool recomputed);

// The gradients one layer's backward holds at once, beyond its saved tensors (autograd frees each
// when the backward that consumes it has run): the gradient of the layer's output (the residual
// stream's, a sequence shard under SP), and the larger of two peaks. The MLP's: its activation's
// backward holds the incoming gradient and the input gradients (SwiGLU: the product's, the gate's
// and the up projection's, 3·f; GeLU 2·f), then the first GEMM's data gradient, the block input's
// gradient of the whole sequence before its tensor-parallel reduction, beside the gate's and up's.
// The attention's: dO, dQ, dK, dV and FlashAttention-2's fp32 dQ accumulator (unfused: the
// scores' gradient), then the QKV GEMM's data gradient beside dQ, dK, dV. docs/model.md.
double backward_working_bytes(const spec::ModelSpec& model, const LayerShape& shape, const SaveOptions& options,
                              bool moe);

// The sum of a table's bytes.
double total_bytes(const std::vector<SavedTensor>& tensors);

}  // namespace trainsim::model
