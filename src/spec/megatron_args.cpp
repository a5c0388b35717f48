// Megatron-LM launch arguments (megatron/training/arguments.py) as strategy keys, training settings
// and, when a launch gives them, the model's dimensions. docs/cli.md "Launch configurations" lists
// every argument read.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/spec/launch_config.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

// Arguments that leave a step's cost alone: optimisation hyper-parameters, data, checkpoints,
// logging, tokenizer files, numerics that do not change the kernels run. Read silently.
constexpr std::array<std::string_view, 29> kCostFreeArgPrefixes{"--lr",
                                                                "--min-lr",
                                                                "--weight-decay",
                                                                "--clip-grad",
                                                                "--adam-",
                                                                "--init-method",
                                                                "--train-iters",
                                                                "--train-samples",
                                                                "--save",
                                                                "--load",
                                                                "--data-",
                                                                "--split",
                                                                "--tokenizer-",
                                                                "--vocab-file",
                                                                "--merge-file",
                                                                "--log-",
                                                                "--eval-",
                                                                "--tensorboard-",
                                                                "--wandb-",
                                                                "--seed",
                                                                "--distributed-",
                                                                "--exit-",
                                                                "--ckpt-",
                                                                "--no-load-",
                                                                "--rotary-base",
                                                                "--norm-epsilon",
                                                                "--layernorm-epsilon",
                                                                "--timing-",
                                                                "--use-checkpoint-args"};
constexpr std::array<std::string_view, 19> kCostFreeArgs{"--use-mcore-models",
                                                         "--transformer-impl",
                                                         "--mock-data",
                                                         "--dataloader-type",
                                                         "--num-workers",
                                                         "--async-save",
                                                         "--finetune",
                                                         "--max-position-embeddings",
                                                         "--attention-softmax-in-fp32",
                                                         "--apply-query-key-layer-scaling",
                                                         "--make-vocab-size-divisible-by",
                                                         "--bias-swiglu-fusion",
                                                         "--bias-gelu-fusion",
                                                         "--masked-softmax-fusion",
                                                         "--use-dist-ckpt",
                                                         "--dist-ckpt-format",
                                                         "--manual-gc",
                                                         "--manual-gc-interval",
                                                         "--no-async-tensor-model-parallel-allreduce"};

bool cost_free(std::string_view flag) {
  return std::find(kCostFreeArgs.begin(), kCostFreeArgs.end(), flag) != kCostFreeArgs.end() ||
         std::any_of(kCostFreeArgPrefixes.begin(), kCostFreeArgPrefixes.end(),
                     [&](std::string_view p) { return flag.starts_with(p); });
}

// The parsed arguments: each flag with the words after it (none for a switch).
class Args {
 public:
  Args(std::map<std::string, std::vector<std::string>, std::less<>> flags, const std::string& source)
      : flags_(std::move(flags)), source_(source) {}

  bool has(std::string_view flag) {
    read_.insert(std::string(flag));
    return flags_.contains(flag);
  }
  std::optional<std::int64_t> integer(std::string_view flag, IntRange range) {
    if (!has(flag)) return std::nullopt;
    const auto text = one(flag);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < range.min || v > range.max) {
      problems_.push_back(fmt::format("{} {}: expected an integer in [{}, {}]", flag, text, range.min, range.max));
      return std::nullopt;
    }
    return v;
  }
  std::optional<double> number(std::string_view flag) {
    if (!has(flag)) return std::nullopt;
    const auto text = one(flag);
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
      problems_.push_back(fmt::format("{} {}: expected a number", flag, text));
      return std::nullopt;
    }
    return v;
  }
  std::optional<std::string> word(std::string_view flag, std::initializer_list<std::string_view> choices) {
    if (!has(flag)) return std::nullopt;
    const auto text = one(flag);
    if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
      problems_.push_back(fmt::format("{} {}: expected one of {}", flag, text, fmt::join(choices, ", ")));
      return std::nullopt;
    }
    return text;
  }
  std::optional<std::string> text(std::string_view flag) {
    if (!has(flag)) return std::nullopt;
    return one(flag);
  }
  bool flag(std::string_view f) {
    if (!has(f)) return false;
    if (!flags_.find(f)->second.empty())
      problems_.push_back(fmt::format("{} takes no value, got \"{}\"", f, flags_.find(f)->second.front()));
    return true;
  }
  void problem(std::string message) { problems_.push_back(std::move(message)); }
  // Arguments nobody read that may change the cost.
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [f, v] : flags_)
      if (!read_.contains(f) && !cost_free(f)) out.push_back(f);
    return out;
  }
  void throw_if_any() const {
    if (problems_.empty()) return;
    std::vector<Diagnostic> d;
    for (const auto& p : problems_) d.push_back({"", p});
    throw SpecError(source_, d);
  }

 private:
  std::string one(std::string_view flag) {
    const auto& values = flags_.find(flag)->second;
    if (values.size() != 1) {
      problems_.push_back(fmt::format("{}: expected one value, got {}", flag, values.size()));
      return values.empty() ? std::string() : values.front();
    }
    return values.front();
  }
  std::map<std::string, std::vector<std::string>, std::less<>> flags_;
  std::set<std::string, std::less<>> read_;
  std::vector<std::string> problems_;
  const std::string& source_;
};

