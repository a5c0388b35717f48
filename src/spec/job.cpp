#include "trainsim/spec/job.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

// Collects violations for one job; each names the input it belongs to.
class Rules {
 public:
  explicit Rules(const Sources& sources) : sources_(sources) {}
  void strategy(std::string pointer, std::string message) {
    diagnostics_.add(std::move(pointer), std::move(message), sources_.strategy);
  }
  void workload(std::string pointer, std::string message) {
    diagnostics_.add(std::move(pointer), std::move(message), sources_.workload);
  }
  bool ok() const { return diagnostics_.empty(); }
  void throw_if_any() const { diagnostics_.throw_if_any(sources_.strategy); }

 private:
  const Sources& sources_;
  Diagnostics diagnostics_;
};

// Slurm's --segment on a block topology: NVIDIA's GB200 launch scripts ask for the largest number of
// trays up to 18 that divides the job's (Megatron-Bridge scripts/performance/utils/executors.py), so
// 256 GPUs take 16 trays (64 GPUs) of each of four NVL72 racks.
void check_segment(Job& job, Rules& rules) {
  if (!job.strategy.segment) return;
  if (auto error = segment_error(job.cluster, job.strategy); !error.empty()) {
    rules.strategy("/segment", error);
    return;
  }
  job.cluster = allocated_part(job.cluster, job.strategy);
}

// What the job may use, in words: "topology \"x\" has 576 devices" or, under a segment,
// "segment=16 leaves 512 of topology \"x\"'s 576 devices".
std::string devices_in_words(const Job& job) {
  const auto& c = job.cluster;
  if (c.node.idle_hosts == 0) return fmt::format("topology \"{}\" has {} devices", c.name, c.num_devices());
  return fmt::format("segment={} leaves {} of topology \"{}\"'s {} devices", *job.strategy.segment, c.num_devices(),
                     c.name, std::int64_t{c.nodes} * c.node.domain_devices());
}

void check_degrees(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  const auto& c = job.cluster;
  const std::int64_t model_parallel = std::int64_t{s.tp} * s.cp * s.pp;
  const std::int64_t devices = c.num_devices();
  if (model_parallel > devices) {
    rules.strategy("/tp", fmt::format("tp·cp·pp = {}·{}·{} = {}, but {}", s.tp, s.cp, s.pp, model_parallel,
                                      devices_in_words(job)));
    return;
  }
  job.gpus = s.gpus.value_or(s.dp ? *s.dp * model_parallel : devices);
  if (!s.gpus && !s.dp)
    job.warnings.push_back(
        c.node.idle_hosts == 0
            ? fmt::format("neither gpus nor dp given: the job takes all {} devices of topology \"{}\"", devices, c.name)
            : fmt::format("neither gpus nor dp given: the job takes all {} devices ({})", devices,
                          devices_in_words(job)));
  if (job.gpus > devices) {
    rules.strategy(s.gpus ? "/gpus" : "/dp", fmt::format("{} GPUs requested but {}", job.gpus, devices_in_words(job)));
    return;
  }
  if (job.gpus % model_parallel != 0) {
    rules.strategy("/gpus", fmt::format("{} GPUs are not divisible by tp·cp·pp = {}·{}·{} = {}", job.gpus, s.tp, s.cp,
                                        s.pp, model_parallel));
    return;
  }
  job.dp = job.gpus / model_parallel;
  if (s.segment && c.node.hosts() == *s.segment && job.gpus % c.node.devices != 0)
    rules.strategy("/segment", fmt::format("{} GPUs are not whole segments of {} hosts ({} devices): Slurm allocates a "
                                           "multiple of the segment",
                                           job.gpus, *s.segment, c.node.devices));
  if (s.dp && *s.dp != job.dp)
    rules.strategy("/dp", fmt::format("tp·cp·pp·dp = {}·{}·{}·{} = {} but gpus = {}", s.tp, s.cp, s.pp, *s.dp,
                                      model_parallel * *s.dp, job.gpus));
  if (s.tp > c.node.devices && c.nodes > 1 && !std::holds_alternative<TorusNetwork>(c.network))
    job.warnings.push_back(fmt::format("tp={} spans nodes (scale-up domains) of {} devices: tensor-parallel traffic crosses the network",
                                       s.tp, c.node.devices));
}

