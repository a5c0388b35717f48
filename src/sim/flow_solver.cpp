#include "sim/flow_solver.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace trainsim::sim {

std::vector<double> max_min_rates(std::span<const std::vector<LinkShare>* const> flows) {
  constexpr double kEps = 1e-12;
  const std::size_t n = flows.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  // links in id order; per link the flows that cross it and their shares
  std::map<std::uint32_t, std::size_t> link_index;
  for (const auto* f : flows)
    for (const auto& s : *f) link_index.try_emplace(s.link, 0);
  std::size_t next = 0;
  for (auto& [link, idx] : link_index) idx = next++;
  std::vector<double> capacity(link_index.size(), 1.0);
  std::vector<std::vector<std::pair<std::size_t, double>>> on_link(link_index.size());
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& s : *flows[i]) on_link[link_index.at(s.link)].emplace_back(i, s.share);

  std::size_t unfrozen = n;
  std::vector<double> demand(capacity.size());
  while (unfrozen > 0) {
    double step = std::numeric_limits<double>::infinity();
    for (std::size_t l = 0; l < on_link.size(); ++l) {
      demand[l] = 0;
      for (const auto& [i, share] : on_link[l])
        if (!frozen[i]) demand[l] += share;
      if (demand[l] > 0) step = std::min(step, capacity[l] / demand[l]);
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!frozen[i]) step = std::min(step, 1.0 - rate[i]);
    step = std::max(step, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      if (!frozen[i]) rate[i] += step;
    for (std::size_t l = 0; l < on_link.size(); ++l) capacity[l] -= step * demand[l];
    for (std::size_t i = 0; i < n; ++i) {
      if (!frozen[i] && rate[i] >= 1.0 - kEps) {
        rate[i] = std::min(rate[i], 1.0);
        frozen[i] = true;
        --unfrozen;
      }
    }
    for (std::size_t l = 0; l < on_link.size(); ++l) {
      if (demand[l] <= 0 || capacity[l] > kEps) continue;
      for (const auto& [i, share] : on_link[l]) {
        if (frozen[i]) continue;
        frozen[i] = true;
        --unfrozen;
      }
    }
  }
  return rate;
}

}  // namespace trainsim::sim
