#pragma once
// Max-min fair rates for transfers sharing links (progressive filling): every transfer's rate
// (its speed relative to running alone) rises together until a link is full or the transfer runs
// at full speed; transfers through a full link freeze; the rest continue. Private to sim/.
//
// The solver keeps its scratch space between calls: the engine solves once per change in the
// set of transfers, and a collective over hundreds of ranks crosses thousands of links.
#include <cstdint>
#include <span>
#include <vector>

#include "trainsim/sim/task_graph.hpp"

namespace trainsim::sim {

class MaxMinSolver {
 public:
  // rates[i] for flows[i]; each flow lists its link shares (capacity used when alone). The result
  // stays valid until the next call.
  const std::vector<double>& solve(std::span<const std::vector<LinkShare>* const> flows);

 private:
  // Numbers the links two or more flows cross (0, 1, ...) into flow_links_ / flow_shares_, flow by
  // flow from first_share_; returns how many.
  std::size_t number_shared_links(std::span<const std::vector<LinkShare>* const> flows);
  // The residual capacity, the demand and the flows (CSR) of each shared link.
  void index_link_members(std::size_t flows, std::size_t links);

  std::vector<std::uint64_t> stamp_;  // per link id: the round that last saw it
  std::vector<std::size_t> local_;    // per link id: flows on it, then its index among shared links
  std::uint64_t call_ = 0;
  std::vector<double> residual_;        // per local link: capacity left
  std::vector<double> demand_;          // per local link: shares of the flows still rising
  std::vector<std::uint32_t> offsets_;  // CSR of the flows on each local link
  std::vector<std::uint32_t> members_;
  std::vector<std::uint32_t> cursor_;
  std::vector<std::size_t> flow_links_;  // local link of each shared-link share, flow by flow
  std::vector<double> flow_shares_;
  std::vector<std::size_t> first_share_;  // per flow: its first entry in flow_links_
  std::vector<std::uint8_t> frozen_;
  std::vector<double> rates_;
};

}  // namespace trainsim::sim