// Megatron-Core's combined 1F1B asks for expert parallelism, leaves the shared experts to the
// schedule, and with a pipeline needs virtual stages (its pairs are chunks of an interleaved
// schedule); docs/model.md "Mixture of experts".
void check_moe_comm_overlap(const Job& job, Rules& rules) {
  const auto& s = job.strategy;
  if (!s.overlap_moe_comm) return;
  if (!job.workload.model.moe || s.ep < 2)
    rules.strategy("/overlap_moe_comm",
                   "overlap_moe_comm needs a mixture of experts with ep > 1 (it overlaps the "
                   "expert-parallel all-to-alls)");
  if (s.ep_overlap)
    rules.strategy("/overlap_moe_comm",
                   "overlap_moe_comm and ep_overlap cannot both be on (Megatron-Core refuses "
                   "--moe-shared-expert-overlap with --overlap-moe-expert-parallel-comm)");
  // its passes are scheduled piece by piece, which a whole-layer checkpoint hides
  if (s.recompute == Recompute::Full || s.recompute_layers)
    rules.strategy("/overlap_moe_comm",
                   "overlap_moe_comm needs recompute other than full and no recompute_layers "
                   "(Megatron-Core refuses whole-layer recomputation with it)");
  if (s.recompute == Recompute::Selective) {
    const auto modules = recompute_modules_of(s);
    if (std::find(modules.begin(), modules.end(), RecomputeModule::Moe) != modules.end())
      rules.strategy("/overlap_moe_comm",
                     "overlap_moe_comm cannot recompute the moe module (its recomputation "
                     "repeats the dispatch)");
  }
  if (s.pp > 1 && s.schedule != Schedule::DualPipeV && (s.schedule != Schedule::Interleaved || s.vpp < 2))
    rules.strategy("/overlap_moe_comm", fmt::format("overlap_moe_comm with pp={} needs schedule=interleaved with "
                                                    "vpp > 1 (Megatron-Core pairs chunks of the interleaved schedule) "
                                                    "or dualpipev",
                                                    s.pp));
}

