#pragma once
// Reading a simulated step in tests: what its tasks moved and how long its streams were busy.
#include <cstdint>
#include <string>
#include <variant>

#include "trainsim/driver/run.hpp"

namespace trainsim::test {

// Payload bytes of one category's communication tasks on the simulated ranks.
inline double comm_bytes(const driver::RunReport& r, lower::Category category) {
  const auto& g = r.step->lowered.graph;
  double bytes = 0;
  for (std::uint32_t t = 0; t < g.num_tasks(); ++t) {
    if (g.category(sim::TaskId{t}) != static_cast<std::uint16_t>(category)) continue;
    const auto work = g.work(sim::TaskId{t});
    if (const auto* c = std::get_if<sim::CommWork>(&work)) bytes += static_cast<double>(c->bytes);
  }
  return bytes;
}

// Seconds a communication category ("tp", "dp", ...) keeps a rank busy; 0 when absent.
inline double busy_seconds(const driver::RunReport& r, const std::string& category) {
  for (const auto& [name, seconds] : r.simulation->comm_busy_s)
    if (name == category) return seconds;
  return 0;
}

}  // namespace trainsim::test
