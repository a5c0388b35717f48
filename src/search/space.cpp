#include "search/space.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace trainsim::search {
namespace {

using spec::Recompute;
using spec::Schedule;

// How far each dimension of the space reaches. Each limit keeps the space to what a practitioner
// would try; a pinned key (--fix) overrides its dimension entirely.
struct SearchLimits {
  // tp stays inside two nodes (NVLink domains) or 16, whichever is larger: beyond, TP traffic
  // crosses the network on every layer (Megatron-LM's guidance: TP within a node).
  std::int64_t min_tp_cap = 16;
  // cp degrees tried, while a rank keeps at least this many tokens (Llama 3 ran 16 ranks at 128K
  // tokens: 8,192 each; below 4,096 the K/V exchange outweighs the attention it splits).
  int max_cp = 64;
  std::int64_t min_tokens_per_cp_rank = 4096;
  // virtual stages per device: Megatron-LM's examples use 2–8 chunks.
  int max_vpp = 8;
  // micro-batch sizes, in sequences: every one that divides a rank's share of the batch up to
  // this (llm-foundry's 125M model ran 128 sequences of 512 tokens per GPU; larger ones the
  // analytic memory check prunes)
  std::int64_t max_mb = 128;
  // degrees are enumerated as powers of two up to this (the job rules reject larger ones anyway)
  std::int64_t max_degree = 1 << 20;
};
constexpr SearchLimits kLimits{};

std::vector<int> powers_of_two_up_to(std::int64_t limit) {
  std::vector<int> out;
  for (std::int64_t v = 1; v <= limit && v <= kLimits.max_degree; v *= 2) out.push_back(static_cast<int>(v));
  return out;
}

// The keys the user pinned, and their values.
struct Pins {
  spec::StrategySpec fixed;
  std::set<std::string> keys;
  spec::DeviceArch arch = spec::DeviceArch::Unknown;  // the attention kernel a framework picks depends on it
  bool has(const char* key) const { return keys.contains(key); }
  // A dimension's values: the pinned one, or the space's.
  template <typename T>
  std::vector<T> values(const char* key, T pinned_value, std::vector<T> space) const {
    if (has(key)) return {pinned_value};
    return space;
  }
};

// Tensor, sequence, context and expert parallelism: how a layer is split.
struct LayerSplit {
  int tp = 1;
  bool sp = false;
  int cp = 1;
  spec::CpComm cp_comm = spec::CpComm::AllGather;
  int ep = 1;
  bool ep_overlap = false;
  bool deepep = false;  // dispatcher=deepep
};

// Pipeline parallelism: stages, the outer stages' layers, the schedule.
struct PipelineSplit {
  int pp = 1;
  std::optional<int> first_stage_layers;
  std::optional<int> last_stage_layers;
  Schedule schedule = Schedule::OneFOneB;
  int vpp = 1;
};

// Data parallelism and memory: ZeRO stage, micro-batch, recomputation.
struct DataChoice {
  int zero = 0;
  std::optional<std::int64_t> zero_group;  // HSDP: ZeRO-3 sharded inside a group, replicated across
  std::int64_t mb = 1;
  Recompute recompute = Recompute::None;
};

// The devices that one fast domain joins: a node's NVLink (or mesh) domain, or one TPU slice of a
// multislice job; 0 where the whole cluster is one domain (a single torus).
std::int64_t domain_devices(const spec::ClusterSpec& cluster) {
  if (const auto* t = std::get_if<spec::TorusNetwork>(&cluster.network)) return t->slices > 1 ? t->slice_devices() : 0;
  return cluster.node.devices;
}

// The ZeRO-3 shard groups tried besides the whole dp·cp group: the dp·cp ranks inside one domain
// (ranks are placed tp innermost), which is how hybrid sharding is run (PyTorch FSDP's HYBRID_SHARD
// within a node, MaxText's ici_fsdp inside a slice with dcn_data across).
std::vector<std::optional<std::int64_t>> shard_groups(std::int64_t domain, const LayerSplit& l, std::int64_t dp,
                                                      int zero, const Pins& p) {
  std::vector<std::optional<std::int64_t>> out{std::nullopt};
  if (p.has("zero_group")) return {p.fixed.zero_group};
  const std::int64_t ranks = dp * l.cp;
  if (zero < 3 || domain <= 0 || domain % l.tp != 0) return out;
  const std::int64_t group = domain / l.tp;
  if (group >= 2 && group < ranks && ranks % group == 0) out.emplace_back(group);
  return out;
}

std::vector<LayerSplit> layer_splits(const spec::ClusterSpec& cluster, const spec::WorkloadSpec& w, const Pins& p) {
  const auto& m = w.model;
  const auto& f = p.fixed;
  const std::int64_t tp_cap =
      std::min<std::int64_t>(m.heads, std::max<std::int64_t>(kLimits.min_tp_cap, 2 * cluster.node.devices));
  std::vector<int> cps;
  for (const int c : powers_of_two_up_to(kLimits.max_cp))
    if (c == 1 || w.training.seq_len / c >= kLimits.min_tokens_per_cp_rank) cps.push_back(c);
  std::vector<int> eps{1};
  if (m.moe) {
    eps.clear();
    for (const int e : powers_of_two_up_to(m.moe->experts))
      if (m.moe->experts % e == 0) eps.push_back(e);
  }
  const std::int64_t domain = domain_devices(cluster);
  std::vector<LayerSplit> out;
  for (const int tp : p.values("tp", f.tp, powers_of_two_up_to(tp_cap)))
    for (const bool sp : p.values("sp", f.sp, tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}))
      for (const int cp : p.values("cp", f.cp, cps))
        for (const auto cp_comm :
             p.values("cp_comm", f.cp_comm,
                      cp > 1 ? std::vector<spec::CpComm>{spec::CpComm::AllGather, spec::CpComm::Ring}
                             : std::vector<spec::CpComm>{spec::CpComm::AllGather}))
          for (const int ep : p.values("ep", f.ep, eps)) {
            const bool can_overlap = ep > 1 && m.moe && m.moe->shared_experts > 0;
            // DeepEP's two legs differ from the all-to-all only where the expert-parallel group (ep
            // ranks at a stride of tp·cp) spans scale-up domains, each holding as many of its ranks
            // (Passes::ep_legs): whole domains of whole tp·cp blocks
            const std::int64_t width = std::int64_t{tp} * cp * ep;
            const bool spans =
                ep > 1 && domain > 0 && width > domain && width % domain == 0 && domain % (std::int64_t{tp} * cp) == 0;
            const bool can_deepep = spans && spec::framework_preset(f.framework).offers_deepep;
            for (const bool overlap : p.values("ep_overlap", f.ep_overlap,
                                               can_overlap ? std::vector<bool>{false, true} : std::vector<bool>{false}))
              for (const bool deepep : p.values("dispatcher", f.deepep_dispatch,
                                                can_deepep ? std::vector<bool>{false, true} : std::vector<bool>{false}))
                out.push_back({tp, sp, cp, cp_comm, ep, overlap, deepep});
          }
  return out;
}