// The model's dimensions, when the launch gives them (no workload file): Megatron's GPT model
// arguments and their defaults (4·h MLP, learned positions, LayerNorm, biases, tied embeddings).
std::optional<ModelSpec> read_model_args(Args& a) {
  const auto layers = a.integer("--num-layers", {1, 10000});
  const auto hidden = a.integer("--hidden-size", {1, 1 << 20});
  const auto heads = a.integer("--num-attention-heads", {1, 1 << 14});
  if (!layers && !hidden && !heads) return std::nullopt;
  if (!layers || !hidden || !heads) {
    a.problem("a model given by arguments needs --num-layers, --hidden-size and --num-attention-heads");
    return std::nullopt;
  }
  ModelSpec m;
  m.layers = static_cast<int>(*layers);
  m.hidden = *hidden;
  m.heads = static_cast<int>(*heads);
  const bool gqa = a.flag("--group-query-attention");
  const auto groups = a.integer("--num-query-groups", {1, 1 << 14});
  m.kv_heads = gqa && groups ? static_cast<int>(*groups) : m.heads;
  if (groups && !gqa) a.problem("--num-query-groups needs --group-query-attention");
  // Megatron's own checks (arguments.py, transformer_config.py): heads divide the hidden size
  // unless --kv-channels gives the head size, and query groups divide the heads
  const auto kv_channels = a.integer("--kv-channels", {1, 1 << 14});
  if (!kv_channels && m.hidden % m.heads != 0)
    a.problem(
        fmt::format("--num-attention-heads {} does not divide --hidden-size {} (give --kv-channels for another "
                    "head size)",
                    m.heads, m.hidden));
  if (m.heads % m.kv_heads != 0)
    a.problem(fmt::format("--num-query-groups {} does not divide --num-attention-heads {}", m.kv_heads, m.heads));
  m.head_dim = kv_channels.value_or(m.hidden / m.heads);
  m.mlp = a.flag("--swiglu") ? MlpKind::Swiglu : MlpKind::Gelu;
  // Megatron's default MLP width: 4h, or 8h/3 rounded to 64 with SwiGLU (arguments.py)
  const std::int64_t default_ffn = m.mlp == MlpKind::Swiglu ? (8 * m.hidden / 3 + 63) / 64 * 64 : 4 * m.hidden;
  m.ffn_hidden = a.integer("--ffn-hidden-size", {1, 1 << 22}).value_or(default_ffn);
  m.vocab = a.integer("--vocab-size", {1, 1 << 24}).value_or(0);  // 0: the tokenizer's (launch_workload)
  m.tied_embeddings = !a.has("--untie-embeddings-and-output-weights");
  m.bias = !a.flag("--disable-bias-linear");
  const auto norm = a.word("--normalization", {"LayerNorm", "RMSNorm"});
  m.norm = norm == "RMSNorm" ? NormKind::RmsNorm : NormKind::LayerNorm;
  const auto position = a.word("--position-embedding-type", {"learned_absolute", "rope", "none"});
  const bool rotary = a.flag("--use-rotary-position-embeddings");
  m.position = position == "rope" || rotary ? PositionKind::Rope : PositionKind::Learned;
  const double hidden_dropout = a.number("--hidden-dropout").value_or(0.1);
  const double attention_dropout = a.number("--attention-dropout").value_or(0.1);
  for (const auto& [flag, p] :
       {std::pair{"--hidden-dropout", hidden_dropout}, {"--attention-dropout", attention_dropout}})
    if (!(p >= 0 && p < 1)) a.problem(fmt::format("{} {}: expected a probability in [0, 1)", flag, p));
  m.dropout = std::max(hidden_dropout, attention_dropout) > 0;
  if (const auto experts = a.integer("--num-experts", {1, 1 << 16})) {
    MoeSpec e;
    e.experts = static_cast<int>(*experts);
    e.top_k = static_cast<int>(a.integer("--moe-router-topk", {1, 1 << 16}).value_or(2));
    if (e.top_k > e.experts)
      a.problem(fmt::format("--moe-router-topk {} exceeds --num-experts {}", e.top_k, e.experts));
    e.expert_ffn_hidden = a.integer("--moe-ffn-hidden-size", {1, 1 << 22}).value_or(m.ffn_hidden);
    if (const auto shared = a.integer("--moe-shared-expert-intermediate-size", {1, 1 << 24})) {
      if (*shared % e.expert_ffn_hidden != 0)
        a.problem(fmt::format("--moe-shared-expert-intermediate-size {} is not a multiple of the expert width ({})",
                              *shared, e.expert_ffn_hidden));
      e.shared_experts = static_cast<int>(*shared / e.expert_ffn_hidden);
    }
    m.moe = e;
  }
  m.mtp_layers = static_cast<int>(a.integer("--mtp-num-layers", {1, 64}).value_or(0));
  if (a.flag("--multi-latent-attention")) {
    MlaSpec mla;
    mla.q_lora_rank = a.integer("--q-lora-rank", {1, 1 << 20}).value_or(0);
    mla.kv_lora_rank = a.integer("--kv-lora-rank", {1, 1 << 20}).value_or(512);
    mla.qk_nope_head_dim = a.integer("--qk-head-dim", {1, 1 << 14}).value_or(128);
    mla.qk_rope_head_dim = a.integer("--qk-pos-emb-head-dim", {1, 1 << 14}).value_or(64);
    mla.v_head_dim = a.integer("--v-head-dim", {1, 1 << 14}).value_or(128);
    m.mla = mla;
    m.kv_heads = m.heads;
    m.head_dim = mla.qk_head_dim();
  }
  return m;
}

