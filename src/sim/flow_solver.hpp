#pragma once
// Max-min fair rates for transfers sharing links (progressive filling): every transfer's rate
// (its speed relative to running alone) rises together until a link is full or the transfer runs
// at full speed; transfers through a full link freeze; the rest continue. Private to sim/.
#include <cstdint>
#include <span>
#include <vector>

#include "trainsim/sim/task_graph.hpp"

namespace trainsim::sim {

// rates[i] for flows[i]; each flow lists its link shares (capacity used when alone).
std::vector<double> max_min_rates(std::span<const std::vector<LinkShare>* const> flows);

}  // namespace trainsim::sim