void check_model_split(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  const auto& m = job.workload.model;
  if (m.heads % s.tp != 0)
    rules.strategy("/tp",
                   fmt::format("{} does not divide heads ({}) of workload \"{}\"", s.tp, m.heads, job.workload.name));
  if (m.kv_heads % s.tp != 0 && s.tp % m.kv_heads != 0)
    rules.strategy("/tp", fmt::format("{} and kv_heads ({}) must divide one another", s.tp, m.kv_heads));
  if (m.ffn_hidden % s.tp != 0)
    rules.strategy("/tp", fmt::format("{} does not divide ffn_hidden ({})", s.tp, m.ffn_hidden));
  if (m.moe && m.moe->expert_ffn_hidden % expert_tp_of(s) != 0)
    rules.strategy("/tp", fmt::format("{} does not divide expert_ffn_hidden ({})", expert_tp_of(s),
                                      m.moe->expert_ffn_hidden));
  if (m.vocab % s.tp != 0)
    job.warnings.push_back(
        fmt::format("vocab {} is padded to a multiple of tp={} for the vocab-parallel embedding", m.vocab, s.tp));
  if (s.sp && s.tp == 1) job.warnings.push_back("sp=on has no effect with tp=1");
  if (s.cp_comm != CpComm::AllGather && s.cp == 1) job.warnings.push_back("cp_comm has no effect with cp=1");
  if (s.deepep_dispatch && (!m.moe || s.ep < 2))
    rules.strategy("/dispatcher",
                   "dispatcher=deepep needs a mixture of experts with ep > 1 (it carries the "
                   "expert-parallel exchange)");
  if (s.ep_overlap && (!m.moe || m.moe->shared_experts == 0))
    job.warnings.push_back("ep_overlap=on has no effect without shared experts to overlap the dispatch with");
  check_moe_comm_overlap(job, rules);
  const auto& t = job.workload.training;
  if (s.cp > 1 && t.seq_len % (2 * s.cp) != 0)
    rules.strategy("/cp", fmt::format("seq_len {} is not divisible by 2·cp = {} (causal load-balanced chunks)",
                                      t.seq_len, 2 * s.cp));
  if (s.sp && s.tp > 1 && (t.seq_len / s.cp) % s.tp != 0)
    rules.strategy(
        "/sp", fmt::format("the sequence slice seq_len/cp = {} is not divisible by tp = {}", t.seq_len / s.cp, s.tp));
  if (!m.moe) {
    if (s.ep > 1)
      rules.strategy(
          "/ep", fmt::format("{} needs a mixture-of-experts model; workload \"{}\" has none", s.ep, job.workload.name));
  } else {
    if (m.moe->experts % s.ep != 0)
      rules.strategy("/ep", fmt::format("{} does not divide experts ({})", s.ep, m.moe->experts));
    if (s.etp && *s.etp != 1 && *s.etp != s.tp)
      rules.strategy("/etp", fmt::format("{} is neither 1 (experts folded over the tensor-parallel ranks) nor tp = {}",
                                         *s.etp, s.tp));
    if (ep_folded(s)) {
      if (s.ep % s.tp != 0)
        rules.strategy("/ep", fmt::format("{} is not a multiple of tp = {}: with etp=1 the expert-parallel group "
                                          "folds over the tensor-parallel ranks",
                                          s.ep, s.tp));
      else if (job.dp > 0 && (job.dp * s.cp) % (s.ep / s.tp) != 0)
        rules.strategy("/ep", fmt::format("ep/tp = {} does not divide dp·cp = {}", s.ep / s.tp, job.dp * s.cp));
      if (!s.sp)
        rules.strategy("/etp", "etp=1 with tp > 1 needs sp=on: the tokens reach the experts sequence-sharded");
    } else if (job.dp > 0 && (job.dp * s.cp) % s.ep != 0) {
      rules.strategy(
          "/ep", fmt::format("{} does not divide dp·cp = {}: experts are sharded within the data-parallel ranks "
                             "(or fold them over tp with etp=1)",
                             s.ep, job.dp * s.cp));
    }
  }
}

// Outer stages of their own size that make the layers fit pp stages (Megatron-LM's
// --decoder-first/last-pipeline-num-layers; DeepSeek-V3's 61 layers on 16 stages: 3 + 14×4 + 2):
// the largest even inner size k with first + last = layers − (pp − 2)·k, each in [vpp, k].
std::string uneven_stages_hint(int layers, int pp, int vpp) {
  if (pp < 3) {
    if (pp == 2 && layers >= 2 * vpp)
      return fmt::format(": give the stages their own counts, e.g. first_stage_layers={},last_stage_layers={}",
                         layers - layers / 2, layers / 2);
    return "";
  }
  for (int k = (layers + pp - 1) / pp; k >= vpp; --k) {
    const int outer = layers - (pp - 2) * k;
    const int first = outer - outer / 2;
    const int last = outer / 2;
    if (last >= vpp && first <= k)
      return fmt::format(": give the outer stages their own counts, e.g. first_stage_layers={},last_stage_layers={} "
                         "({} + {}×{} + {} = {})",
                         first, last, first, pp - 2, k, last, layers);
  }
  return "";
}

// A layout gives each virtual stage its layers; the stage holds those of its chunks.
void check_layout_stages(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  const auto& layout = *s.pipeline_layout;
  if (s.first_stage_layers || s.last_stage_layers) {
    rules.strategy(s.first_stage_layers ? "/first_stage_layers" : "/last_stage_layers",
                   "pipeline_layout gives every stage its layers: give it or the outer stages' counts, not both");
    return;
  }
  const auto& m = job.workload.model;
  if (auto error = pipeline_layout_error(layout, s.pp, m.layers, m.mtp_layers); !error.empty()) {
    rules.strategy("/pipeline_layout", fmt::format("\"{}\": {}", layout.text, error));
    return;
  }
  const auto stages = static_cast<int>(layout.stages.size());
  if (stages != s.pp * s.vpp) {
    rules.strategy("/vpp", fmt::format("the pipeline_layout's {} virtual stages are pp·vpp = {}·{}: vpp would be {}",
                                       stages, s.pp, s.vpp, stages / s.pp));
    return;
  }
  job.stage_layers.assign(static_cast<std::size_t>(s.pp), 0);
  for (int v = 0; v < stages; ++v)
    job.stage_layers[static_cast<std::size_t>(at_virtual_stage(s.schedule, v, s.pp).stage)] +=
        layout.stages[static_cast<std::size_t>(v)].layers;
}

