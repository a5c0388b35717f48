#include "trainsim/model/layer_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "trainsim/util/error.hpp"

namespace trainsim::model {
namespace {

using spec::MlpKind;
using spec::ModelSpec;

// GEMM: 2mnk FLOPs forward; the backward computes dX = dY·Wᵀ and dW = Xᵀ·dY, 2mnk each.
Op gemm(std::string_view name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count = 1,
        bool linear = false) {
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(count);
  return Op{.name = name,
            .shape = Gemm{.m = m, .n = n, .k = k, .count = count, .linear = linear},
            .fwd_flops = flops,
            .bwd_data_flops = flops,
            .bwd_weight_flops = flops};
}

// A linear layer of the block (FP8 under an FP8 recipe).
Op linear(std::string_view name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count = 1) {
  return gemm(name, m, n, k, count, true);
}

Op elementwise(std::string_view name, double fwd_bytes, double bwd_bytes) {
  return Op{.name = name, .shape = Elementwise{.bytes = fwd_bytes}, .fwd_bytes = fwd_bytes, .bwd_bytes = bwd_bytes};
}

// A norm over `elements` activations: the forward reads x and writes y; the data gradient reads x
// and dy and writes dx; the weight gradient (LayerNorm's γ and β, RMSNorm's γ) sums x̂·dy and dy
// over the tokens, reading x and dy again where it is a kernel of its own.
Op norm(std::string_view name, double elements, double e) {
  Op op = elementwise(name, 2 * e * elements, 3 * e * elements);
  op.wgrad_bytes = 2 * e * elements;
  return op;
}

// Attention core: Q·Kᵀ and P·V are 2·b·a·q·kv·d FLOPs each forward (Megatron-LM counts the full
// square, not the causal half); the backward has four such products (dQ, dK, dV, dP).
Op attention(AttentionCore core) {
  const double fwd = 4.0 * static_cast<double>(core.batch) * static_cast<double>(core.heads) *
                     static_cast<double>(core.q_len) * static_cast<double>(core.kv_len) *
                     static_cast<double>(core.head_dim);
  return Op{.name = "attention", .shape = core, .fwd_flops = fwd, .bwd_data_flops = 2 * fwd, .attention_core = true};
}

struct Dims {
  double e;             // bytes per activation element
  std::int64_t tokens;  // tokens of the micro-batch on this cp rank
  double tokens_sp;     // tokens an element-wise kernel touches (divided by tp under SP)
  double h;
};

Dims dims(const ModelSpec& m, const LayerShape& s) {
  const std::int64_t tokens = s.micro_batch * (s.seq_len / s.cp);
  return {static_cast<double>(s.activation_bytes), tokens, static_cast<double>(tokens) / (s.sp ? s.tp : 1),
          static_cast<double>(m.hidden)};
}

double mlp_in(const ModelSpec& m, std::int64_t ffn) {
  return m.mlp == MlpKind::Swiglu ? 2.0 * ffn : 1.0 * ffn;
}

// Activation function over `width` columns: GeLU reads and writes one tensor; SwiGLU reads the
// gate and up halves and writes one (backward reads three, writes two).
Op activation(std::string_view name, const ModelSpec& m, double tokens, double width, double e) {
  if (m.mlp == MlpKind::Swiglu) return elementwise(name, 3 * e * tokens * width, 5 * e * tokens * width);
  return elementwise(name, 2 * e * tokens * width, 3 * e * tokens * width);
}

// Multi-head latent attention's projections (DeepSeek-V2 §2.1), the local heads' share: the down
// projections of the query and of the key-value latent (replicated across tp), their norms, the up
// projections to the heads' queries, keys and values. The rotary part touches each head's query
// and the one shared key.
void add_mla_projections(std::vector<Op>& ops, const ModelSpec& m, const Dims& d, std::int64_t heads) {
  const auto& a = *m.mla;
  const auto tokens = static_cast<double>(d.tokens);
  if (a.q_lora_rank > 0) {
    ops.push_back(linear("q_down", d.tokens, a.q_lora_rank, m.hidden));
    ops.push_back(norm("q_norm", tokens * static_cast<double>(a.q_lora_rank), d.e));
    ops.push_back(linear("q_up", d.tokens, heads * a.qk_head_dim(), a.q_lora_rank));
  } else {
    ops.push_back(linear("q_up", d.tokens, heads * a.qk_head_dim(), m.hidden));
  }
  ops.push_back(linear("kv_down", d.tokens, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden));
  ops.push_back(norm("kv_norm", tokens * static_cast<double>(a.kv_lora_rank), d.e));
  ops.push_back(linear("kv_up", d.tokens, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank));
  const double rotated = static_cast<double>(d.tokens) * static_cast<double>((heads + 1) * a.qk_rope_head_dim);
  ops.push_back(elementwise("rope", 2 * d.e * rotated, 2 * d.e * rotated));
}

void add_attention_block(std::vector<Op>& ops, const ModelSpec& m, const LayerShape& s, const Dims& d) {
  const std::int64_t q_heads = m.heads / s.tp;
  const std::int64_t kv_heads = std::max<std::int64_t>(1, m.kv_heads / s.tp);
  const std::int64_t dh = m.head_dim;
  // the value's head size (MLA's differs from the query's and key's)
  const std::int64_t dv = m.mla ? m.mla->v_head_dim : dh;
  ops.push_back(norm("norm1", d.tokens_sp * d.h, d.e));
  if (m.mla) {
    add_mla_projections(ops, m, d, q_heads);
  } else {
    ops.push_back(linear("qkv", d.tokens, (q_heads + 2 * kv_heads) * dh, m.hidden));
    if (m.position == spec::PositionKind::Rope) {
      const double rotated = static_cast<double>(d.tokens) * static_cast<double>((q_heads + kv_heads) * dh);
      ops.push_back(elementwise("rope", 2 * d.e * rotated, 2 * d.e * rotated));
    }
  }
  // Q·Kᵀ over the query/key head size, P·V over the value's: the core's FLOPs are those of their
  // mean head size
  ops.push_back(attention({.batch = s.micro_batch,
                           .heads = q_heads,
                           .q_len = s.seq_len / s.cp,
                           .kv_len = s.seq_len,
                           .head_dim = (dh + dv) / 2,
                           .causal = true,
                           .dropout = m.dropout}));
  ops.push_back(linear("out_proj", d.tokens, m.hidden, q_heads * dv));
  // dropout + residual add: read two tensors, write one (and a 1-byte mask)
  const double mask = m.dropout ? 1 : 0;
  ops.push_back(elementwise("residual1", (3 * d.e + mask) * d.tokens_sp * d.h, (2 * d.e + mask) * d.tokens_sp * d.h));
  ops.push_back(norm("norm2", d.tokens_sp * d.h, d.e));
}

void add_dense_mlp(std::vector<Op>& ops, const ModelSpec& m, const LayerShape& s, const Dims& d) {
  const std::int64_t in = static_cast<std::int64_t>(mlp_in(m, m.ffn_hidden)) / s.tp;
  ops.push_back(linear("fc1", d.tokens, in, m.hidden));
  ops.push_back(activation("act", m, static_cast<double>(d.tokens), static_cast<double>(m.ffn_hidden / s.tp), d.e));
  ops.push_back(linear("fc2", d.tokens, m.hidden, m.ffn_hidden / s.tp));
}

// Routed experts: each GPU holds experts/ep experts (each split over tp). Its T tokens pick top_k
// experts; a local expert of the busiest rank sees T·top_k·ep/experts tokens times the rank's load
// (the capacity factor where the experts are padded to it).
void add_moe_mlp(std::vector<Op>& ops, const ModelSpec& m, const LayerShape& s, const Dims& d) {
  const auto& e = *m.moe;
  const std::int64_t local_experts = e.experts / s.ep;
  const double routed = received_copies(e, s);
  const double own = own_copies(e, s);
  // An expert's tokens are a routing outcome, not a layout: grouped GEMMs take any count at the
  // rate of its tiles (alignment concerns the operands' leading dimensions), so the expected count
  // is rounded up to 16 rows rather than priced as an unaligned shape.
  constexpr std::int64_t kRows = 16;
  const auto per_expert = (static_cast<std::int64_t>(std::ceil(routed * s.ep / e.experts)) + kRows - 1) / kRows * kRows;
  const std::int64_t in = static_cast<std::int64_t>(mlp_in(m, e.expert_ffn_hidden)) / s.etp;
  const std::int64_t ffn = e.expert_ffn_hidden / s.etp;
  ops.push_back(gemm("router", static_cast<std::int64_t>(d.tokens_sp), e.experts, m.hidden));
  // token permutation before dispatch and after combine: read and write every copy of its own
  const double permute = 2 * d.e * own * d.h;
  ops.push_back(elementwise("permute", permute, permute));
  ops.push_back(linear("expert_fc1", per_expert, in, m.hidden, local_experts));
  ops.push_back(
      activation("expert_act", m, static_cast<double>(per_expert * local_experts), static_cast<double>(ffn), d.e));
  ops.push_back(linear("expert_fc2", per_expert, m.hidden, ffn, local_experts));
  ops.push_back(elementwise("unpermute", permute, permute));
  if (e.shared_experts > 0) {
    // the shared experts are a dense MLP, split over the tensor-parallel ranks
    const std::int64_t shared_in = static_cast<std::int64_t>(mlp_in(m, e.expert_ffn_hidden)) / s.tp;
    const std::int64_t shared_ffn = e.expert_ffn_hidden / s.tp;
    ops.push_back(linear("shared_fc1", d.tokens, e.shared_experts * shared_in, m.hidden));
    ops.push_back(activation("shared_act", m, static_cast<double>(d.tokens),
                             static_cast<double>(e.shared_experts * shared_ffn), d.e));
    ops.push_back(linear("shared_fc2", d.tokens, m.hidden, e.shared_experts * shared_ffn));
  }
}

}  // namespace

int activation_bytes(spec::Dtype dtype) {
  return dtype == spec::Dtype::Fp32 ? 4 : 2;
}

int weight_bytes(spec::Dtype dtype) {
  return dtype == spec::Dtype::Fp32 ? 4 : 2;
}

double hidden_state_bytes(const ModelSpec& model, const LayerShape& shape) {
  return static_cast<double>(shape.micro_batch * (shape.seq_len / shape.cp)) * static_cast<double>(model.hidden) *
         shape.activation_bytes;
}

OpClass op_class(const OpShape& shape) {
  return std::visit(
      [](const auto& s) {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, Gemm>)
          return OpClass::Gemm;
        else if constexpr (std::is_same_v<T, AttentionCore>)
          return OpClass::Attention;
        else
          return OpClass::Elementwise;
      },
      shape);
}

