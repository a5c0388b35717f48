#pragma once
// Unions of time intervals and the pieces shared by the trace analyses. Private to trace/.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "trainsim/trace/analysis.hpp"
#include "trainsim/util/intervals.hpp"

namespace trainsim::trace {

class Intervals {
 public:
  void add(std::int64_t begin, std::int64_t end) {
    if (end > begin) spans_.emplace_back(begin, end);
    merged_ = false;
  }
  // The union, sorted and disjoint.
  const std::vector<std::pair<std::int64_t, std::int64_t>>& merged() {
    if (!merged_) {
      spans_ = merged_spans(spans_);
      merged_ = true;
    }
    return spans_;
  }
  double length() {
    double total = 0;
    for (const auto& [b, e] : merged()) total += static_cast<double>(e - b);
    return total;
  }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;
  bool merged_ = true;
};

// Time covered by both unions.
inline double overlap(Intervals& a, Intervals& b) {
  const auto& x = a.merged();
  const auto& y = b.merged();
  double total = 0;
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const auto begin = std::max(x[i].first, y[j].first);
    const auto end = std::min(x[i].second, y[j].second);
    if (end > begin) total += static_cast<double>(end - begin);
    if (x[i].second < y[j].second)
      ++i;
    else
      ++j;
  }
  return total;
}

// For each profiler step, the GPU ops whose launch (or, without one, whose start) falls inside it.
std::vector<std::vector<std::size_t>> ops_by_step(const RankTrace& trace);
// What the trace recorded for one step.
StepFigures recorded_step(const RankTrace& trace, std::size_t step, const std::vector<std::size_t>& ops);
// The file's figures and its collectives, added to `report`.
void add_file_and_collectives(const RankTrace& trace, TraceReport& report);

}  // namespace trainsim::trace
