#include "trainsim/model/params.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace trainsim::model {
namespace {

using spec::MlpKind;
using spec::ModelSpec;

// Width of the first MLP matrix: GeLU has one up-projection, SwiGLU a gate and an up projection.
double mlp_in_width(const ModelSpec& m, double ffn) {
  return m.mlp == MlpKind::Swiglu ? 2 * ffn : ffn;
}

// One MLP of inner width `ffn`: up (h × in) and down (ffn × h) projections with optional biases.
double mlp_params(const ModelSpec& m, double ffn) {
  const double h = static_cast<double>(m.hidden);
  const double in = mlp_in_width(m, ffn);
  return h * in + ffn * h + (m.bias ? in + h : 0);
}

// Per-GPU share of one MLP under tensor parallelism: the weights and the column-parallel bias
// are split, the row-parallel output bias is replicated (Megatron ColumnParallel/RowParallelLinear).
double mlp_params_tp(const ModelSpec& m, double ffn, int tp) {
  const double h = static_cast<double>(m.hidden);
  const double in = mlp_in_width(m, ffn);
  return (h * in + ffn * h + (m.bias ? in : 0)) / tp + (m.bias ? h : 0);
}

double norm_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  return m.norm == spec::NormKind::LayerNorm ? 2 * h : h;
}

// Multi-head latent attention (DeepSeek-V2 §2.1): the query's down projection (h × q_lora) and
// its norm, or a plain query projection; the joint key-value down projection (h × (kv_lora +
// rope)) and its norm; the up projections to every held head's query (q_lora × nope+rope) and key
// and value (kv_lora × nope+v); the output projection. Tensor parallelism splits the heads: the
// up and output projections; the down projections and their norms are replicated.
double mla_params(const ModelSpec& m, double heads_held) {
  const auto& a = *m.mla;
  const double h = static_cast<double>(m.hidden);
  const double norm = m.norm == spec::NormKind::LayerNorm ? 2 : 1;
  const double q_lora = static_cast<double>(a.q_lora_rank);
  const double kv_lora = static_cast<double>(a.kv_lora_rank);
  const double qk = static_cast<double>(a.qk_head_dim());
  const double q = a.q_lora_rank > 0 ? h * q_lora + norm * q_lora + q_lora * heads_held * qk : h * heads_held * qk;
  const double kv = h * (kv_lora + static_cast<double>(a.qk_rope_head_dim)) + norm * kv_lora +
                    kv_lora * heads_held * static_cast<double>(a.qk_nope_head_dim + a.v_head_dim);
  return q + kv + heads_held * static_cast<double>(a.v_head_dim) * h;
}

// Q (h × a·d), K and V (h × kv·d each), output projection (a·d × h), with biases.
double attention_params(const ModelSpec& m, double kv_heads_held, double q_heads_held, bool replicate_out_bias,
                        int tp) {
  if (m.mla) return mla_params(m, q_heads_held);
  const double h = static_cast<double>(m.hidden);
  const double d = static_cast<double>(m.head_dim);
  const double q = q_heads_held * d;
  const double kv = 2 * kv_heads_held * d;
  const double weights = h * (q + kv) + q * h;
  const double biases = m.bias || m.qkv_bias ? q + kv : 0;
  const double out_bias = m.bias ? (replicate_out_bias ? h : h / tp) : 0;
  return weights + biases + out_bias;
}

LayerParams layer_params(const ModelSpec& m, bool moe) {
  LayerParams p;
  p.attention = attention_params(m, m.kv_heads, m.heads, true, 1);
  p.norms = 2 * norm_params(m);
  if (!moe) {
    p.mlp = mlp_params(m, static_cast<double>(m.ffn_hidden));
    return p;
  }
  const auto& e = *m.moe;
  const double expert = mlp_params(m, static_cast<double>(e.expert_ffn_hidden));
  p.mlp = e.shared_experts > 0 ? mlp_params(m, e.shared_experts * static_cast<double>(e.expert_ffn_hidden)) : 0;
  p.router = static_cast<double>(m.hidden) * e.experts;
  p.experts = e.experts * expert;
  return p;
}