// Stage layers: even, or the remainder split between the outer stages (which carry the embedding
// and the head), as Llama 3 405B does, the multi-token prediction modules' layers counted as the
// last stage's (DeepSeek-V3's 61 and one on 8 stages: 7 + 6×8 + 6 and the module, as
// Megatron-Bridge lays it out). False when the layers cannot be split that way.
bool split_layers(int layers, int mtp, int pp, PipelineSplit& split) {
  if (layers % pp == 0 || split.first_stage_layers || split.last_stage_layers) return true;
  const int inner = (layers + mtp + pp - 1) / pp;
  const int rest = layers + mtp - (pp - 2) * inner;
  if (pp <= 2 || rest - mtp < 2 || rest - rest / 2 - mtp < 1) return false;
  split.first_stage_layers = rest / 2;
  split.last_stage_layers = rest - rest / 2 - mtp;
  return true;
}

// The schedules a pipeline layout of `stages` virtual stages runs on pp stages: 1F1B and ZB-H1 with a
// chunk per stage, interleaving with more.
std::vector<std::pair<Schedule, int>> layout_schedules(int stages, int pp) {
  const int vpp = stages / pp;
  if (vpp > 1)
    return pp > 1 ? std::vector<std::pair<Schedule, int>>{{Schedule::Interleaved, vpp}}
                  : std::vector<std::pair<Schedule, int>>{};
  if (pp == 1) return {{Schedule::OneFOneB, 1}};
  return {{Schedule::OneFOneB, 1}, {Schedule::ZbH1, 1}};
}

