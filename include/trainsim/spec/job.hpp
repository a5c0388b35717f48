#pragma once
// A job: cluster + workload + strategy, with the cross-field rules checked and the derived
// quantities (dp, micro-batches, layers per stage) resolved. Everything downstream takes a Job.
#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::spec {

struct Sources {
  std::string topology;
  std::string workload;
  std::string strategy;
};

struct Job {
  ClusterSpec cluster;
  WorkloadSpec workload;
  StrategySpec strategy;
  Sources sources;
  std::int64_t gpus = 0;           // tp·cp·pp·dp
  std::int64_t dp = 0;             // data-parallel degree
  std::int64_t micro_batches = 0;  // per pipeline and step: global_batch / (dp·mb)
  std::vector<int> stage_layers;   // transformer layers on each pipeline stage
  // the model's index of the first layer of each virtual stage (spec::virtual_stage), pp·vpp + 1
  // entries, the last the layer count: chunk_first_layer and chunk_layers read it
  std::vector<int> virtual_stage_first_layer;
  std::vector<std::string> warnings;
};

// Layers of pipeline stage `stage` recomputed whole: by full recomputation (all of them, or
// recompute_layers of each model chunk) and by the compiler to fit (remat_layers of each chunk).
int recomputed_layers(const Job& job, int stage);

// Why the strategy's `segment` cannot be allocated on the cluster, or "" when it can (or is unset).
std::string segment_error(const ClusterSpec& cluster, const StrategySpec& strategy);

// The part of every node (scale-up domain) a job is given: with the strategy's `segment`, that many
// hosts of each node and their NICs (node.idle_hosts the rest of the domain); the cluster itself
// otherwise, or when segment_error has a reason (resolve_job reports it).
ClusterSpec allocated_part(const ClusterSpec& cluster, const StrategySpec& strategy);
// allocated_part, or a SpecError at `source`'s /segment with segment_error's reason.
ClusterSpec checked_allocated_part(const ClusterSpec& cluster, const StrategySpec& strategy, const std::string& source);

// Where the model's virtual stages (its pp·vpp chunks in order) sit. Megatron's interleaving puts
// virtual stage chunk·pp + stage on `stage`; DualPipeV's V puts chunk 0 of stage s at s and chunk 1
// at 2p − 1 − s, so the first stage holds both the embedding and the loss and the last stage's two
// chunks follow each other on the same device.
int virtual_stage(Schedule schedule, int stage, int chunk, int pp);
struct StageChunk {
  int stage;
  int chunk;
};
StageChunk at_virtual_stage(Schedule schedule, int virtual_index, int pp);
// The stage that holds the output layer and the loss: the last, or the first under DualPipeV.
int head_stage(const Job& job);
// Layers of model chunk `chunk` on `stage` (the stage's layers split as evenly as its vpp chunks
// allow) and the model's index of its first layer.
int chunk_layers(const Job& job, int stage, int chunk);
int chunk_first_layer(const Job& job, int stage, int chunk);
// Whether multi-token prediction module j's layer is recomputed: numbered in the head's chunk after
// its layers, as the lowering walks them (chunk_units).
bool recomputes_mtp_layer(const Job& job, int j);

// The ranks ZeRO shards the model states over: zero_group, or all dp·cp ranks.
std::int64_t zero_shards(const Job& job);

// Whether Transformer Engine keeps each weight's FP8 copy across the step's micro-batches:
// tensorwise scaling, a preset that caches the FP8 weights, the weights not sharded by ZeRO-3
// (which gathers them again for each micro-batch).
bool fp8_weight_copies_kept(const Job& job);

// Checks every rule that spans fields or files; throws one SpecError listing all violations,
// each attributed to the file whose value it rejects.
Job resolve_job(ClusterSpec cluster, WorkloadSpec workload, StrategySpec strategy, Sources sources);

}  // namespace trainsim::spec
