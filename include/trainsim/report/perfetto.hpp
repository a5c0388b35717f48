#pragma once
// The simulated step as Chrome/Perfetto trace events (`run --timeline`).
#include <string>

#include "trainsim/lower/lowering.hpp"
#include "trainsim/sim/timeline.hpp"

namespace trainsim::report {

// A process per simulated rank, a thread per stream.
void write_perfetto(const lower::Lowered& lowered, const sim::Timeline& timeline, const std::string& path);

}  // namespace trainsim::report