std::vector<PipelineSplit> pipeline_splits(const spec::WorkloadSpec& w, std::int64_t replicas, const Pins& p) {
  const int layers = w.model.layers;
  const auto& f = p.fixed;
  std::vector<int> pps;
  for (std::int64_t d = 1; d <= replicas && d <= layers; ++d)
    if (replicas % d == 0) pps.push_back(static_cast<int>(d));
  std::vector<PipelineSplit> out;
  // a pipeline layout fixes the virtual stages: pp divides them, and vpp is what is left
  const int layout_stages = f.pipeline_layout ? static_cast<int>(f.pipeline_layout->stages.size()) : 0;
  if (f.pipeline_layout) std::erase_if(pps, [&](int pp) { return layout_stages % pp != 0; });
  for (const int pp : p.values("pp", f.pp, pps)) {
    if (replicas % pp != 0) continue;
    PipelineSplit base{.pp = pp, .first_stage_layers = f.first_stage_layers, .last_stage_layers = f.last_stage_layers};
    if (!f.pipeline_layout && !split_layers(layers, w.model.mtp_layers, pp, base) && !p.has("pp"))
      continue;  // no split of the layers: not a strategy
    std::vector<std::pair<Schedule, int>> schedules{{Schedule::OneFOneB, 1}};
    if (f.pipeline_layout) {
      schedules = layout_schedules(layout_stages, pp);
    } else if (pp > 1) {
      schedules.emplace_back(Schedule::ZbH1, 1);
      if (layers % pp == 0)
        for (int v = 2; v <= kLimits.max_vpp; ++v)
          if ((layers / pp) % v == 0) schedules.emplace_back(Schedule::Interleaved, v);
      // DualPipeV where the framework runs it: two chunks of at least a layer on every stage
      const int fewest = std::min(
          {base.first_stage_layers.value_or(layers / pp), base.last_stage_layers.value_or(layers / pp), layers / pp});
      if (spec::framework_preset(f.framework).offers_dualpipev && fewest >= 2)
        schedules.emplace_back(Schedule::DualPipeV, 2);
    }
    if (p.has("schedule") || p.has("vpp")) {
      std::erase_if(schedules, [&](const auto& c) {
        return (p.has("schedule") && c.first != f.schedule) || (p.has("vpp") && c.second != f.vpp);
      });
      if (schedules.empty()) schedules.emplace_back(f.schedule, f.vpp);
    }
    // (DualPipeV's head, with the modules, is on the first stage: the outer counts trade places)
    const bool swap = w.model.mtp_layers > 0 && !f.first_stage_layers && !f.last_stage_layers;
    for (const auto& [schedule, vpp] : schedules) {
      auto split = base;
      split.schedule = schedule;
      split.vpp = vpp;
      if (swap && schedule == Schedule::DualPipeV) std::swap(split.first_stage_layers, split.last_stage_layers);
      out.push_back(split);
    }
  }
  return out;
}