std::string_view op_class_name(OpClass cls) {
  switch (cls) {
    case OpClass::Gemm:
      return "gemm";
    case OpClass::Attention:
      return "attention";
    case OpClass::Elementwise:
      return "elementwise";
  }
  return "?";
}

// A LoRA adapter beside a linear layer of `tokens` × `in` → `out` (as this GPU holds it): dropout
// on the input, A (in × r), B (r × out) and the add into the layer's output, each a kernel over
// HBM (rank r is too narrow for the matrix units to matter). Forward: the dropout reads the input
// and writes its copy and mask, A reads the copy, B writes its product, the add reads it and the
// output and writes the output. Backward: B's and A's gradients read the output gradient twice,
// A's the dropped input; the input gradient is written, added into the layer's (read twice,
// written) and passed back through the dropout (read with the mask, written).
Op lora_adapter(std::string_view name, const Gemm& g, double rank, double dropout, double e) {
  const double tokens = static_cast<double>(g.m);
  const double in = static_cast<double>(g.k);
  const double out = static_cast<double>(g.n);
  const double drop = dropout > 0 ? (2 * e + 1) * tokens * in : 0.0;
  const double fwd = drop + e * tokens * in + e * tokens * out + 3 * e * tokens * out;
  const double bwd = 2 * e * tokens * out + e * tokens * in + e * tokens * in + 3 * e * tokens * in + drop;
  const double flops = 2 * tokens * rank * (in + out);
  Op op = elementwise(name, fwd, bwd);
  op.fwd_flops = flops;
  op.bwd_data_flops = flops;
  op.bwd_weight_flops = flops;
  return op;
}