void check_stages(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  if (s.pipeline_layout) {
    check_layout_stages(job, rules);
    return;
  }
  const int layers = job.workload.model.layers;
  const int chunks = s.pp * s.vpp;
  if (!s.first_stage_layers && !s.last_stage_layers) {
    if (layers % chunks != 0) {
      rules.strategy(s.vpp > 1 ? "/vpp" : "/pp",
                     fmt::format("pp·vpp = {}·{} = {} does not divide layers ({}){}", s.pp, s.vpp, chunks, layers,
                                 uneven_stages_hint(layers, s.pp, s.vpp)));
      return;
    }
    job.stage_layers.assign(static_cast<std::size_t>(s.pp), layers / s.pp);
    return;
  }
  if (s.pp < 2) {
    rules.strategy(s.first_stage_layers ? "/first_stage_layers" : "/last_stage_layers",
                   "uneven stages need pp of at least 2");
    return;
  }
  const int first = s.first_stage_layers.value_or(0);
  const int last = s.last_stage_layers.value_or(0);
  const int outer = (s.first_stage_layers ? 1 : 0) + (s.last_stage_layers ? 1 : 0);
  const int inner_stages = s.pp - outer;
  const int inner_layers = layers - first - last;
  if (inner_layers < 0 || (inner_stages == 0 && inner_layers != 0) ||
      (inner_stages > 0 && (inner_layers <= 0 || inner_layers % inner_stages != 0))) {
    rules.strategy(s.first_stage_layers ? "/first_stage_layers" : "/last_stage_layers",
                   fmt::format("first {} + last {} layers leave {} layers for the other {} stages, which is not an "
                               "even positive split",
                               first, last, inner_layers, inner_stages));
    return;
  }
  const int inner = inner_stages > 0 ? inner_layers / inner_stages : 0;
  job.stage_layers.assign(static_cast<std::size_t>(s.pp), inner);
  if (s.first_stage_layers) job.stage_layers.front() = first;
  if (s.last_stage_layers) job.stage_layers.back() = last;
  // with vpp, a stage's layers need not divide evenly: its chunks differ by one layer at most
  for (std::size_t i = 0; i < job.stage_layers.size(); ++i) {
    if (job.stage_layers[i] < s.vpp) {
      rules.strategy("/vpp", fmt::format("stage {} has {} layers, fewer than its vpp = {} model chunks", i,
                                         job.stage_layers[i], s.vpp));
      return;
    }
  }
}

void check_batch_and_schedule(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  const auto global_batch = job.workload.training.global_batch;
  if (global_batch % (job.dp * s.mb) != 0) {
    rules.strategy("/mb", fmt::format("global batch {} is not divisible by dp·mb = {}·{} = {}", global_batch, job.dp,
                                      s.mb, job.dp * s.mb));
    return;
  }
  job.micro_batches = global_batch / (job.dp * s.mb);
  if (s.schedule == Schedule::Interleaved) {
    if (s.pp < 2) rules.strategy("/schedule", "interleaved needs pp of at least 2");
    if (s.vpp < 2) rules.strategy("/vpp", "the interleaved schedule needs vpp of at least 2");
    if (job.micro_batches % s.pp != 0)
      rules.strategy("/schedule",
                     fmt::format("interleaved needs micro-batches ({}) divisible by pp ({}), as Megatron-LM "
                                 "does",
                                 job.micro_batches, s.pp));
  } else if (s.schedule == Schedule::DualPipeV) {
    // deepseek-ai/DualPipe dualpipev.py: two modules per rank, num_chunks >= 2 * num_ranks
    if (s.pp < 2) rules.strategy("/schedule", "dualpipev needs pp of at least 2");
    if (s.vpp != 2)
      rules.strategy("/vpp",
                     fmt::format("dualpipev holds two model chunks per stage (the V): vpp must be 2, not {}", s.vpp));
    if (job.micro_batches < 2 * s.pp)
      rules.strategy("/schedule", fmt::format("dualpipev needs at least 2·pp = {} micro-batches, not {}", 2 * s.pp,
                                              job.micro_batches));
  } else if (s.vpp > 1) {
    rules.strategy("/vpp", fmt::format("vpp = {} needs schedule=interleaved or dualpipev", s.vpp));
  }
}