// The layer's share on one GPU of a tp group; experts are split over ep, then over etp.
StageParams layer_share(const ModelSpec& m, bool moe, int tp, int ep, int etp) {
  const double kv_held = std::max(1.0, static_cast<double>(m.kv_heads) / tp);
  const double q_held = static_cast<double>(m.heads) / tp;
  StageParams s;
  s.dense = attention_params(m, kv_held, q_held, true, tp) + 2 * norm_params(m);
  if (!moe) {
    s.dense += mlp_params_tp(m, static_cast<double>(m.ffn_hidden), tp);
  } else {
    const auto& e = *m.moe;
    const double ffn = static_cast<double>(e.expert_ffn_hidden);
    // the shared experts: one MLP of their combined width (Megatron's SharedExpertMLP)
    const double shared = e.shared_experts > 0 ? mlp_params_tp(m, e.shared_experts * ffn, tp) : 0;
    s.dense += shared + static_cast<double>(m.hidden) * e.experts;
    s.expert = static_cast<double>(e.experts) / ep * mlp_params_tp(m, ffn, etp);
  }
  s.largest_layer = s.dense + s.expert;
  return s;
}

}  // namespace

bool is_moe_layer(const ModelSpec& model, int layer) {
  layer = std::min(layer, model.layers - 1);  // a multi-token prediction module's: the last layer's kind
  return model.moe && layer >= model.moe->dense_layers && (layer + 1) % model.moe->layer_step == 0;
}

double ParamCounts::total() const {
  return embedding + position + final_norm + output + dense_layers * dense_layer.total() +
         moe_layers * moe_layer.total() + mtp();
}

double ParamCounts::active() const {
  const double routed = moe_layers * moe_layer.experts + mtp_modules * mtp_layer.experts;
  return total() - routed + routed * active_expert_fraction;
}

double mtp_own_params(const ModelSpec& model, int tp) {
  const double h = static_cast<double>(model.hidden);
  return 2 * h * h / tp + 3 * norm_params(model);
}

ParamCounts count_params(const ModelSpec& model, std::int64_t seq_len) {
  ParamCounts c;
  const double h = static_cast<double>(model.hidden);
  c.embedding = static_cast<double>(model.vocab) * h;
  c.position = model.position == spec::PositionKind::Learned ? static_cast<double>(seq_len) * h : 0;
  c.final_norm = norm_params(model);
  c.output = model.tied_embeddings ? 0 : static_cast<double>(model.vocab) * h;
  c.moe_layers = 0;
  for (int layer = 0; layer < model.layers; ++layer) c.moe_layers += is_moe_layer(model, layer) ? 1 : 0;
  c.dense_layers = model.layers - c.moe_layers;
  c.dense_layer = layer_params(model, false);
  if (model.moe) {
    c.moe_layer = layer_params(model, true);
    c.active_expert_fraction = static_cast<double>(model.moe->top_k) / model.moe->experts;
  }
  c.mtp_modules = model.mtp_layers;
  c.mtp_layer = layer_params(model, is_moe_layer(model, model.layers));
  c.mtp_own = mtp_own_params(model, 1);
  return c;
}

std::vector<StageParams> stage_params(const spec::Job& job) {
  const auto& m = job.workload.model;
  const auto& s = job.strategy;
  std::vector<StageParams> stages;
  for (int stage = 0; stage < static_cast<int>(job.stage_layers.size()); ++stage) {
    StageParams sp;
    const auto add = [&](int layer) {
      const auto l = layer_share(m, is_moe_layer(m, layer), s.tp, s.ep, spec::expert_tp_of(s));
      sp.dense += l.dense;
      sp.expert += l.expert;
      sp.largest_layer = std::max(sp.largest_layer, l.largest_layer);
    };
    for (int chunk = 0; chunk < s.vpp; ++chunk) {
      const int first = spec::chunk_first_layer(job, stage, chunk);
      for (int layer = first; layer < first + spec::chunk_layers(job, stage, chunk); ++layer) add(layer);
    }
    // the multi-token prediction modules' layers, beside the head (numbered after the model's)
    if (stage == spec::head_stage(job))
      for (int j = 0; j < m.mtp_layers; ++j) add(m.layers + j);
    if (stage == 0) sp.dense += embedding_params_on_gpu(job);
    if (stage == spec::head_stage(job)) sp.dense += head_params_on_gpu(job);
    stages.push_back(sp);
  }
  return stages;
}

double lora_params_on_gpu(const ModelSpec& model, const spec::LoraSpec& lora, int tp) {
  const double h = static_cast<double>(model.hidden);
  const double qkv = static_cast<double>(model.heads + 2 * model.kv_heads) * static_cast<double>(model.head_dim);
  const double attention_out = static_cast<double>(model.heads) * static_cast<double>(model.head_dim);
  const double ffn = static_cast<double>(model.ffn_hidden);
  const double fc1 = ffn * (model.mlp == spec::MlpKind::Swiglu ? 2 : 1);
  // in and out of each adaptable layer, in LoraModule's order: qkv, out_proj, fc1, fc2
  const std::array<double, 4> in{h, attention_out, h, ffn};
  const std::array<double, 4> out{qkv, h, fc1, h};
  double params = 0;
  for (const auto module : lora.modules) {
    const auto i = static_cast<std::size_t>(module);
    params += in.at(i) + out.at(i);
  }
  // NeMo's ParallelLinearAdapter splits both matrices over the tensor-parallel ranks: a
  // column-parallel layer's A over the rank (its output gathered) and B over the output, a
  // row-parallel layer's A over the input and B over the output (gathered)
  return params * lora.rank / static_cast<double>(tp);
}

