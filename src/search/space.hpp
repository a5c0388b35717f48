#pragma once
// The search space of a sweep: every strategy worth simulating for a workload on a cluster, in a
// fixed order. Private to search/.
#include <cstdint>
#include <vector>

#include "trainsim/search/sweep.hpp"

namespace trainsim::search {

// One point of the space: a strategy and the device count it runs on.
struct Candidate {
  spec::StrategySpec strategy;
  std::int64_t gpus = 0;
};

// The space, dimension by dimension (a key pinned by the user has its value only):
//  - tp: powers of two up to the heads, at most max(16, two nodes' devices); sp off and on (tp > 1);
//  - cp: powers of two while a rank's slice keeps at least 4,096 tokens, with K/V all-gathered or
//    passed around a ring;
//  - ep: powers of two dividing the experts (MoE only), with and without the shared experts
//    overlapping the dispatch;
//  - pp: divisors of the remaining devices up to the layers; uneven splits give the outer stages
//    (which carry the embedding and the head) the remainder, as Llama 3 405B does; a pp that
//    cannot split the layers that way is left out;
//  - schedule: 1F1B, ZB-H1, and interleaved with every vpp from 2 to 8 that divides a stage's
//    layers, when the micro-batches come in groups of pp as Megatron-LM needs; DualPipeV where the
//    framework offers it (TorchTitan) with 2·pp micro-batches or more (GPipe is never faster than
//    1F1B and holds more: pin it to see it);
//  - zero 0–3 (0 only without data parallelism); mb every size up to 128 dividing the batch per
//    replica (not only powers of two: runs at the edge of memory take 6, 12 or 18); recompute none and full (and
//    selective with attention=unfused: flash attention already keeps no scores, which is all selective recomputation
//    saves).
std::vector<Candidate> enumerate_space(const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload,
                                       const SweepOptions& options);

}  // namespace trainsim::search