void check_dtype(Job& job, Rules& rules) {
  const auto dtype = job.workload.training.dtype;
  if (!job.cluster.device.peak_flops.contains(dtype))
    rules.workload("/training/dtype", fmt::format("{} has no peak_flops entry for device \"{}\" in {}",
                                                  dtype_name(dtype), job.cluster.device.name, job.sources.topology));
}

void check_zero_group(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  if (!s.zero_group || job.dp == 0) return;
  const std::int64_t ranks = job.dp * s.cp;
  if (s.zero == 0)
    rules.strategy("/zero_group", "zero_group needs zero of at least 1 (it is the group ZeRO shards over)");
  else if (ranks % *s.zero_group != 0)
    rules.strategy("/zero_group", fmt::format("{} does not divide dp·cp = {}", *s.zero_group, ranks));
}

void check_recompute(Job& job, Rules& rules) {
  const auto& s = job.strategy;
  if (s.recompute_layers && s.recompute != Recompute::Full)
    rules.strategy("/recompute_layers", "recompute_layers needs recompute=full (it counts the layers recomputed)");
  if (s.recompute_method == RecomputeMethod::Uniform && !s.recompute_layers)
    rules.strategy("/recompute_method",
                   "recompute_method=uniform needs recompute_layers (the layers of each checkpointed group)");
  if (!s.recompute_modules.empty() && s.recompute != Recompute::Selective)
    rules.strategy("/recompute_modules",
                   fmt::format("recompute_modules needs recompute=selective (they are what it recomputes), not {}",
                               recompute_name(s.recompute)));
  if (!s.recompute_period) return;
  if (s.recompute != Recompute::Full) {
    rules.strategy("/recompute_period", fmt::format("recompute_period needs recompute=full (every n-th layer is "
                                                    "wholly recomputed), not {}",
                                                    recompute_name(s.recompute)));
    return;
  }
  if (s.recompute_layers) {
    rules.strategy("/recompute_period", "recompute_period and recompute_layers contradict each other (give one)");
    return;
  }
  // TorchTitan counts a chunk's blocks and recomputes every n-th: a period longer than a chunk
  // recomputes nothing there
  for (std::size_t stage = 0; stage < job.stage_layers.size(); ++stage) {
    int chunk = job.stage_layers[stage] / std::max(1, s.vpp);
    if (s.pipeline_layout) {  // the smallest of its chunks that hold layers
      chunk = std::numeric_limits<int>::max();
      for (int c = 0; c < s.vpp; ++c) {
        const auto v = static_cast<std::size_t>(virtual_stage(s.schedule, static_cast<int>(stage), c, s.pp));
        if (const int n = s.pipeline_layout->stages[v].layers; n > 0) chunk = std::min(chunk, n);
      }
    }
    if (chunk < *s.recompute_period) {
      rules.strategy("/recompute_period",
                     fmt::format("{} exceeds the {} layers of stage {}'s model chunks: no layer would be recomputed "
                                 "there (at most {})",
                                 *s.recompute_period, chunk, stage, chunk));
      return;
    }
  }
}

