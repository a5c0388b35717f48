#include "trainsim/model/saved_tensors.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "trainsim/util/error.hpp"

namespace trainsim::model {
namespace {

using spec::MlpKind;
using spec::ModelSpec;

// The sizes the table is made of, for one micro-batch on one GPU.
struct Sizes {
  double e;          // bytes per activation element (bf16: 2)
  double linear_e;   // bytes per element of a linear layer's saved input (its FP8 cast: 1)
  double tokens;     // of the micro-batch on this cp rank
  double tokens_sp;  // what the replicated tensors hold per rank (tokens / tp under SP)
  double h;
  double tp;
  bool eager;
};

Sizes sizes(const ModelSpec& m, const LayerShape& s, const SaveOptions& o) {
  const double e = static_cast<double>(s.activation_bytes);
  const double tokens = static_cast<double>(s.micro_batch * (s.seq_len / s.cp));
  return {.e = e,
          .linear_e = o.fp8_saved_casts ? 1.0 : e,
          .tokens = tokens,
          .tokens_sp = tokens / (s.sp ? s.tp : 1),
          .h = static_cast<double>(m.hidden),
          .tp = static_cast<double>(s.tp),
          .eager = o.eager};
}

class Table {
 public:
  explicit Table(std::vector<SavedTensor>& out) : out_(out) {}
  void add(std::string_view op, std::string_view what, double bytes, LayerPart dropped_by = LayerPart::None) {
    if (bytes > 0) out_.push_back({.op = op, .what = what, .bytes = bytes, .dropped_by = dropped_by});
  }
  void layer_input(double bytes) {
    out_.push_back({.op = "norm1", .what = "input (the layer's input)", .bytes = bytes, .layer_input = true});
  }