void add_lora_adapters(std::vector<Op>& ops, const spec::LoraSpec& lora, double e) {
  for (const auto module : lora.modules) {
    const std::string_view base = spec::lora_module_name(module);
    const std::string_view adapter = kLoraAdapterOps.at(static_cast<std::size_t>(module));
    const auto at = std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == base; });
    if (at == ops.end()) continue;
    const auto g = std::get<Gemm>(at->shape);
    ops.insert(at + 1, lora_adapter(adapter, g, static_cast<double>(lora.rank), lora.dropout, e));
  }
}

std::vector<Op> layer_ops(const ModelSpec& model, const LayerShape& shape, bool moe) {
  SIM_ASSERT(shape.tp >= 1 && shape.cp >= 1 && shape.ep >= 1, "parallel degrees must be positive");
  SIM_ASSERT(!moe || model.moe, "an MoE layer needs a model with experts");
  const Dims d = dims(model, shape);
  std::vector<Op> ops;
  add_attention_block(ops, model, shape, d);
  if (moe)
    add_moe_mlp(ops, model, shape, d);
  else
    add_dense_mlp(ops, model, shape, d);
  const double mask = model.dropout ? 1 : 0;
  ops.push_back(elementwise("residual2", (3 * d.e + mask) * d.tokens_sp * d.h, (2 * d.e + mask) * d.tokens_sp * d.h));
  for (auto& op : ops)
    if (auto* g = std::get_if<Gemm>(&op.shape); g != nullptr && g->linear)
      g->bias = model.bias || (model.qkv_bias && op.name == "qkv");
  if (shape.lora != nullptr) add_lora_adapters(ops, *shape.lora, d.e);
  return ops;
}