// Activation offloading as Megatron-Core allows it (TransformerConfig.__post_init__: fewer layers
// than the model's, no pipeline parallelism, no recomputation) on a device whose host link is known.
void check_offload(const Job& job, Rules& rules) {
  const auto& s = job.strategy;
  if (s.offload_layers == 0) return;
  const int layers = job.workload.model.layers;
  if (s.pp > 1)
    rules.strategy("/offload_layers",
                   "offload_layers needs pp=1 (Megatron-Core refuses CPU offloading with pipeline "
                   "parallelism)");
  if (s.recompute != Recompute::None)
    rules.strategy("/offload_layers", fmt::format("offload_layers needs recompute=none, not {} (Megatron-Core refuses "
                                                  "CPU offloading with activation recomputation)",
                                                  recompute_name(s.recompute)));
  if (s.offload_layers >= layers)
    rules.strategy("/offload_layers", fmt::format("{} is not fewer than the model's {} layers (at most {})",
                                                  s.offload_layers, layers, layers - 1));
  if (!job.cluster.device.host_bandwidth)
    rules.strategy("/offload_layers",
                   fmt::format("device \"{}\" states no host link to copy to (give the topology's device host_link, "
                               "a catalogue link such as \"pcie5\", or host_bandwidth)",
                               job.cluster.device.name));
}

// The framework keys that depend on the device and the training dtype: the attention kernel and
// FP8. A preset's choice is recorded as assumed.
void resolve_framework(Job& job, Rules& rules) {
  auto& s = job.strategy;
  if (!s.attention) {
    s.attention = framework_attention(s.framework, job.cluster.device.arch);
    s.assumed.keys.emplace_back("attention", std::string(attention_name(*s.attention)));
  }
  const bool fp8_training = job.workload.training.dtype == Dtype::Fp8;
  if (!s.fp8) {
    s.fp8 = fp8_training ? Fp8Recipe::Tensorwise : Fp8Recipe::Off;
    s.assumed.keys.emplace_back("fp8", std::string(fp8_recipe_name(*s.fp8)));
  } else if (*s.fp8 == Fp8Recipe::Off && fp8_training) {
    rules.strategy("/fp8", "fp8=off contradicts training.dtype fp8 of the workload (set the dtype to bf16 instead)");
  }
  // (training.dtype fp8 on such a device is the workload's error, reported by check_dtype)
  if (*s.fp8 != Fp8Recipe::Off && !s.assumed.contains("fp8") && job.cluster.device.peak_flops.count(Dtype::Fp8) == 0)
    rules.strategy("/fp8", fmt::format("device \"{}\" has no FP8 peak", job.cluster.device.name));
  // (a preset's fp8_param_gather=on means nothing without FP8; one the preset does not set is a
  // contradiction)
  if (s.fp8_param_gather && *s.fp8 == Fp8Recipe::Off && !framework_preset(s.framework).fp8_param_gather)
    rules.strategy("/fp8_param_gather", "fp8_param_gather=on needs an FP8 recipe (fp8=tensorwise, or training.dtype fp8)");
  if (const auto& preset = framework_preset(s.framework); s.pp > 1 && s.zero > preset.max_zero_with_pp)
    rules.strategy("/zero",
                   fmt::format("framework={} runs ZeRO-{} at most under pipeline parallelism (pp = {}): give "
                               "zero={} or less, or pp=1",
                               framework_name(s.framework), preset.max_zero_with_pp, s.pp, preset.max_zero_with_pp));
  if (s.fp8_tp_gather == true && *s.fp8 == Fp8Recipe::Off)
    rules.strategy("/fp8_tp_gather", "fp8_tp_gather=on needs an FP8 recipe (fp8=tensorwise, or training.dtype fp8)");
  else if (s.fp8_tp_gather == true && (!s.sp || s.tp == 1))
    job.warnings.push_back(
        "fp8_tp_gather=on has no effect without sequence parallelism (sp=on with tp > 1): no "
        "all-gather feeds a GEMM");
  if (!s.fp8_transpose_cache && *s.fp8 != Fp8Recipe::Tensorwise)
    rules.strategy("/fp8_transpose_cache",
                   "fp8_transpose_cache=off is about the FP8 weights' transposes of tensorwise scaling and needs "
                   "fp8=tensorwise (or training.dtype fp8)");
  else if (!s.fp8_transpose_cache && !fp8_weight_copies_kept(job))
    job.warnings.push_back(
        s.zero == 3 ? "fp8_transpose_cache=off has no effect under ZeRO-3: each micro-batch casts the gathered "
                      "weights and their transposes anew"
                    : fmt::format("fp8_transpose_cache=off has no effect: {} keeps no FP8 weight copies across "
                                  "micro-batches (each one casts the weights and writes their transposes anew)",
                                  framework_name(s.framework)));
  if (*s.fp8 != Fp8Recipe::Off && job.workload.training.dtype == Dtype::Fp32)
    rules.strategy("/fp8", "FP8 GEMMs need 16-bit training (bf16 or fp16), not fp32");
  if (s.loss == LossImpl::LossParallel && s.tp == 1)
    rules.strategy("/loss", "loss_parallel is DTensor's loss over logits sharded by tensor parallelism and needs "
                            "tp > 1; with tp=1 F.cross_entropy on fp32 logits is loss=upcast");
  if (s.loss == LossImpl::FusedLinear && s.tp > 1)
    rules.strategy("/loss",
                   "fused_linear is Liger's fused linear cross entropy over the whole vocabulary and needs "
                   "tp=1; under tensor parallelism the logits are vocabulary shards (loss=vocab_parallel or "
                   "loss_parallel)");
  if (s.tp_overlap && s.tp > 1 && !s.sp && !s.assumed.contains("tp_overlap"))
    job.warnings.push_back(
        "tp_overlap=on needs sp=on (Megatron-Core asserts it; AsyncTP overlaps the sequence-parallel collectives): "
        "the tensor-parallel all-reduces stay exposed");
}

}  // namespace

