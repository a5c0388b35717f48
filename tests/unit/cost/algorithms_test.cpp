#include <doctest/doctest.h>

#include "cost/common.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using namespace trainsim::cost;

TEST_CASE("auto picks NVLS for large single-node all-reduce on H100 and says so") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-h100-superpod")));
  const auto big = f.model.cost(AllReduce{gib(1)}, test::devices(0, 8));
  CHECK(big.algorithm == "nvls");
  const auto small = f.model.cost(AllReduce{kib(4)}, test::devices(0, 8));
  CHECK(small.algorithm == "ring");
  CHECK(small.protocol == Protocol::LL);
}

TEST_CASE("on two nodes the tree beats the NIC line rate, from three nodes on rings win for large sizes") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  const auto two = f.model.cost(AllReduce{gib(8)}, test::devices(0, 16));
  CHECK(two.algorithm == "tree");
  CHECK(two.busbw_Bps > 200e9);  // eight 25 GB/s NICs per node
  const auto four = f.model.cost(AllReduce{gib(8)}, test::devices(0, 32));
  CHECK(four.algorithm == "ring");
}

TEST_CASE("all-to-all cannot stripe one GPU's traffic over several NICs") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  // 16 GPUs on 2 nodes: each GPU sends 8/16 of its buffer to the other node through its own NIC
  const double S = 1 << 30;
  const auto c = f.model.cost(AllToAll{gib(1)}, test::devices(0, 16));
  const double nic = 25e9 * 0.96;
  CHECK(c.time.seconds() == doctest::Approx(41e-6 + 5e-6 + 0.5 * S / nic).epsilon(1e-3));
}

TEST_CASE("SHARP halves inter-node traffic against a ring when the network reduces") {
  auto cluster = spec::load_cluster_spec(test::topology("dgx-h100-superpod"));
  std::get<spec::LeafSpineNetwork>(cluster.network).in_network_reduction = true;
  test::CostFixture f(cluster);
  const auto g = test::devices(0, 64);
  const auto sharp = f.model.cost(AllReduce{gib(8)}, g, "sharp");
  const auto hier = f.model.cost(AllReduce{gib(8)}, g, "hier");
  CHECK(sharp.time < hier.time);
}

TEST_CASE("a torus all-reduce over a 16×16×16 pod beats a single ring of the same size") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("tpu-v4-pod")));
  const auto all = test::devices(0, 4096);
  const auto torus = f.model.cost(AllReduce{gib(1)}, all, "torus");
  const auto ring = f.model.cost(AllReduce{gib(1)}, all, "ring");
  CHECK(torus.time.seconds() * 2 < ring.time.seconds());
  CHECK(f.model.cost(AllReduce{gib(1)}, all).algorithm == "torus");
}

TEST_CASE("a torus ring along one dimension uses both directions") {
  test::CostFixture f(test::torus_cluster({8, 2}, true));
  const auto* plan = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(0, 8)), "torus");
  REQUIRE(plan);
  CHECK(plan->phases.size() == 2);  // reduce-scatter then all-gather along the one dimension
  // 2(n−1)/n · S over 2 directions of 50 GB/s at 0.9
  const double expected = 2.0 * 7 / 8 / 2 / (50e9 * 0.9);
  CHECK(plan->phases[0].seconds_per_byte + plan->phases[1].seconds_per_byte == doctest::Approx(expected));
}

TEST_CASE("a torus all-reduce over two dimensions keeps both dimensions' links busy at every step") {
  // 8 × 8, 50 GB/s per direction at 0.9: half the payload reduces along x then y, the other half
  // along y then x, each ring both ways. Reduce-scatter: (n−1)/n · (1 + 1/n) · S / (2 parts · 2
  // directions · B), twice for the all-reduce; twice as fast as one dimension after the other.
  test::CostFixture f(test::torus_cluster({8, 8}, true));
  const auto* plan = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(0, 64)), "torus");
  REQUIRE(plan);
  REQUIRE(plan->phases.size() == 4);
  double seconds_per_byte = 0;
  for (const auto& p : plan->phases) seconds_per_byte += p.seconds_per_byte;
  const double b = 50e9 * 0.9;
  CHECK(seconds_per_byte == doctest::Approx(2 * (7.0 / 8) * (1 + 1.0 / 8) / (2 * 2 * b)));
  // every link of the torus carries the same load in the first step (both dimensions at once)
  const auto& first = plan->phases.front().loads;
  CHECK(first.size() == 64 * 4);
  for (const auto& l : first) CHECK(l.bytes_per_byte == doctest::Approx(first.front().bytes_per_byte));
}

