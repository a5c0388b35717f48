#include <doctest/doctest.h>

#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/topo/placement.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using namespace trainsim::topo;
using spec::ParallelDim;

namespace {
std::vector<std::uint32_t> ids(const std::vector<DeviceId>& devices) {
  std::vector<std::uint32_t> out;
  for (const auto d : devices) out.push_back(d.value);
  return out;
}
}  // namespace

TEST_CASE("Megatron order puts tp innermost, then cp, dp, pp") {
  spec::StrategySpec s;
  s.tp = 8;
  s.pp = 2;
  const auto p = Placement::from_strategy(s, 4);
  CHECK(p.world_size() == 64);
  CHECK(ids(p.group(ParallelDim::Tp, 0)) == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(ids(p.group(ParallelDim::Dp, 0)) == std::vector<std::uint32_t>{0, 8, 16, 24});
  CHECK(ids(p.group(ParallelDim::Pp, 3)) == std::vector<std::uint32_t>{3, 35});
  CHECK(ids(p.group(ParallelDim::Dp, 42)) == std::vector<std::uint32_t>{34, 42, 50, 58});
  CHECK(p.coordinate(42, ParallelDim::Pp) == 1);
  CHECK(p.coordinate(42, ParallelDim::Dp) == 1);
  CHECK(p.coordinate(42, ParallelDim::Tp) == 2);
}

TEST_CASE("another order moves the groups") {
  spec::StrategySpec s;
  s.tp = 2;
  s.cp = 2;
  s.order = {ParallelDim::Tp, ParallelDim::Dp, ParallelDim::Cp, ParallelDim::Pp};
  const auto p = Placement::from_strategy(s, 2);
  CHECK(ids(p.group(ParallelDim::Dp, 0)) == std::vector<std::uint32_t>{0, 2});
  CHECK(ids(p.group(ParallelDim::Cp, 0)) == std::vector<std::uint32_t>{0, 4});
  const ParallelDim both[] = {ParallelDim::Tp, ParallelDim::Cp};
  CHECK(ids(p.group(both, 0)) == std::vector<std::uint32_t>{0, 1, 4, 5});
}

TEST_CASE("an ep dimension splits the data-parallel ranks") {
  spec::StrategySpec s;
  s.tp = 2;
  s.ep = 4;
  s.order = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp, ParallelDim::Pp};
  const auto p = Placement::from_strategy(s, 8);
  CHECK(p.world_size() == 16);
  CHECK(ids(p.group(ParallelDim::Ep, 0)) == std::vector<std::uint32_t>{0, 2, 4, 6});
  const ParallelDim data[] = {ParallelDim::Ep, ParallelDim::Dp};
  CHECK(p.group(data, 0).size() == 8);
}

TEST_CASE("explicit device lists") {
  CHECK(ids(parse_device_list("0-3,16-17", 32, "g")) == std::vector<std::uint32_t>{0, 1, 2, 3, 16, 17});
  CHECK_THROWS_WITH_AS(parse_device_list("0-40", 32, "--group"), "--group: \"40\" is not a device index in [0, 31]",
                       SpecError);
  CHECK_THROWS_WITH_AS(parse_device_list("5-2", 32, "--group"), "--group: range \"5-2\" runs backwards", SpecError);
  CHECK_THROWS_WITH_AS(parse_device_list("1,1", 32, "--group"), "--group: a device appears twice in the group",
                       SpecError);
  CHECK_THROWS_WITH_AS(parse_device_list("a", 32, "--group"), "--group: \"a\" is not a device index in [0, 31]",
                       SpecError);
}

TEST_CASE("a sorted group's members domain by domain") {
  const auto d = [](std::uint32_t v) { return trainsim::topo::DeviceId{v}; };
  const std::vector<trainsim::topo::DeviceId> group{d(0), d(1), d(2), d(8), d(9), d(23)};
  CHECK(trainsim::topo::domain_runs(group, 8) == std::vector<std::size_t>{3, 2, 1});
  CHECK(trainsim::topo::domain_runs(group, 72) == std::vector<std::size_t>{6});
  CHECK(trainsim::topo::domain_runs({}, 8).empty());
}
