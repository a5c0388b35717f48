#pragma once
// How unevenly dropless routing loads the experts and the expert-parallel ranks that hold them
// (docs/model.md "Expert load"): each expert's tokens in a micro-batch are a gamma-distributed
// share (mean 1, coefficient of variation cv), a rank's the sum of its experts' (a gamma of
// experts-a-rank times the shape), and every rank waits for the busiest.
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::model {

// E[max of `ranks` ranks' loads] over their mean, each rank `per_rank` experts whose loads have
// coefficient of variation cv: 1 for one rank or cv 0; with cv 1 and one expert a rank (exponential
// loads) the harmonic number H(ranks).
double expected_busiest(double cv, int per_rank, int ranks);

// The coefficient of variation of the experts' loads in a micro-batch: the one whose busiest of
// the model's experts is the workload's load_imbalance, else the balancing method's, from
// published measurements (0 forced).
double expert_load_cv(const spec::MoeSpec& moe);

// The busiest expert's routed tokens in a micro-batch over the mean: the workload's load_imbalance,
// else expected_busiest(cv, 1, experts).
double expert_load_imbalance(const spec::MoeSpec& moe);

// The busiest expert-parallel rank's routed copies over a perfectly balanced share: what every rank
// of the group waits for in the dispatch, the grouped GEMMs and the combine, and what the busiest
// holds. With a capacity factor, that factor (each expert padded to its capacity). Dropless, each
// rank holding experts/ep consecutive experts: expected_busiest(cv, experts/ep, ep), or with
// load_seed the loads of each of the `moe_layers` layers drawn and the layers' busiest ranks
// averaged; at most what distinct top_k experts allow, ep·min(experts/ep, top_k)/top_k.
double busiest_rank_load(const spec::MoeSpec& moe, int ep, int moe_layers);

}  // namespace trainsim::model