// A whole launch line: the arguments after the script are Megatron's (returns where they start);
// torchrun's --nnodes × --nproc_per_node before it is the world size (0 when not given).
std::size_t script_arguments(const std::vector<std::string>& words, std::int64_t& world, const std::string& source) {
  std::size_t first = 0;
  std::int64_t nodes = 0;
  std::int64_t per_node = 0;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!words[i].ends_with(".py")) continue;
    for (std::size_t j = 0; j < i; ++j) {
      // torchrun's --nnodes N and --nnodes=N (argparse takes both)
      const auto eq = words[j].find('=');
      const auto flag = words[j].substr(0, eq);
      const bool is_nodes = flag == "--nnodes";
      if (!is_nodes && flag != "--nproc_per_node" && flag != "--nproc-per-node") continue;
      const std::string text = eq != std::string::npos ? words[j].substr(eq + 1) : j + 1 < i ? words[j + 1] : "";
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || v < 1)
        throw SpecError(source, "",
                        fmt::format("torchrun {} \"{}\": expected a number of {} (an elastic range such as "
                                    "1:4 has no one world size: give -s gpus=N)",
                                    flag, text, is_nodes ? "nodes" : "processes per node"));
      (is_nodes ? nodes : per_node) = v;
    }
    first = i + 1;
  }
  world = nodes > 0 && per_node > 0 ? nodes * per_node : 0;
  return first;
}

// Each --flag with the words after it (argparse's --flag=value as well as --flag value).
std::map<std::string, std::vector<std::string>, std::less<>> parse_flags(const std::vector<std::string>& words,
                                                                         std::size_t first, const std::string& source) {
  std::map<std::string, std::vector<std::string>, std::less<>> flags;
  std::vector<std::string> stray;
  std::string current;
  for (std::size_t i = first; i < words.size(); ++i) {
    const auto& w = words[i];
    if (w.starts_with("--")) {
      const auto eq = w.find('=');
      const auto name = w.substr(0, eq);
      if (flags.contains(name)) throw SpecError(source, "", fmt::format("{} is given twice", name));
      flags[name];
      if (eq != std::string::npos) flags[name].push_back(w.substr(eq + 1));
      current = name;
    } else if (!current.empty()) {
      flags[current].push_back(w);
    } else {
      stray.push_back(w);
    }
  }
  if (!stray.empty())
    throw SpecError(source, "",
                    fmt::format("\"{}\" is not a Megatron argument (arguments start with --)", stray.front()));
  return flags;
}