 private:
  std::vector<SavedTensor>& out_;
};

// A pre-norm's saved tensors besides its input: the statistics (LayerNorm's fp32 mean and
// reciprocal deviation, RMSNorm's reciprocal root mean square, per token) and, eager, the fp32
// upcast of the input that PyTorch's composite norm keeps for its backward (4 bytes per element;
// the normalised bf16 product it also keeps stands in for the bf16 input it does not).
void norm_tensors(Table& t, std::string_view op, const ModelSpec& m, const Sizes& z) {
  const double stats = m.norm == spec::NormKind::LayerNorm ? 8 : 4;
  t.add(op, "statistics (fp32 per token)", stats * z.tokens_sp, LayerPart::Layernorm);
  if (z.eager) t.add(op, "fp32 upcast of the input (eager)", 4 * z.tokens_sp * z.h, LayerPart::Layernorm);
}

// An activation function between two linear layers over `tokens` rows of `ffn` columns (per
// GPU): its input (GeLU: ffn; SwiGLU: gate and up, 2·ffn) and the second GEMM's input; eager
// SwiGLU (silu(w1·x) · w3·x op by op) also keeps silu's output for the product's backward.
void mlp_tensors(Table& t, std::string_view act, std::string_view fc2, const ModelSpec& m, const Sizes& z,
                 double tokens, double ffn, LayerPart inner, LayerPart act_out) {
  const bool swiglu = m.mlp == MlpKind::Swiglu;
  t.add(act, "input (the first GEMM's output)", z.e * tokens * (swiglu ? 2 : 1) * ffn, inner);
  if (swiglu && z.eager) t.add(act, "silu output (eager)", z.e * tokens * ffn, inner | act_out);
  t.add(fc2, "input (the activation's output)", z.linear_e * tokens * ffn, inner | act_out);
}

void attention_tensors(Table& t, const ModelSpec& m, const LayerShape& s, const SaveOptions& o, const Sizes& z) {
  const double heads = static_cast<double>(m.heads) / z.tp;
  const double kv_heads = o.repeat_kv ? heads : std::max(1.0, static_cast<double>(m.kv_heads) / z.tp);
  const double d = static_cast<double>(m.head_dim);
  double qk_dim = d;
  double v_dim = d;
  if (m.mla) {
    // MLA: the latents' norm inputs and the up projections' inputs, replicated across tp; the
    // heads' queries and keys (qk_head_dim each) and values, which the up projections rebuild
    const auto& a = *m.mla;
    qk_dim = static_cast<double>(a.qk_head_dim());
    v_dim = static_cast<double>(a.v_head_dim);
    const double q_rank = static_cast<double>(a.q_lora_rank);
    const double kv_rank = static_cast<double>(a.kv_lora_rank);
    t.add("q_norm", "input", z.e * z.tokens * q_rank);
    t.add("q_up", "input", z.linear_e * z.tokens * q_rank);
    t.add("kv_norm", "input", z.e * z.tokens * kv_rank);
    t.add("kv_up", "input", z.linear_e * z.tokens * kv_rank);
    t.add("attention", "q", z.e * z.tokens * heads * qk_dim, LayerPart::MlaUpProj);
    t.add("attention", "k", z.e * z.tokens * heads * qk_dim, LayerPart::MlaUpProj);
    t.add("attention", "v", z.e * z.tokens * heads * v_dim, LayerPart::MlaUpProj);
  } else {
    t.add("attention", "q", z.e * z.tokens * heads * d);
    t.add("attention", "k", z.e * z.tokens * kv_heads * d);
    t.add("attention", "v", z.e * z.tokens * kv_heads * d);
  }
  const double b = static_cast<double>(s.micro_batch);
  const double q_len = static_cast<double>(s.seq_len / s.cp);
  if (o.fused_attention) {
    // FlashAttention / cuDNN keep the output (which the output projection saves as its input)
    // and the fp32 log-sum-exp per query row; the scores are rebuilt in the backward
    t.add("attention", "log-sum-exp (fp32)", 4 * b * heads * q_len, LayerPart::CoreAttn);
  } else {
    // softmax(Q·Kᵀ) over the scores, its dropout mask and output: Korthikanti's 5as²b
    const double scores = b * heads * q_len * static_cast<double>(s.seq_len);
    t.add("attention", "softmax output", z.e * scores, LayerPart::CoreAttn);
    if (m.dropout) {
      t.add("attention", "dropout mask", scores, LayerPart::CoreAttn);
      t.add("attention", "dropout output", z.e * scores, LayerPart::CoreAttn);
    }
  }
  const double output = z.tokens * heads * v_dim;
  if (!o.fused_attention) {
    t.add("out_proj", "input (the attention's output)", z.linear_e * output);
    return;
  }
  // the fused kernel's output, which the output projection saves as its own input (the same
  // tensor) unless it keeps an FP8 cast of it beside
  t.add("attention", "output", z.e * output);
  if (o.fp8_saved_casts) t.add("out_proj", "input (FP8 cast of the attention's output)", output);
}

void moe_tensors(Table& t, const ModelSpec& m, const LayerShape& s, const Sizes& z) {
  const auto& x = *m.moe;
  const double routed = received_copies(x, s);
  // the combine's weighing runs on the sending rank, over its own tokens' copies
  const double own = own_copies(x, s);
  const double ffn = static_cast<double>(x.expert_ffn_hidden);
  const auto moe = LayerPart::Moe;
  t.add("router", "gate probabilities (fp32)", 4 * z.tokens_sp * static_cast<double>(x.experts), moe);
  t.add("expert_fc1", "input (the permuted tokens)", z.linear_e * routed * z.h, moe);
  mlp_tensors(t, "expert_act", "expert_fc2", m, z, routed / s.etp, ffn, moe, LayerPart::MoeAct);
  // the combine weighs each expert's output by its gate probability: d(prob) needs the output
  t.add("unpermute", "the experts' outputs", z.e * own * z.h, moe);
  if (x.shared_experts > 0)
    mlp_tensors(t, "shared_act", "shared_fc2", m, z, z.tokens / z.tp, x.shared_experts * ffn,
                LayerPart::SharedExperts | moe, LayerPart::None);
}

// Megatron-Core's modules as the parts of the table they drop.
constexpr std::array<std::pair<spec::RecomputeModule, LayerPart>, 7> kModuleParts{{
    {spec::RecomputeModule::CoreAttn, LayerPart::CoreAttn},
    {spec::RecomputeModule::Layernorm, LayerPart::Layernorm},
    {spec::RecomputeModule::Mlp, LayerPart::Mlp},
    {spec::RecomputeModule::Moe, LayerPart::Moe},
    {spec::RecomputeModule::MoeAct, LayerPart::MoeAct},
    {spec::RecomputeModule::SharedExperts, LayerPart::SharedExperts},
    {spec::RecomputeModule::MlaUpProj, LayerPart::MlaUpProj},
}};

LayerPart parts_of(const std::vector<spec::RecomputeModule>& modules) {
  LayerPart parts = LayerPart::None;
  for (const auto module : modules)
    for (const auto& [m, part] : kModuleParts)
      if (m == module) parts = parts | part;
  return parts;
}

// The forward kernels each part's recomputation replays (model::layer_ops names; kernels a layer
// lacks are skipped by the lowering).
struct PartOps {
  LayerPart part;
  std::array<std::string_view, 9> ops;
};
constexpr std::array<PartOps, 7> kPartOps{{
    {LayerPart::CoreAttn, {"attention"}},
    {LayerPart::Layernorm, {"norm1", "norm2"}},
    {LayerPart::Mlp, {"fc1", "act", "fc2"}},
    {LayerPart::MoeAct, {"expert_act"}},
    {LayerPart::Moe,
     {"router", "permute", "expert_fc1", "expert_act", "expert_fc2", "unpermute", "shared_fc1", "shared_act",
      "shared_fc2"}},
    {LayerPart::SharedExperts, {"shared_fc1", "shared_act", "shared_fc2"}},
    {LayerPart::MlaUpProj, {"q_up", "kv_up", "rope"}},
}};

void replay(std::vector<ReplayedOp>& out, std::string_view op, double share = 1.0) {
  if (std::none_of(out.begin(), out.end(), [&](const ReplayedOp& r) { return r.op == op; }))
    out.push_back({op, share});
}

// The matmuls a GEMM of layer_ops stands for, as a PyTorch model issues them (one aten.mm each):
// the fused QKV GEMM is the q, k and v projections; a SwiGLU MLP's first GEMM is w1 and w3.
std::vector<double> mm_shares(const Op& op, const ModelSpec& m, const LayerShape& s) {
  const auto* g = std::get_if<Gemm>(&op.shape);
  if (g == nullptr || g->count > 1 || op.name.starts_with("expert_")) return {};  // grouped GEMMs are not aten.mm
  if (op.name == "qkv") {
    const double q = static_cast<double>(m.heads) / s.tp;
    const double kv = std::max(1.0, static_cast<double>(m.kv_heads) / s.tp);
    return {q / (q + 2 * kv), kv / (q + 2 * kv), kv / (q + 2 * kv)};
  }
  if ((op.name == "fc1" || op.name == "shared_fc1") && m.mlp == MlpKind::Swiglu) return {0.5, 0.5};
  return {1.0};
}

// A row-parallel GEMM's output: autograd saves it for no backward (the residual add needs nothing),
// so a policy that keeps it holds it beside what autograd saves.
bool row_parallel(std::string_view op) {
  return op == "out_proj" || op == "fc2" || op == "shared_fc2";
}

// What a layer's replay rebuilds during its backward: the tensors autograd saves that the policy did
// not keep (`kept` less the kept tensors autograd does not save), so that the backward holds what
// autograd saves and those.
double rebuilt_beside(double total, double kept, double kept_outside) {
  return std::max(0.0, total - (kept - kept_outside));
}

// TorchTitan's per-op policy (torchtitan/distributed/activation_checkpoint.py, _save_list and
// _custom_policy): the outputs of every other aten.mm (the 1st, 3rd, ...) of a block and of the
// attention kernel are saved; everything else is recomputed in the backward.
LayerCheckpoint op_policy(const std::vector<Op>& ops, const ModelSpec& m, const LayerShape& s, double layer_input,
                          double total) {
  LayerCheckpoint c{.kept = layer_input};
  const double e = static_cast<double>(s.activation_bytes);
  double outside = 0;  // kept bytes autograd does not save
  int mm = 0;
  for (const auto& op : ops) {
    if (op.attention_core) {
      const auto& a = std::get<AttentionCore>(op.shape);
      const double rows = static_cast<double>(a.batch * a.heads * a.q_len);
      const double v_dim = static_cast<double>(m.mla ? m.mla->v_head_dim : m.head_dim);
      c.kept += e * rows * v_dim + 4 * rows;  // the output and the log-sum-exp
      continue;
    }
    const auto shares = mm_shares(op, m, s);
    if (shares.empty()) {
      replay(c.replayed, op.name);
      continue;
    }
    const auto& g = std::get<Gemm>(op.shape);
    double replayed = 0;
    for (const double share : shares) {
      if (++mm % 2 == 1) {
        const double bytes = e * static_cast<double>(g.m) * static_cast<double>(g.n) * share;
        c.kept += bytes;
        if (row_parallel(op.name)) outside += bytes;
      } else
        replayed += share;
    }
    if (replayed > 0) replay(c.replayed, op.name, replayed);
  }
  c.rebuilt = rebuilt_beside(total, c.kept, outside);
  return c;
}

// JAX's checkpoint_dots_with_no_batch_dims (MaxText's remat_policy "minimal"): the output of every
// dot_general without batch dimensions is saved, which is every product of activations and weights
// (grouped expert GEMMs included); the attention core (a custom kernel, or dots with batch and head
// dimensions) and every element-wise op are recomputed from them in the backward. What is saved is
// the product's value as the program shards it: under sequence parallelism the row-parallel
// products' outputs after their reduce-scatter, a sequence shard.
LayerCheckpoint dots_policy(const std::vector<Op>& ops, const LayerShape& s, double layer_input, double total) {
  LayerCheckpoint c{.kept = layer_input};
  const double e = static_cast<double>(s.activation_bytes);
  double outside = 0;  // kept bytes autograd does not save
  const double sp_shard = s.sp ? static_cast<double>(s.tp) : 1.0;
  for (const auto& op : ops) {
    const auto* g = std::get_if<Gemm>(&op.shape);
    if (g == nullptr || op.attention_core) {
      replay(c.replayed, op.name);
      continue;
    }
    const bool row = row_parallel(op.name);
    const double bytes = e * static_cast<double>(g->m) * static_cast<double>(g->n) * static_cast<double>(g->count) /
                         (row ? sp_shard : 1.0);
    c.kept += bytes;
    if (row) outside += bytes;
  }
  c.rebuilt = rebuilt_beside(total, c.kept, outside);
  return c;
}

}  // namespace

namespace {

LayerCheckpoint policy_checkpoint(const spec::Job& job, const ModelSpec& m, const LayerShape& s, bool moe,
                                  bool recomputed) {
  const auto tensors = saved_tensors(m, s, save_options(job), moe);
  const double total = total_bytes(tensors);
  double input = 0;
  for (const auto& t : tensors)
    if (t.layer_input) input += t.bytes;
  const auto& st = job.strategy;
  // a layer recomputed whole (full recomputation, or the compiler's to fit) keeps its input only
  if (recomputed) return {.kept = input, .rebuilt = total - input, .whole_layer = true};
  switch (st.recompute) {
    case spec::Recompute::None:
    case spec::Recompute::Full:
      return {.kept = total};
    case spec::Recompute::Op:
      return op_policy(layer_ops(m, s, moe), m, s, input, total);
    case spec::Recompute::Dots:
      return dots_policy(layer_ops(m, s, moe), s, input, total);
    case spec::Recompute::Selective:
      break;
  }
  const LayerPart parts = parts_of(spec::recompute_modules_of(st));
  LayerCheckpoint c;
  LayerPart dropped = LayerPart::None;  // the parts that drop a tensor of this layer
  for (const auto& t : tensors) {
    const bool drop = intersects(t.dropped_by, parts);
    (drop ? c.rebuilt : c.kept) += t.bytes;
    if (drop) dropped = dropped | t.dropped_by;
  }
  // a part replays its kernels only where it dropped something (moe_act in a dense layer,
  // mla_up_proj without MLA: nothing)
  for (const auto& p : kPartOps)
    if (intersects(p.part, parts) && intersects(p.part, dropped))
      for (const auto op : p.ops)
        if (!op.empty()) replay(c.replayed, op);
  return c;
}

}  // namespace

LayerCheckpoint layer_checkpoint(const spec::Job& job, const ModelSpec& m, const LayerShape& s, bool moe,
                                 bool recomputed) {
  auto c = policy_checkpoint(job, m, s, moe, recomputed);
  c.working = backward_working_bytes(m, s, save_options(job), moe);
  return c;
}

double backward_working_bytes(const ModelSpec& m, const LayerShape& s, const SaveOptions& o, bool moe) {
  const Sizes z = sizes(m, s, o);
  const bool swiglu = m.mlp == MlpKind::Swiglu;
  // an activation's backward over `rows` × `ffn` (per GPU) whose first GEMM's input has `input_rows`
  // rows of h: the incoming gradient and the input gradients, then the data gradient beside the latter
  const auto mlp = [&](double rows, double ffn, double input_rows) {
    const double f = z.e * rows * ffn;
    const double inputs = swiglu ? 2 * f : f;
    return std::max(f + inputs, inputs + z.e * input_rows * z.h);
  };
  double mlp_peak = 0;
  if (moe) {
    const auto& x = *m.moe;
    const double routed = received_copies(x, s);
    mlp_peak = mlp(routed / static_cast<double>(s.etp), static_cast<double>(x.expert_ffn_hidden), routed);
    if (x.shared_experts > 0)
      mlp_peak = std::max(mlp_peak,
                          mlp(z.tokens, x.shared_experts * static_cast<double>(x.expert_ffn_hidden) / z.tp, z.tokens));
  } else {
    mlp_peak = mlp(z.tokens, static_cast<double>(m.ffn_hidden) / z.tp, z.tokens);
  }
  const double heads = static_cast<double>(m.heads) / z.tp;
  const double kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / z.tp);
  const double qk_dim = m.mla ? static_cast<double>(m.mla->qk_head_dim()) : static_cast<double>(m.head_dim);
  const double v_dim = m.mla ? static_cast<double>(m.mla->v_head_dim) : static_cast<double>(m.head_dim);
  const double dqkv = z.e * z.tokens * (heads * qk_dim + (m.mla ? heads : kv_heads) * (qk_dim + v_dim));
  const double d_out = z.e * z.tokens * heads * v_dim;
  double attention_inner = 0;
  if (o.fused_attention) {
    attention_inner = 4 * z.tokens * heads * qk_dim;  // FlashAttention-2's fp32 dQ accumulator
  } else {
    const double scores = static_cast<double>(s.micro_batch) * heads * static_cast<double>(s.seq_len / s.cp) *
                          static_cast<double>(s.seq_len);
    attention_inner = z.e * scores;  // the scores' gradient (the softmax's backward writes it in place)
  }
  const double attention_peak = std::max(d_out + dqkv + attention_inner, dqkv + z.e * z.tokens * z.h);
  return z.e * z.tokens_sp * z.h + std::max(mlp_peak, attention_peak);
}

