#pragma once
// What a simulated step says: step time and throughput, where the time went (compute, exposed
// communication, pipeline bubble — measured on the timeline), per-stage figures and the memory
// peak of every simulated rank.
#include <array>
#include <string>
#include <vector>

#include "trainsim/lower/lowering.hpp"
#include "trainsim/sim/timeline.hpp"

namespace trainsim::driver {

struct Breakdown {
  double compute_s = 0;
  double exposed_comm_s = 0;
  // the device idle while the host is still launching its next work (docs/model.md "Host overhead")
  double host_bound_s = 0;
  double bubble_s = 0;
};

struct StageFigures {
  int stage = 0;
  double busy_s = 0;
  double idle_s = 0;
  double bubble_fraction = 0;
  std::int64_t peak_memory = 0;
  std::array<std::int64_t, sim::kMemoryKinds> memory_at_peak{};
  // the peak came at or after the stage's first loss (model::loss_cached_bytes is reserved then)
  bool peak_after_loss = false;
  // the caching allocator's reserve beyond the live tensors at the peak (run.cpp adds it)
  std::int64_t reserve = 0;
};

struct Simulation {
  double step_time_s = 0;
  Breakdown breakdown;         // averaged over simulated ranks; sums to the step time
  double bubble_fraction = 0;  // mean over stages of idle (neither compute nor exposed comm) / step
  std::vector<StageFigures> per_stage;
  std::vector<std::pair<std::string, double>> comm_busy_s;  // per category, mean per rank
  // per communication category (pipeline transfers aside): its time with the compute stream idle,
  // mean per rank (categories may overlap one another)
  std::vector<std::pair<std::string, double>> exposed_s;
  std::int64_t peak_memory = 0;       // the highest pool peak (with the allocator's reserve once run.cpp adds it)
  std::int64_t live_peak_memory = 0;  // the highest pool peak of live tensors alone
  std::size_t peak_rank = 0;     // index into Lowered::ranks
  std::size_t tasks = 0;
  std::uint64_t events = 0;
  std::size_t simulated_ranks = 0;
  std::int64_t fold = 1;
};

Simulation summarize(const lower::Lowered& lowered, const sim::Timeline& timeline);

}  // namespace trainsim::driver