std::vector<StageParams> trainable_stage_params(const spec::Job& job) {
  const auto& lora = job.workload.training.lora;
  if (!lora) return stage_params(job);
  const double per_layer = lora_params_on_gpu(job.workload.model, *lora, job.strategy.tp);
  std::vector<StageParams> stages;
  for (const int layers : job.stage_layers)
    stages.push_back({.dense = per_layer * layers, .expert = 0, .largest_layer = per_layer});
  return stages;
}

StageParams layer_params_on_gpu(const ModelSpec& model, bool moe, int tp, int ep, int etp) {
  return layer_share(model, moe, tp, ep, etp);
}

namespace {

// The vocabulary matrices the head's stage holds (each vocab_shard × h): an untied output layer, or
// (pp > 1) the copy of the tied embedding Megatron keeps on the last stage; and with multi-token
// prediction beside an untied output layer, a copy of the embedding there too (Megatron-Core
// builds it where the modules are: pre_process or mtp_process).
int head_vocab_matrices(const spec::Job& job) {
  const auto& m = job.workload.model;
  const bool staged = job.stage_layers.size() > 1;
  const bool output = !m.tied_embeddings || staged;
  const bool embedding = m.mtp_layers > 0 && !m.tied_embeddings && staged && spec::head_stage(job) != 0;
  return (output ? 1 : 0) + (embedding ? 1 : 0);
}

double vocab_shard(const spec::Job& job) {
  return static_cast<double>((job.workload.model.vocab + job.strategy.tp - 1) / job.strategy.tp);
}

}  // namespace

// Vocab-parallel embedding and output layer: the vocabulary is padded to a multiple of tp.
double embedding_params_on_gpu(const spec::Job& job) {
  const auto& m = job.workload.model;
  const double h = static_cast<double>(m.hidden);
  const double position =
      m.position == spec::PositionKind::Learned ? static_cast<double>(job.workload.training.seq_len) * h : 0;
  return vocab_shard(job) * h + position;
}

double head_params_on_gpu(const spec::Job& job) {
  const auto& m = job.workload.model;
  const double h = static_cast<double>(m.hidden);
  return norm_params(m) + head_vocab_matrices(job) * vocab_shard(job) * h +
         m.mtp_layers * mtp_own_params(m, job.strategy.tp);
}

int layer_parameter_tensors(const spec::ModelSpec& model, bool moe, int local_experts) {
  const int per_linear = model.bias ? 2 : 1;
  const int per_norm = model.norm == spec::NormKind::LayerNorm ? 2 : 1;
  const int mlp_linears = model.mlp == spec::MlpKind::Swiglu ? 3 : 2;
  int linears = 2;             // attention: QKV (fused) and the output projection
  if (model.mla) linears = 5;  // q down and up, kv down and up, output
  int tensors = 2 * per_norm + (model.qkv_bias && !model.bias ? 1 : 0);  // Qwen2's q, k and v bias
  if (!moe) return tensors + (linears + mlp_linears) * per_linear;
  const int shared = model.moe ? model.moe->shared_experts : 0;
  return tensors + linears * per_linear + 1 + (local_experts + shared) * mlp_linears * per_linear;
}

