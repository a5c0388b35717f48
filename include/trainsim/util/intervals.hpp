#pragma once
// The union of time spans, shared by the step's breakdown, the run page and the trace analyses.
#include <algorithm>
#include <utility>
#include <vector>

namespace trainsim {

// The union of [begin, end) spans as sorted, disjoint spans; empty ones are dropped. Spans already
// in order (one stream's tasks) are not copied to be sorted.
template <class T>
std::vector<std::pair<T, T>> merged_spans(const std::vector<std::pair<T, T>>& spans) {
  std::vector<std::pair<T, T>> sorted;
  const auto* v = &spans;
  if (!std::is_sorted(spans.begin(), spans.end())) {
    sorted = spans;
    std::sort(sorted.begin(), sorted.end());
    v = &sorted;
  }
  std::vector<std::pair<T, T>> out;
  for (const auto& s : *v) {
    if (s.second <= s.first) continue;
    if (!out.empty() && s.first <= out.back().second)
      out.back().second = std::max(out.back().second, s.second);
    else
      out.push_back(s);
  }
  return out;
}

}  // namespace trainsim