std::vector<DataChoice> data_choices(const spec::WorkloadSpec& w, std::int64_t dp, const LayerSplit& l,
                                     const PipelineSplit& pipe, std::int64_t domain, const Pins& p) {
  const auto& f = p.fixed;
  const auto batch = w.training.global_batch;
  // every micro-batch that divides a data-parallel rank's share of the batch, not only powers of
  // two: runs at the edge of memory use 6, 12 or 13 sequences (llm-foundry's tables)
  std::vector<std::int64_t> mbs;
  for (std::int64_t b = 1; b <= kLimits.max_mb; ++b)
    if (batch % (dp * b) == 0) mbs.push_back(b);
  if (mbs.empty()) mbs.push_back(1);  // rejected by the job rules, reported as such
  // Flash attention never stores the attention scores, which is all selective recomputation saves.
  const auto recomputes =
      p.values<Recompute>("recompute", f.recompute,
                          spec::is_fused(f.attention.value_or(spec::framework_attention(f.framework, p.arch)))
                              ? std::vector<Recompute>{Recompute::None, Recompute::Full}
                              : std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full});
  std::vector<DataChoice> out;
  // the ZeRO stages the framework offers (Megatron: the distributed optimizer; FSDP: sharded or not)
  const auto stages = spec::framework_preset(f.framework).zero_stages;
  for (const int zero :
       p.values("zero", f.zero, dp > 1 ? std::vector<int>(stages.begin(), stages.end()) : std::vector<int>{0}))
    for (const auto mb : p.values("mb", f.mb, mbs)) {
      // Megatron-LM interleaves micro-batches in groups of pp; DualPipeV needs 2·pp of them
      const auto microbatches = batch / (dp * mb);
      if (pipe.schedule == Schedule::Interleaved && !p.has("schedule") && !p.has("vpp") && microbatches % pipe.pp != 0)
        continue;
      if (pipe.schedule == Schedule::DualPipeV && !p.has("schedule") && microbatches < 2 * pipe.pp) continue;
      for (const auto& group : shard_groups(domain, l, dp, zero, p))
        for (const auto recompute : recomputes) out.push_back({zero, group, mb, recompute});
    }
  return out;
}

// Combined 1F1B where Megatron-Core runs it (expert parallelism without the shared-expert overlap
// or full recomputation, and with a pipeline, the interleaved schedule) and where DualPipeV pairs a
// forward with a backward.
std::vector<bool> combined_1f1b(const LayerSplit& l, const PipelineSplit& pipe, const DataChoice& d, const Pins& p) {
  const bool pairs = pipe.pp == 1 || pipe.schedule == Schedule::Interleaved || pipe.schedule == Schedule::DualPipeV;
  const bool can = l.ep > 1 && !l.ep_overlap && pairs && d.recompute != Recompute::Full;
  return p.values("overlap_moe_comm", p.fixed.overlap_moe_comm,
                  can ? std::vector<bool>{false, true} : std::vector<bool>{false});
}

spec::StrategySpec compose(spec::StrategySpec s, const LayerSplit& l, const PipelineSplit& pipe, const DataChoice& d,
                           std::int64_t gpus, const Pins& p) {
  s.tp = l.tp;
  // the preset's loss may depend on tp (TorchTitan's loss parallelism)
  if (!p.has("loss")) {
    s.loss = spec::framework_preset(s.framework).loss_at(s.tp);
    for (auto& [key, value] : s.assumed.keys)
      if (key == "loss") value = spec::loss_name(s.loss);
  }
  s.sp = l.sp;
  s.cp = l.cp;
  s.cp_comm = l.cp_comm;
  s.ep = l.ep;
  s.ep_overlap = l.ep_overlap;
  s.deepep_dispatch = l.deepep;
  s.pp = pipe.pp;
  s.schedule = pipe.schedule;
  s.vpp = pipe.vpp;
  s.first_stage_layers = pipe.first_stage_layers;
  s.last_stage_layers = pipe.last_stage_layers;
  s.zero = d.zero;
  s.zero_group = d.zero_group;
  s.mb = d.mb;
  s.recompute = d.recompute;
  s.dp.reset();
  s.gpus = gpus;
  return s;
}