int recomputed_layers(const Job& job, int stage) {
  // counted chunk by chunk, each layer numbered in its chunk, as the lowering runs them (the
  // compiler's layers beside the policy's; TorchTitan's every n-th and Megatron's first N of each
  // chunk, whatever the chunks' sizes)
  const auto& s = job.strategy;
  int n = 0;
  for (int chunk = 0; chunk < s.vpp; ++chunk)
    for (int i = 0; i < chunk_layers(job, stage, chunk); ++i) n += recomputes_layer(s, i) ? 1 : 0;
  return n;
}

std::int64_t zero_shards(const Job& job) {
  const std::int64_t ranks = job.dp * job.strategy.cp;
  return job.strategy.zero_group ? std::min(*job.strategy.zero_group, ranks) : ranks;
}

bool fp8_weight_copies_kept(const Job& job) {
  const auto& s = job.strategy;
  return fp8_of(s) == Fp8Recipe::Tensorwise && framework_preset(s.framework).fp8_weight_cache && s.zero < 3;
}

int virtual_stage(Schedule schedule, int stage, int chunk, int pp) {
  if (schedule == Schedule::DualPipeV) return chunk == 0 ? stage : 2 * pp - 1 - stage;
  return chunk * pp + stage;
}

StageChunk at_virtual_stage(Schedule schedule, int virtual_index, int pp) {
  if (schedule == Schedule::DualPipeV)
    return virtual_index < pp ? StageChunk{virtual_index, 0} : StageChunk{2 * pp - 1 - virtual_index, 1};
  return {virtual_index % pp, virtual_index / pp};
}

int head_stage(const Job& job) {
  return job.strategy.schedule == Schedule::DualPipeV ? 0 : job.strategy.pp - 1;
}

namespace {

// A short chunk sits where Megatron-Core and Llama 3 put it, at the ends of the model: the first
// chunks of the first stage, the last chunks of the others.
int split_chunk_layers(const Job& job, int stage, int chunk) {
  const int vpp = job.strategy.vpp;
  const int layers = job.stage_layers[static_cast<std::size_t>(stage)];
  const int base = layers / vpp;
  const int extra = layers % vpp;  // chunks holding one more layer
  const bool extra_last = stage == 0 && job.strategy.pp > 1;
  return base + (extra_last ? (chunk >= vpp - extra ? 1 : 0) : (chunk < extra ? 1 : 0));
}

// Prefix sums of the chunks' layers in the model's order: a table, as the lowering asks per pass.
std::vector<int> first_layers(const Job& job) {
  const int pp = job.strategy.pp;
  const auto& layout = job.strategy.pipeline_layout;
  std::vector<int> first{0};
  for (int v = 0; v < pp * job.strategy.vpp; ++v) {
    const auto at = at_virtual_stage(job.strategy.schedule, v, pp);
    first.push_back(first.back() + (layout ? layout->stages[static_cast<std::size_t>(v)].layers
                                           : split_chunk_layers(job, at.stage, at.chunk)));
  }
  return first;
}

}  // namespace

