#pragma once
// Rank placement: which device runs which rank, and which ranks form a process group. Ranks fill
// devices in order (rank r on device r, nodes filled one after the other); the strategy's order
// (Megatron: tp innermost, then cp, dp, pp) sets how rank coordinates map to rank numbers.
#include <span>
#include <utility>
#include <vector>

#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/topo/topology.hpp"

namespace trainsim::topo {

class Placement {
 public:
  // Dimensions innermost first with their sizes; a size-1 dimension may be left out.
  explicit Placement(std::vector<std::pair<spec::ParallelDim, int>> dims);
  // tp, cp, dp, pp in the strategy's order. With ep > 1 the data-parallel ranks are split into
  // (ep, dp/ep), ep where the order puts it or, when the order does not name it, just inside dp.
  static Placement from_strategy(const spec::StrategySpec& strategy, std::int64_t dp);

  int world_size() const { return world_; }
  int size(spec::ParallelDim dim) const;
  int coordinate(int rank, spec::ParallelDim dim) const;
  // How far apart in rank (and device) numbers two neighbours along `dim` are (1 without it).
  int stride(spec::ParallelDim dim) const;
  DeviceId device(int rank) const { return {static_cast<std::uint32_t>(rank)}; }

  // The devices of `rank`'s group along the given dimensions (all other coordinates fixed), in
  // rank order. group({Tp}, r) is r's tensor-parallel group; group({Dp, Ep}, r) its full
  // data-parallel group when ep is a separate dimension.
  std::vector<DeviceId> group(std::span<const spec::ParallelDim> dims, int rank) const;
  std::vector<DeviceId> group(spec::ParallelDim dim, int rank) const { return group({&dim, 1}, rank); }

 private:
  struct Dim {
    spec::ParallelDim dim;
    int size;
    int stride;
  };
  const Dim* find(spec::ParallelDim dim) const;
  std::vector<Dim> dims_;
  int world_ = 1;
};

// A sorted group's members domain by domain (a domain: `domain_devices` consecutive devices, a
// scale-up domain or a TPU slice): how many of them each domain it touches holds, in order.
std::vector<std::size_t> domain_runs(std::span<const DeviceId> sorted_group, std::uint32_t domain_devices);

// "0-7,16-23" -> devices 0..7 and 16..23; errors name `source`.
std::vector<DeviceId> parse_device_list(std::string_view text, std::int64_t num_devices, const std::string& source);

}  // namespace trainsim::topo