SaveOptions save_options(const spec::Job& job) {
  const auto& s = job.strategy;
  return {
      .fused_attention = spec::is_fused(spec::attention_of(s)),
      .eager = !s.compile,
      .fp8_saved_casts = spec::fp8_of(s) != spec::Fp8Recipe::Off && spec::framework_preset(s.framework).fp8_saves_casts,
      .repeat_kv = s.repeat_kv,
      .lora = spec::lora_of(job.workload.training)};
}

namespace {

// The module a linear layer of the table is (layer_ops names each as its module).
std::optional<spec::LoraModule> lora_module_of(std::string_view op) {
  for (const auto m : {spec::LoraModule::Qkv, spec::LoraModule::OutProj, spec::LoraModule::Fc1, spec::LoraModule::Fc2})
    if (spec::lora_module_name(m) == op) return m;
  return std::nullopt;
}

// Under LoRA a frozen linear layer needs no input for a weight gradient: its saved input goes
// unless an adapter sits beside it, whose A then keeps the input in the activations' dtype (not an
// FP8 cast: the adapter runs in bf16), or under dropout the dropped input and the mask; and each
// adapter keeps A's rank-wide output for B's gradient. A fused attention's output, which the output
// projection reads, stays the attention's own.
void apply_lora(std::vector<SavedTensor>& out, const spec::LoraSpec& lora, const Sizes& z) {
  const auto adapted = [&](spec::LoraModule m) {
    return std::find(lora.modules.begin(), lora.modules.end(), m) != lora.modules.end();
  };
  std::vector<SavedTensor> kept;
  // the adapter's input for A's gradient: under dropout its dropped copy and mask instead
  const auto keep_input = [&](std::string_view op, double elements, LayerPart dropped_by) {
    if (lora.dropout <= 0) {
      kept.push_back({.op = op, .what = "input (LoRA: A's input)", .bytes = z.e * elements, .dropped_by = dropped_by});
      return;
    }
    kept.push_back({.op = op, .what = "input (LoRA: dropped copy)", .bytes = z.e * elements, .dropped_by = dropped_by});
    kept.push_back({.op = op, .what = "input (LoRA: dropout mask)", .bytes = elements, .dropped_by = dropped_by});
  };
  for (const auto& t : out) {
    // a fused attention's output, which the attention keeps and the output projection's adapter reads
    if (t.op == "attention" && t.what == "output" && adapted(spec::LoraModule::OutProj) && lora.dropout > 0)
      keep_input("out_proj", t.bytes / z.e, t.dropped_by);
    const auto module = lora_module_of(t.op);
    if (!module || !t.what.starts_with("input")) {
      kept.push_back(t);
      continue;
    }
    const bool fused_output = t.what.find("FP8 cast") != std::string_view::npos;  // the attention's output's cast
    if (!adapted(*module) || fused_output) continue;
    // a column-parallel layer's adapter reads the whole sequence (gathered under SP), a row-parallel
    // one its input shard, as the base layer saved it
    const bool column = *module == spec::LoraModule::Qkv || *module == spec::LoraModule::Fc1;
    keep_input(t.op, column ? z.tokens * z.h : t.bytes / z.linear_e, t.dropped_by);
  }
  // A's output (its rank gathered) for B's gradient, over every token
  const double r = static_cast<double>(lora.rank);
  for (const auto m : lora.modules)
    kept.push_back({.op = spec::lora_module_name(m), .what = "LoRA A's output", .bytes = z.e * r * z.tokens});
  out = std::move(kept);
}

}  // namespace