TEST_CASE("a box of the torus: a run of a dimension closes its ring back along the line") {
  // 16 chips of an 8 x 8 torus: all of x, y in {0, 1}. Half the payload along x then y, half along
  // y then x. Step 1: x rings (7/8 of a half, both ways: 7/32 per link direction) and the y run of 2,
  // whose two rings share its one link each way (1/2 of a half: 1/4); step 2: the x part, now 1/16,
  // along y (1/32), the y part, now 1/4, along x (7/64). Reduce-scatter: 1/4 + 7/64 of S / B.
  test::CostFixture f(test::torus_cluster({8, 8}, true));
  const auto* plan = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(0, 16)), "torus");
  REQUIRE(plan);
  REQUIRE(plan->phases.size() == 4);
  double seconds_per_byte = 0;
  for (const auto& p : plan->phases) seconds_per_byte += p.seconds_per_byte;
  CHECK(seconds_per_byte == doctest::Approx(2 * (0.25 + 7.0 / 64) / (50e9 * 0.9)));
  CHECK(f.model.cost(AllReduce{gib(1)}, test::devices(0, 16)).algorithm == "torus");
  // a run along a mesh without wraparound: the same line rings
  test::CostFixture mesh(test::torus_cluster({4}, false));
  const auto* line = mesh.model.plan(CollectiveKind::AllReduce, mesh.model.intern(test::devices(0, 4)), "torus");
  REQUIRE(line);
  // 4 chips on a line: each link direction carries the forward ring's hop and the backward ring's
  // closing hop, 3/4 of a half each: one direction's bandwidth for (n-1)/n of the payload
  CHECK(line->phases[0].seconds_per_byte == doctest::Approx(0.75 / (50e9 * 0.9)));
  // not a box: chips 0, 1 and 9 of the 8 x 8 torus
  auto corner = test::devices(0, 2);
  corner.devices.push_back({9});
  CHECK(f.model.plan(CollectiveKind::AllReduce, f.model.intern(corner), "torus") == nullptr);
}

TEST_CASE("across slices: reduce-scatter over ICI, the shards all-reduced over the DCN, all-gather over ICI") {
  // 2 slices of 4 x 4; hosts of 4 chips with 2 x 100 Gb/s at 0.9: 22.5 GB/s a host
  test::CostFixture f(test::multislice_cluster({4, 4}, 2));
  const auto* plan = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(0, 32)), "torus");
  REQUIRE(plan);
  REQUIRE(plan->phases.size() == 5);  // two ICI steps, the DCN, two ICI steps
  const double ici = 2 * (3.0 / 4) * (1 + 1.0 / 4) / (2 * 2 * 50e9 * 0.9);
  // each chip's 1/16 shard all-reduced by a ring of 2: 2(2-1)/2/16 of the payload out of each chip
  // at its quarter of its host's NICs (four chips to a host)
  const double dcn = 4 * (1.0 / 16) / 22.5e9;
  CHECK(plan->phases[2].seconds_per_byte == doctest::Approx(dcn));
  double total = 0;
  for (const auto& p : plan->phases) total += p.seconds_per_byte;
  CHECK(total == doctest::Approx(ici + dcn));
  // HSDP's replica group (one chip of each slice): the DCN ring alone, a whole payload each way at
  // the chip's share of its host's NICs
  const auto* replicas = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(3, 2, 16)), "torus");
  REQUIRE(replicas);
  REQUIRE(replicas->phases.size() == 1);
  CHECK(replicas->phases[0].seconds_per_byte == doctest::Approx(4 / 22.5e9));
  // reduce-scatter and all-gather: the halves, the DCN after and before the ICI
  const auto* rs = f.model.plan(CollectiveKind::ReduceScatter, f.model.intern(test::devices(0, 32)), "torus");
  const auto* ag = f.model.plan(CollectiveKind::AllGather, f.model.intern(test::devices(0, 32)), "torus");
  REQUIRE(rs);
  REQUIRE(ag);
  CHECK(rs->phases.back().seconds_per_byte == doctest::Approx(dcn / 2));
  CHECK(ag->phases.front().seconds_per_byte == doctest::Approx(dcn / 2));
  // the same 32 chips as one 4 x 8 slice all-reduce faster: the DCN is the slower network
  test::CostFixture one(test::torus_cluster({4, 8}, true));
  CHECK(one.model.cost(AllReduce{gib(1)}, test::devices(0, 32)).time <
        f.model.cost(AllReduce{gib(1)}, test::devices(0, 32)).time);
  // groups that hold different chips of each slice are not laid out as torus rings
  auto uneven = test::devices(0, 16);
  uneven.devices.push_back({16});
  CHECK(f.model.plan(CollectiveKind::AllReduce, f.model.intern(uneven), "torus") == nullptr);
}