// Recomputation (the 2021 switch, the selective shortcut, or granularity and method) and the
// attention backend, into strategy keys.
void read_recompute_args(Args& a, nlohmann::json& s) {
  const bool old_full = a.flag("--checkpoint-activations");
  const bool selective = a.flag("--recompute-activations");
  const auto granularity = a.word("--recompute-granularity", {"full", "selective"});
  const auto method = a.word("--recompute-method", {"uniform", "block"});
  const auto recompute_layers = a.integer("--recompute-num-layers", {0, 10000});
  if ((old_full || selective) && granularity)
    a.problem(
        "--recompute-granularity and --checkpoint-activations / --recompute-activations contradict each "
        "other: give one");
  if (old_full) s["recompute"] = "full";
  if (selective) s["recompute"] = "selective";
  if (granularity) s["recompute"] = *granularity;
  if ((method || recompute_layers) && granularity != "full")
    a.problem("--recompute-method and --recompute-num-layers need --recompute-granularity full");
  else if (method == "uniform" && recompute_layers && *recompute_layers > 1) {
    s["recompute_layers"] = *recompute_layers;
    s["recompute_method"] = "uniform";
  } else if (method == "block" && recompute_layers)
    s["recompute_layers"] = *recompute_layers;
  if (const auto backend = a.word("--attention-backend", {"flash", "fused", "unfused", "local", "auto"})) {
    if (*backend == "flash") s["attention"] = "flash";
    if (*backend == "fused") s["attention"] = "cudnn";
    if (*backend == "unfused" || *backend == "local") s["attention"] = "unfused";
  } else if (a.flag("--use-flash-attn")) {
    s["attention"] = "flash";
  }
}

// Transformer Engine's activation offloading (Megatron-LM arguments.py: --cpu-offloading-num-layers
// defaults to 0, nothing offloaded).
void read_offload_args(Args& a, nlohmann::json& s) {
  const bool on = a.flag("--cpu-offloading");
  const auto layers = a.integer("--cpu-offloading-num-layers", {0, 10000});
  if (layers && !on) a.problem("--cpu-offloading-num-layers needs --cpu-offloading");
  if (on && layers && *layers > 0) s["offload_layers"] = *layers;
}

// The training precision and the FP8 recipe.
void read_precision_args(Args& a, LaunchConfig& out) {
  auto& s = out.strategy;
  const bool bf16 = a.flag("--bf16");
  const bool fp16 = a.flag("--fp16");
  if (bf16 && fp16) a.problem("--bf16 and --fp16 contradict each other");
  if (bf16) out.training.dtype = "bf16";
  if (fp16) out.training.dtype = "fp16";
  if (a.word("--fp8-format", {"e4m3", "hybrid"})) {
    const auto recipe = a.word("--fp8-recipe", {"delayed", "tensorwise", "mxfp8", "blockwise"}).value_or("delayed");
    s["fp8"] = recipe == "mxfp8" || recipe == "blockwise" ? "blockwise" : "tensorwise";
  } else if (a.has("--fp8-recipe")) {
    a.problem("--fp8-recipe needs --fp8-format");
  }
  if (a.flag("--accumulate-allreduce-grads-in-fp32")) s["grad_reduce_dtype"] = "fp32";
  if (a.flag("--fp8-param-gather")) s["fp8_param_gather"] = "on";
}

// The loss: Megatron's cross entropy, the fused one (--cross-entropy-loss-fusion) holding what the
// unfused one holds (an fp32 copy of the logits turned into the softmax) unless its implementation is
// Transformer Engine's, which writes the gradient into the logits (arguments.py:
// --cross-entropy-fusion-impl, 'native' or 'te', default 'native').
void read_loss_args(Args& a, nlohmann::json& s) {
  const bool fusion = a.flag("--cross-entropy-loss-fusion");
  const auto impl = a.word("--cross-entropy-fusion-impl", {"native", "te"});
  if (impl && !fusion) a.problem("--cross-entropy-fusion-impl needs --cross-entropy-loss-fusion");
  if (fusion) s["loss"] = impl == "te" ? "fused_inplace" : "vocab_parallel";
}

}  // namespace