namespace {

// The number the next module's tensors get.
int next_module(const std::vector<ParamTensor>& out) {
  return out.empty() ? 0 : out.back().module + 1;
}

void add_norm(const ModelSpec& m, double width, std::vector<ParamTensor>& out) {
  const int module = next_module(out);
  out.push_back({width, false, module});
  if (m.norm == spec::NormKind::LayerNorm) out.push_back({width, false, module});
}

void add_linear(double weight, double bias, bool expert, std::vector<ParamTensor>& out) {
  const int module = next_module(out);
  out.push_back({weight, expert, module});
  if (bias > 0) out.push_back({bias, expert, module});
}

// A module of one weight (a projection of multi-head latent attention, the router, an embedding).
void add_weight(double weight, std::vector<ParamTensor>& out) {
  add_linear(weight, 0, false, out);
}

// One MLP's fc1 and fc2 under `tp` (mlp_params_tp): column-parallel fc1 and its bias split, the
// row-parallel fc2's bias replicated.
void add_mlp(const ModelSpec& m, double ffn, int tp, bool expert, std::vector<ParamTensor>& out) {
  const double h = static_cast<double>(m.hidden);
  const double in = mlp_in_width(m, ffn);
  add_linear(h * in / tp, m.bias ? in / tp : 0, expert, out);
  add_linear(ffn * h / tp, m.bias ? h : 0, expert, out);
}

// Multi-head latent attention's tensors (mla_params): the query's down projection and its norm
// and up projection (or a plain query projection), the joint key-value down projection, its norm
// and up projection, the output projection.
void add_mla(const ModelSpec& m, double heads_held, std::vector<ParamTensor>& out) {
  const auto& a = *m.mla;
  const double h = static_cast<double>(m.hidden);
  const double q_lora = static_cast<double>(a.q_lora_rank);
  const double kv_lora = static_cast<double>(a.kv_lora_rank);
  const double qk = static_cast<double>(a.qk_head_dim());
  if (a.q_lora_rank > 0) {
    add_weight(h * q_lora, out);
    add_norm(m, q_lora, out);
    add_weight(q_lora * heads_held * qk, out);
  } else {
    add_weight(h * heads_held * qk, out);
  }
  add_weight(h * (kv_lora + static_cast<double>(a.qk_rope_head_dim)), out);
  add_norm(m, kv_lora, out);
  add_weight(kv_lora * heads_held * static_cast<double>(a.qk_nope_head_dim + a.v_head_dim), out);
  add_weight(heads_held * static_cast<double>(a.v_head_dim) * h, out);
}

}  // namespace

std::vector<ParamTensor> layer_param_tensors(const ModelSpec& m, bool moe, int tp, int ep, int etp) {
  const double h = static_cast<double>(m.hidden);
  const double kv_held = std::max(1.0, static_cast<double>(m.kv_heads) / tp);
  const double q_held = static_cast<double>(m.heads) / tp;
  std::vector<ParamTensor> out;
  add_norm(m, h, out);
  if (m.mla) {
    add_mla(m, q_held, out);
  } else {
    const double d = static_cast<double>(m.head_dim);
    const double qkv = (q_held + 2 * kv_held) * d;
    add_linear(h * qkv, m.bias || m.qkv_bias ? qkv : 0, false, out);
    add_linear(q_held * d * h, m.bias ? h : 0, false, out);
  }
  add_norm(m, h, out);
  if (!moe) {
    add_mlp(m, static_cast<double>(m.ffn_hidden), tp, false, out);
    return out;
  }
  const auto& e = *m.moe;
  const double ffn = static_cast<double>(e.expert_ffn_hidden);
  add_weight(h * e.experts, out);  // the router
  // the shared experts: one MLP of their combined width (Megatron's SharedExpertMLP)
  if (e.shared_experts > 0) add_mlp(m, e.shared_experts * ffn, tp, false, out);
  // (experts / ep need not be whole in a model under study: the last holds the remainder)
  const double local = static_cast<double>(e.experts) / ep;
  for (int i = 0; i < static_cast<int>(std::ceil(local)); ++i) {
    std::vector<ParamTensor> one;
    add_mlp(m, ffn, etp, true, one);
    const double share = std::min(1.0, local - i);
    const int first = next_module(out);
    for (auto& t : one) out.push_back({t.elements * share, true, first + t.module});
  }
  return out;
}

std::vector<ParamTensor> embedding_param_tensors(const spec::Job& job) {
  const auto& m = job.workload.model;
  const double h = static_cast<double>(m.hidden);
  std::vector<ParamTensor> out;
  add_weight(vocab_shard(job) * h, out);
  if (m.position == spec::PositionKind::Learned)
    add_weight(static_cast<double>(job.workload.training.seq_len) * h, out);
  return out;
}

std::vector<ParamTensor> head_param_tensors(const spec::Job& job) {
  const auto& m = job.workload.model;
  const double h = static_cast<double>(m.hidden);
  std::vector<ParamTensor> out;
  add_norm(m, h, out);
  for (int i = 0; i < head_vocab_matrices(job); ++i) add_weight(vocab_shard(job) * h, out);
  for (int j = 0; j < m.mtp_layers; ++j) {
    add_weight(2 * h * h / job.strategy.tp, out);
    for (int n = 0; n < 3; ++n) add_norm(m, h, out);
  }
  return out;
}

}  // namespace trainsim::model