TEST_CASE("a tree's network step costs what NCCL's tuning model gives it") {
  // NCCL src/graph/tuning.cc hwLat[NET][TREE]: 5.0 us (LL), 8.5 (LL128), 14 (Simple) per network
  // step. From 2 nodes to 4 a double binary tree grows one level: two more network steps, up and
  // down, with the same chains inside the nodes.
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-h100-superpod")));
  const auto two = f.model.cost(AllReduce{kib(1)}, test::devices(0, 16), "tree");
  const auto four = f.model.cost(AllReduce{kib(1)}, test::devices(0, 32), "tree");
  REQUIRE(two.protocol == Protocol::LL);
  REQUIRE(four.protocol == Protocol::LL);
  // 2 steps × 5.0 us, within the switch hops' few hundred nanoseconds the two layouts differ by
  CHECK((four.time - two.time).seconds() / 2 == doctest::Approx(5.0e-6).epsilon(0.1));
}

TEST_CASE("auto never picks an algorithm NCCL does not run by itself; naming it still prices it") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-h100-superpod")));
  for (const auto bytes : {kib(64), mib(1), mib(8), mib(64), gib(1)}) {
    CAPTURE(bytes.count);
    CHECK(f.model.cost(AllReduce{bytes}, test::devices(0, 16)).algorithm != "hier");
    CHECK(f.model.cost(AllReduce{bytes}, test::devices(0, 16), "hier").algorithm == "hier");
  }
}

TEST_CASE("hierarchical all-reduce puts 1/ppn of the data on each rail") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  const auto* plan = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(0, 32)), "hier");
  REQUIRE(plan);
  REQUIRE(plan->phases.size() == 3);
  for (const auto& l : plan->phases[1].loads)
    if (f.topo.link(l.link).cls == topo::LinkClass::Network)
      CHECK(l.bytes_per_byte == doctest::Approx(2.0 * 3 / 4 / 8));
}

TEST_CASE("algorithm names are checked and each algorithm says when it cannot run") {
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  CHECK_THROWS_WITH_AS(f.model.cost(AllReduce{gib(1)}, test::devices(0, 8), "rign"),
                       "--algo: unknown algorithm \"rign\"; expected one of: auto, ring, tree, hier, nvls, sharp, "
                       "torus, direct",
                       SpecError);
  CHECK_THROWS_WITH_AS(f.model.cost(AllReduce{gib(1)}, test::devices(0, 8), "nvls"),
                       "--algo: algorithm \"nvls\" cannot run all_reduce on this group of 8 devices", SpecError);
}

TEST_CASE("a group of one costs nothing") {
  test::CostFixture f(test::fat_tree_cluster(1, 40, true, 2));
  CHECK(f.model.cost(AllReduce{gib(1)}, test::devices(3, 1)).time == Duration::zero());
}

TEST_CASE("a fitted collective replaces the model for its operation and group size only") {
  CollectiveTuning tuning;
  tuning.fits.push_back({"all_reduce", 8, microseconds(30), Bandwidth{100e9}});
  test::CostFixture fitted(spec::load_cluster_spec(test::topology("dgx-a100-superpod")), tuning);
  test::CostFixture modelled(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  const auto c = fitted.model.cost(AllReduce{mib(64)}, test::devices(0, 8));
  CHECK(c.algorithm == "fitted");
  CHECK(c.time.seconds() == doctest::Approx(30e-6 + 64.0 * (1 << 20) / 100e9).epsilon(1e-9));
  CHECK(c.busbw_Bps == doctest::Approx(64.0 * (1 << 20) / c.time.seconds() * 2 * 7 / 8).epsilon(1e-9));
  // another size of group, another operation, or a named algorithm: the model
  CHECK(fitted.model.cost(AllReduce{mib(64)}, test::devices(0, 4)).time ==
        modelled.model.cost(AllReduce{mib(64)}, test::devices(0, 4)).time);
  CHECK(fitted.model.cost(AllGather{mib(64)}, test::devices(0, 8)).time ==
        modelled.model.cost(AllGather{mib(64)}, test::devices(0, 8)).time);
  CHECK(fitted.model.cost(AllReduce{mib(64)}, test::devices(0, 8), "ring").algorithm == "ring");
}

TEST_CASE("a fitted collective warns only when used outside the sizes it was measured on") {
  CollectiveTuning tuning;
  tuning.fits.push_back({.op = "all_reduce",
                         .group_size = 8,
                         .latency = microseconds(30),
                         .bandwidth = Bandwidth{100e9},
                         .min_bytes = mib(1),
                         .max_bytes = mib(64)});
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-a100-superpod")), tuning);
  f.model.cost(AllReduce{mib(16)}, test::devices(0, 8));
  CHECK(f.model.warnings().empty());
  f.model.cost(AllReduce{gib(1)}, test::devices(0, 8));
  f.model.cost(AllReduce{gib(2)}, test::devices(0, 8));
  CHECK(f.model.warnings().size() == 1);  // once per fit
}
