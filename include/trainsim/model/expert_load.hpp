#pragma once
// How unevenly dropless routing loads the experts and the expert-parallel ranks that hold them
// (docs/model.md "Expert load").
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::model {

// E[max of n independent standard normal draws]: 0 for n = 1, 1/√π for 2, 3/(2√π) for 3.
double expected_max_normal(int n);

// The coefficient of variation of the experts' loads in a micro-batch: from the workload's
// load_imbalance at its expert count, else the balancing method's published figure (0 forced).
double expert_load_cv(const spec::MoeSpec& moe);

// The busiest expert's routed tokens in a micro-batch over the mean, 1 + cv · E[max of the
// experts]: the workload's load_imbalance where given.
double expert_load_imbalance(const spec::MoeSpec& moe);

// The busiest expert-parallel rank's routed copies over a perfectly balanced share: what every rank
// of the group waits for in the dispatch, the grouped GEMMs and the combine, and what the busiest
// holds. With a capacity factor, that factor (each expert padded to its capacity). Dropless, each
// rank holding experts/ep consecutive experts whose loads vary independently by expert_load_cv:
// 1 + cv/√(experts/ep) · E[max of ep]; with load_seed, the loads of each of the `moe_layers` layers
// drawn (normal, clipped at zero) and the layers' busiest ranks averaged.
double busiest_rank_load(const spec::MoeSpec& moe, int ep, int moe_layers);

}  // namespace trainsim::model