int chunk_layers(const Job& job, int stage, int chunk) {
  const auto position = static_cast<std::size_t>(virtual_stage(job.strategy.schedule, stage, chunk, job.strategy.pp));
  return job.virtual_stage_first_layer[position + 1] - job.virtual_stage_first_layer[position];
}

bool recomputes_mtp_layer(const Job& job, int j) {
  return recomputes_layer(job.strategy, chunk_layers(job, head_stage(job), job.strategy.vpp - 1) + j);
}

int chunk_first_layer(const Job& job, int stage, int chunk) {
  const int position = virtual_stage(job.strategy.schedule, stage, chunk, job.strategy.pp);
  return job.virtual_stage_first_layer[static_cast<std::size_t>(position)];
}

std::string segment_error(const ClusterSpec& cluster, const StrategySpec& strategy) {
  if (!strategy.segment) return {};
  if (std::holds_alternative<TorusNetwork>(cluster.network))
    return "a torus is allocated in whole slices: segment takes hosts of nodes (scale-up domains)";
  const int hosts = cluster.node.hosts();
  if (*strategy.segment > hosts)
    return fmt::format("{} hosts per node requested, but a node of topology \"{}\" has {} (hosts of {} devices)",
                       *strategy.segment, cluster.name, hosts, cluster.node.host_devices);
  if (const auto* ls = std::get_if<LeafSpineNetwork>(&cluster.network)) {
    const int nics = ls->nics_per_node / hosts * *strategy.segment;
    if (nics % ls->planes != 0)
      return fmt::format("{} hosts carry {} NICs, which the network's {} planes do not divide", *strategy.segment, nics,
                         ls->planes);
  }
  return {};
}

ClusterSpec allocated_part(const ClusterSpec& cluster, const StrategySpec& strategy) {
  const int hosts = cluster.node.hosts();
  if (!strategy.segment || *strategy.segment >= hosts || !segment_error(cluster, strategy).empty()) return cluster;
  auto part = cluster;
  part.node.devices = *strategy.segment * cluster.node.host_devices;
  part.node.idle_hosts = hosts - *strategy.segment;
  if (auto* ls = std::get_if<LeafSpineNetwork>(&part.network)) {
    ls->nics_per_node = ls->nics_per_node / hosts * *strategy.segment;
    if (ls->pods) ls->pods->devices = ls->pods->devices / cluster.node.devices * part.node.devices;
  }
  return part;
}

ClusterSpec checked_allocated_part(const ClusterSpec& cluster, const StrategySpec& strategy,
                                   const std::string& source) {
  if (auto error = segment_error(cluster, strategy); !error.empty()) throw SpecError(source, "/segment", error);
  return allocated_part(cluster, strategy);
}

Job resolve_job(ClusterSpec cluster, WorkloadSpec workload, StrategySpec strategy, Sources sources) {
  Job job{.cluster = std::move(cluster),
          .workload = std::move(workload),
          .strategy = std::move(strategy),
          .sources = std::move(sources)};
  job.warnings = job.workload.warnings;
  Rules rules(job.sources);
  check_dtype(job, rules);
  check_segment(job, rules);
  check_degrees(job, rules);
  check_model_split(job, rules);
  check_stages(job, rules);
  resolve_framework(job, rules);
  check_recompute(job, rules);
  check_offload(job, rules);
  if (const auto& max = job.workload.model.max_positions; max && job.workload.training.seq_len > *max)
    job.warnings.push_back(fmt::format(
        "sequence {} is longer than the {} positions the model's config gives (max_position_embeddings): "
        "priced as given; the model itself would need its positions extended (RoPE scaling, not modelled)",
        job.workload.training.seq_len, *max));
  check_zero_group(job, rules);
  if (job.dp > 0) check_batch_and_schedule(job, rules);
  rules.throw_if_any();
  job.virtual_stage_first_layer = first_layers(job);
  job.warnings.insert(job.warnings.begin(), job.cluster.warnings.begin(), job.cluster.warnings.end());
  return job;
}

}  // namespace trainsim::spec