// The segments tried for a job of `gpus` devices (Slurm's --segment, docs/search.md): the pinned
// one; otherwise the whole node and, where a node joins several hosts (an NVL72 rack's 18 trays of
// 4 GPUs), the segment NVIDIA's GB200 launch scripts ask for: the most hosts of a node that divide
// the job's hosts (Megatron-Bridge scripts/performance/utils/executors.py; 16 trays for 256 or 512
// GPUs, 12 for 96). None when that is the whole node.
std::vector<std::optional<int>> segment_options(const spec::ClusterSpec& whole, const Pins& pins, std::int64_t gpus) {
  if (pins.has("segment")) return {pins.fixed.segment};
  std::vector<std::optional<int>> out{std::nullopt};
  const int hosts = whole.node.hosts();
  const int host_devices = whole.node.host_devices;
  if (std::holds_alternative<spec::TorusNetwork>(whole.network) || hosts < 2 || gpus % host_devices != 0) return out;
  const std::int64_t job_hosts = gpus / host_devices;
  int segment = hosts;
  while (job_hosts % segment != 0) --segment;
  auto strategy = pins.fixed;
  strategy.segment = segment;
  if (segment < hosts && spec::segment_error(whole, strategy).empty()) out.emplace_back(segment);
  return out;
}

// The candidates of a job of `gpus` devices on the part of each node a segment gives.
void enumerate_segment(const spec::ClusterSpec& whole, const spec::WorkloadSpec& workload, const Pins& pins,
                       std::optional<int> segment, std::int64_t g, std::vector<Candidate>& out) {
  auto fixed = pins.fixed;
  fixed.segment = segment;
  const auto cluster = spec::allocated_part(whole, fixed);
  // a segment the sweep adds is tried where it holds the job
  if (segment && !pins.has("segment") && g > cluster.num_devices()) return;
  const auto splits = layer_splits(cluster, workload, pins);
  const std::int64_t domain = domain_devices(cluster);
  for (const auto& l : splits) {
    const std::int64_t model_parallel = std::int64_t{l.tp} * l.cp;
    if (g % model_parallel != 0) continue;
    for (const auto& pipe : pipeline_splits(workload, g / model_parallel, pins)) {
      const std::int64_t dp = g / (model_parallel * pipe.pp);
      if (pins.has("dp") && pins.fixed.dp != dp) continue;
      // pinned keys the dimensions do not cover (attention, order) come with the fixed strategy
      for (const auto& d : data_choices(workload, dp, l, pipe, domain, pins))
        for (const bool combined : combined_1f1b(l, pipe, d, pins)) {
          auto s = compose(fixed, l, pipe, d, g, pins);
          s.overlap_moe_comm = combined;
          out.push_back({std::move(s), g});
        }
    }
  }
}

}  // namespace

std::vector<Candidate> enumerate_space(const spec::ClusterSpec& whole, const spec::WorkloadSpec& workload,
                                       const SweepOptions& options) {
  Pins pins{.fixed = spec::read_strategy_spec(options.fixed, options.fixed_source), .arch = whole.device.arch};
  for (const auto& [key, value] : options.fixed.items()) pins.keys.insert(key);
  // without --gpus, every device of the cluster (or of the pinned segment)
  auto gpus = options.gpus;
  if (gpus.empty()) gpus.push_back(pins.fixed.gpus.value_or(allocated_cluster(whole, options).num_devices()));
  std::vector<Candidate> out;
  for (const auto g : gpus)
    for (const auto segment : segment_options(whole, pins, g))
      enumerate_segment(whole, workload, pins, segment, g, out);
  return out;
}

}  // namespace trainsim::search