LaunchConfig read_megatron_args(std::string_view text, const std::string& source) {
  const auto words = launch_script_words(text, source);
  std::int64_t world = 0;
  auto flags = parse_flags(words, script_arguments(words, world, source), source);
  Args a(std::move(flags), source);
  LaunchConfig out;
  out.source = source;
  auto& s = out.strategy;
  s["framework"] = "megatron-core";
  const auto set = [&](const char* key, const std::optional<std::int64_t>& v) {
    if (v) s[key] = *v;
  };
  set("tp", a.integer("--tensor-model-parallel-size", {1, 1 << 20}));
  set("pp", a.integer("--pipeline-model-parallel-size", {1, 1 << 20}));
  set("cp", a.integer("--context-parallel-size", {1, 1 << 20}));
  set("ep", a.integer("--expert-model-parallel-size", {1, 1 << 20}));
  set("etp", a.integer("--expert-tensor-parallel-size", {1, 1 << 20}));
  set("mb", a.integer("--micro-batch-size", {1, 1 << 30}));
  set("first_stage_layers", a.integer("--decoder-first-pipeline-num-layers", {1, 10000}));
  set("last_stage_layers", a.integer("--decoder-last-pipeline-num-layers", {1, 10000}));
  if (world > 0) s["gpus"] = world;
  const auto vpp = a.integer("--virtual-pipeline-model-parallel-size", {1, 1024});
  out.layers_per_virtual_stage = a.integer("--num-layers-per-virtual-pipeline-stage", {1, 10000});
  if (vpp && out.layers_per_virtual_stage)
    a.problem(
        "--virtual-pipeline-model-parallel-size and --num-layers-per-virtual-pipeline-stage contradict each "
        "other: give one");
  const auto stages_per_rank = a.integer("--num-virtual-stages-per-pipeline-rank", {1, 1024});
  const auto layout = a.text("--pipeline-model-parallel-layout");
  // arguments.py: no more than one of the three ways of giving the virtual stages
  if ((out.layers_per_virtual_stage ? 1 : 0) + (stages_per_rank ? 1 : 0) + (layout ? 1 : 0) > 1)
    a.problem(
        "give no more than one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank "
        "and --pipeline-model-parallel-layout");
  if (vpp && stages_per_rank && *vpp != *stages_per_rank)
    a.problem(
        "--virtual-pipeline-model-parallel-size and --num-virtual-stages-per-pipeline-rank contradict each other");
  if (vpp || stages_per_rank) s["vpp"] = vpp ? *vpp : *stages_per_rank;
  if (vpp || stages_per_rank || out.layers_per_virtual_stage) s["schedule"] = "interleaved";
  // the layout sets vpp (its stages ÷ pp) and the interleaved schedule where vpp > 1
  if (layout) s["pipeline_layout"] = *layout;
  out.embedding_in_split = a.flag("--account-for-embedding-in-pipeline-split");
  out.loss_in_split = a.flag("--account-for-loss-in-pipeline-split");
  if ((out.embedding_in_split || out.loss_in_split) &&
      (layout || s.contains("first_stage_layers") || s.contains("last_stage_layers")))
    a.problem(
        "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split apply to the even split: "
        "not with --pipeline-model-parallel-layout or --decoder-first/last-pipeline-num-layers");
  if (a.flag("--sequence-parallel")) s["sp"] = "on";
  if (a.flag("--use-distributed-optimizer")) s["zero"] = 1;
  if (a.flag("--use-torch-fsdp2")) {
    if (s.contains("zero")) a.problem("--use-torch-fsdp2 and --use-distributed-optimizer contradict each other");
    s["zero"] = 3;
  }
  if (a.flag("--overlap-grad-reduce")) s["overlap_grad_reduce"] = "on";
  if (a.flag("--overlap-param-gather")) s["overlap_param_gather"] = "on";
  if (a.flag("--tp-comm-overlap")) s["tp_overlap"] = "on";
  if (a.flag("--moe-shared-expert-overlap")) s["ep_overlap"] = "on";
  if (a.flag("--overlap-moe-expert-parallel-comm")) s["overlap_moe_comm"] = "on";
  if (a.flag("--grad-reduce-in-bf16")) s["grad_reduce_dtype"] = "bf16";
  read_recompute_args(a, s);
  read_offload_args(a, s);
  read_precision_args(a, out);
  read_loss_args(a, s);
  if (const auto optimizer = a.word("--optimizer", {"adam", "sgd"})) out.training.optimizer = *optimizer;
  out.training.seq_len = a.integer("--seq-length", {1, 1 << 24});
  out.training.global_batch = a.integer("--global-batch-size", {1, 1 << 30});
  out.model = read_model_args(a);
  out.model_name = "megatron-args-model";
  if (a.has("--rampup-batch-size"))
    out.warnings.push_back(
        fmt::format("{}: --rampup-batch-size: the step is simulated at the full global batch", source));
  a.throw_if_any();
  if (const auto unread = a.unread(); !unread.empty())
    out.warnings.push_back(fmt::format("{}: argument(s) not understood, assumed not to change the cost: {}", source,
                                       fmt::join(unread, " ")));
  return out;
}

LaunchConfig load_megatron_args(const std::string& path) {
  return read_megatron_args(read_text_file(path), fmt::format("--megatron-args {}", path));
}

}  // namespace trainsim::spec