std::vector<Op> embedding_ops(const ModelSpec& model, const LayerShape& shape) {
  const Dims d = dims(model, shape);
  // lookup writes T·h; the backward scatters the gradient into the embedding table
  return {elementwise("embedding", d.e * static_cast<double>(d.tokens) * d.h,
                      2 * d.e * static_cast<double>(d.tokens) * d.h)};
}

std::vector<Op> head_ops(const ModelSpec& model, const LayerShape& shape) {
  const Dims d = dims(model, shape);
  const std::int64_t vocab_shard = (model.vocab + shape.tp - 1) / shape.tp;
  const double logits = static_cast<double>(d.tokens) * static_cast<double>(vocab_shard);
  std::vector<Op> ops{
      norm("final_norm", d.tokens_sp * d.h, d.e),
      gemm("logits", d.tokens, vocab_shard, model.hidden),
      // the cross-entropy's kernels as its implementation runs them (spec::loss_traffic_per_logit)
      elementwise("loss", shape.loss_traffic.fwd * logits, shape.loss_traffic.bwd * logits),
  };
  if (model.mtp_layers == 0) return ops;
  // each multi-token prediction module (its layer is a unit of its own): the norms of the last
  // hidden state and of the next token's embedding, their concatenation projected to hidden, and
  // after its layer its norm, the shared output layer and a second loss (Megatron-Core's
  // MultiTokenPredictionLayer; DeepSeek-V3 technical report, section 2.2)
  const std::int64_t n = model.mtp_layers;
  const double mtp = static_cast<double>(n);
  ops.push_back(norm("mtp_enorm", mtp * d.tokens_sp * d.h, d.e));
  ops.push_back(norm("mtp_hnorm", mtp * d.tokens_sp * d.h, d.e));
  ops.push_back(linear("mtp_eh_proj", d.tokens, (model.hidden + shape.tp - 1) / shape.tp, 2 * model.hidden, n));
  ops.push_back(norm("mtp_final_norm", mtp * d.tokens_sp * d.h, d.e));
  ops.push_back(gemm("mtp_logits", d.tokens, vocab_shard, model.hidden, n));
  ops.push_back(elementwise("mtp_loss", mtp * shape.loss_traffic.fwd * logits, mtp * shape.loss_traffic.bwd * logits));
  return ops;
}

namespace {
// The chance that none of `k` experts drawn without replacement from `pool` is one of `held` of them.
double none_drawn(double pool, double held, int k) {
  double p = 1;
  for (int i = 0; i < k; ++i) p *= std::max(0.0, pool - held - i) / (pool - i);
  return p;
}
double choose(int n, int r) {
  if (r < 0 || r > n) return 0;
  double c = 1;
  for (int i = 1; i <= r; ++i) c = c * (n - r + i) / i;
  return c;
}
}  // namespace

double received_copies(const spec::MoeSpec& moe, const LayerShape& shape) {
  return static_cast<double>(shape.routed_tokens()) * moe.top_k * shape.routed_load;
}

double own_copies(const spec::MoeSpec& moe, const LayerShape& shape) {
  return moe.capacity_factor ? received_copies(moe, shape) : static_cast<double>(shape.routed_tokens()) * moe.top_k;
}

double expected_domains_per_token(const spec::MoeSpec& moe, int domains) {
  SIM_ASSERT(domains >= 1 && moe.experts % domains == 0, "{} experts over {} domains", moe.experts, domains);
  if (domains == 1) return 1.0;
  const double experts = moe.experts;
  const double per_domain = experts / domains;
  const int g = moe.groups;
  const int m = moe.group_top_k;
  const auto unlimited = [&] { return domains * (1 - none_drawn(experts, per_domain, moe.top_k)); };
  if (g == 1 || m >= g) return unlimited();
  const double candidates = m * experts / g;  // the experts of the token's groups
  if (domains % g == 0)                       // each group spans domains/g domains, all of whose experts are candidates
    return m * (domains / g) * (1 - none_drawn(candidates, per_domain, moe.top_k));
  if (g % domains != 0) return unlimited();
  // each domain holds q groups, c of them the token's (hypergeometric over the m picked of g)
  const int q = g / domains;
  double hit = 0;
  for (int c = 1; c <= std::min(q, m); ++c)
    hit +=
        choose(q, c) * choose(g - q, m - c) / choose(g, m) * (1 - none_drawn(candidates, c * experts / g, moe.top_k));
  return domains * hit;
}

bool multiplies_weights(const Op& op) {
  const auto* g = std::get_if<Gemm>(&op.shape);
  return g != nullptr && (g->linear || op.name == "logits" || op.name == "router");
}

OpFlops sum_flops(const std::vector<Op>& ops) {
  OpFlops f;
  for (const auto& op : ops) {
    f.fwd += op.fwd_flops;
    f.bwd += op.bwd_data_flops + op.bwd_weight_flops;
  }
  return f;
}

}  // namespace trainsim::model
