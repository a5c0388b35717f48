#include "sim/flow_solver.hpp"

#include <algorithm>
#include <limits>

namespace trainsim::sim {

std::size_t MaxMinSolver::number_shared_links(std::span<const std::vector<LinkShare>* const> flows) {
  const std::size_t n = flows.size();
  ++call_;
  // A link that only one flow crosses never limits it below full speed (each load's shares are at
  // most 1: its bottleneck alone gives full speed), so only shared links enter the problem. Count
  // the flows per link first; `local_` holds the count until the shared links are numbered.
  for (const auto* f : flows) {
    for (const auto& s : *f) {
      if (s.link >= stamp_.size()) {
        stamp_.resize(s.link + 1, 0);
        local_.resize(s.link + 1, 0);
      }
      if (stamp_[s.link] != call_) {
        stamp_[s.link] = call_;
        local_[s.link] = 0;
      }
      ++local_[s.link];
    }
  }
  ++call_;
  std::size_t links = 0;
  flow_links_.clear();
  flow_shares_.clear();
  first_share_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& s : *flows[i]) {
      if (stamp_[s.link] == call_ - 1) {  // first visit this round: shared or not
        const bool shared = local_[s.link] >= 2;
        stamp_[s.link] = shared ? call_ : call_ + 1;
        if (shared) local_[s.link] = links++;
      }
      if (stamp_[s.link] == call_) {
        flow_links_.push_back(local_[s.link]);
        flow_shares_.push_back(s.share);
      }
    }
    first_share_[i + 1] = flow_links_.size();
  }
  ++call_;  // past the exclusive links' mark, so that the next call starts afresh
  return links;
}

void MaxMinSolver::index_link_members(std::size_t flows, std::size_t links) {
  residual_.assign(links, 1.0);
  demand_.assign(links, 0.0);
  offsets_.assign(links + 1, 0);
  for (std::size_t k = 0; k < flow_links_.size(); ++k) {
    demand_[flow_links_[k]] += flow_shares_[k];
    ++offsets_[flow_links_[k] + 1];
  }
  for (std::size_t l = 0; l < links; ++l) offsets_[l + 1] += offsets_[l];
  members_.resize(flow_links_.size());
  cursor_.assign(offsets_.begin(), offsets_.end() - 1);
  for (std::size_t i = 0; i < flows; ++i)
    for (std::size_t k = first_share_[i]; k < first_share_[i + 1]; ++k)
      members_[cursor_[flow_links_[k]]++] = static_cast<std::uint32_t>(i);
}

const std::vector<double>& MaxMinSolver::solve(std::span<const std::vector<LinkShare>* const> flows) {
  constexpr double kEps = 1e-12;
  const std::size_t n = flows.size();
  const std::size_t links = number_shared_links(flows);
  index_link_members(n, links);

  // Every flow still rising runs at the common `level`; it freezes there when one of its links fills.
  rates_.assign(n, 0.0);
  frozen_.assign(n, 0);
  const auto freeze = [&](std::size_t i, double rate) {
    frozen_[i] = 1;
    rates_[i] = rate;
    for (std::size_t k = first_share_[i]; k < first_share_[i + 1]; ++k) demand_[flow_links_[k]] -= flow_shares_[k];
  };
  std::size_t rising = n;
  double level = 0;
  while (rising > 0) {
    double step = 1.0 - level;
    for (std::size_t l = 0; l < links; ++l)
      if (demand_[l] > kEps) step = std::min(step, residual_[l] / demand_[l]);
    step = std::max(step, 0.0);
    level += step;
    for (std::size_t l = 0; l < links; ++l)
      if (demand_[l] > kEps) residual_[l] -= step * demand_[l];
    if (level >= 1.0 - kEps) {
      for (std::size_t i = 0; i < n; ++i)
        if (!frozen_[i]) rates_[i] = 1.0;
      break;
    }
    for (std::size_t l = 0; l < links; ++l) {
      if (demand_[l] <= kEps || residual_[l] > kEps) continue;
      for (std::uint32_t m = offsets_[l]; m < offsets_[l + 1]; ++m) {
        const auto i = members_[m];
        if (frozen_[i]) continue;
        freeze(i, level);
        --rising;
      }
    }
  }
  return rates_;
}

}  // namespace trainsim::sim