std::vector<SavedTensor> saved_tensors(const ModelSpec& m, const LayerShape& s, const SaveOptions& o, bool moe) {
  SIM_ASSERT(!moe || m.moe, "an MoE layer needs a model with experts");
  const Sizes z = sizes(m, s, o);
  const double mask = m.dropout ? 1 : 0;
  std::vector<SavedTensor> out;
  Table t(out);
  // replicated across tp unless sequence parallelism shards them: the norms' inputs and outputs
  // (sharded outputs re-gathered in the backward) and the dropout masks
  t.layer_input(z.e * z.tokens_sp * z.h);
  norm_tensors(t, "norm1", m, z);
  // the column-parallel linears' input: the sequence shard, or under DTensor SP the gathered sequence
  const double linear_in = s.sp && s.sp_saves_gathered ? z.tokens : z.tokens_sp;
  t.add(m.mla ? "q_down" : "qkv", "input (the norm's output)", z.linear_e * linear_in * z.h, LayerPart::Layernorm);
  attention_tensors(t, m, s, o, z);
  t.add("residual1", "dropout mask", mask * z.tokens_sp * z.h);
  t.add("norm2", "input", z.e * z.tokens_sp * z.h);
  norm_tensors(t, "norm2", m, z);
  t.add(moe ? "router" : "fc1", "input (the norm's output)", z.linear_e * linear_in * z.h, LayerPart::Layernorm);
  if (moe)
    moe_tensors(t, m, s, z);
  else
    mlp_tensors(t, "act", "fc2", m, z, z.tokens, static_cast<double>(m.ffn_hidden) / z.tp, LayerPart::Mlp,
                LayerPart::None);
  t.add("residual2", "dropout mask", mask * z.tokens_sp * z.h);
  if (o.lora != nullptr) apply_lora(out, *o.lora, z);
  return out;
}

double total_bytes(const std::vector<SavedTensor>& tensors) {
  double sum = 0;
  for (const auto& t : tensors) sum += t.bytes;
  return sum;
}

}  // namespace trainsim::model
