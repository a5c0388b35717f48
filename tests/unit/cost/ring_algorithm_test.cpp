#include <doctest/doctest.h>

#include "cost/common.hpp"

using namespace trainsim;
using namespace trainsim::cost;

namespace {
// Simple protocol only, no launch cost, no pipeline fill: the textbook α–β ring.
CollectiveTuning textbook() {
  CollectiveTuning t;
  t.launch = Duration::zero();
  t.max_fill_chunks = 1;
  t.ll.bandwidth_factor = 1e-9;
  t.ll128.bandwidth_factor = 1e-9;
  return t;
}
}  // namespace

TEST_CASE("ring all-reduce on 8 GPUs over NVLink matches the closed form") {
  test::CostFixture f(test::fat_tree_cluster(1, 40, true, 2), textbook());
  const double n = 8, S = 1 << 30, B = 300e9 * 0.79, alpha = 0.2e-6;
  const auto c = f.model.cost(AllReduce{gib(1)}, test::devices(0, 8), "ring");
  // 2(n−1)/n · S / B + 2(n−1)·α
  CHECK(c.time.seconds() == doctest::Approx(2 * (n - 1) / n * S / B + 2 * (n - 1) * alpha).epsilon(1e-9));
  CHECK(c.protocol == Protocol::Simple);
  CHECK(c.busbw_Bps == doctest::Approx(B).epsilon(1e-3));
}

TEST_CASE("ring reduce-scatter and all-gather take half an all-reduce: (n−1)/n · S / B + (n−1)·α") {
  test::CostFixture f(test::fat_tree_cluster(1, 40, true, 2), textbook());
  const double n = 8, S = 1 << 30, B = 300e9 * 0.79, alpha = 0.2e-6;
  for (const auto kind : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    const auto c = f.model.cost(make_collective(kind, gib(1)), test::devices(0, 8), "ring");
    CHECK(c.time.seconds() == doctest::Approx((n - 1) / n * S / B + (n - 1) * alpha).epsilon(1e-9));
  }
}

TEST_CASE("a pipelined broadcast costs S / B plus a latency per hop") {
  test::CostFixture f(test::fat_tree_cluster(1, 40, true, 2), textbook());
  const double S = 1 << 30, B = 300e9 * 0.79;
  const auto c = f.model.cost(Broadcast{gib(1)}, test::devices(0, 8), "ring");
  CHECK(c.time.seconds() == doctest::Approx(S / B + 7 * 0.2e-6).epsilon(1e-9));
  CHECK(c.busbw_Bps == doctest::Approx(c.algbw_Bps));
}

TEST_CASE("all-reduce costs about a reduce-scatter plus an all-gather for large sizes") {
  test::CostFixture f(test::fat_tree_cluster(4, 40, true, 2));
  for (const auto& g : {test::devices(0, 8), test::devices(0, 32), test::devices(0, 4, 8)}) {
    const auto ar = f.model.cost(AllReduce{gib(4)}, g).time.seconds();
    const auto rs = f.model.cost(ReduceScatter{gib(4)}, g).time.seconds();
    const auto ag = f.model.cost(AllGather{gib(4)}, g).time.seconds();
    CHECK(ar == doctest::Approx(rs + ag).epsilon(0.05));
  }
}

TEST_CASE("time never falls as the message grows") {
  test::CostFixture f(test::fat_tree_cluster(4, 40, true, 2));
  for (const auto kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
                          CollectiveKind::Broadcast, CollectiveKind::AllToAll}) {
    for (const auto& g : {test::devices(0, 8), test::devices(0, 32)}) {
      Duration last = Duration::zero();
      for (std::int64_t b = 1024; b <= (std::int64_t{8} << 30); b *= 2) {
        const auto t = f.model.cost(make_collective(kind, Bytes{b}), g).time;
        CHECK(t >= last);
        last = t;
      }
    }
  }
}

TEST_CASE("more bandwidth never makes a collective slower") {
  auto slow = test::fat_tree_cluster(4, 40, true, 2);
  auto fast = slow;
  fast.node.fabric.bandwidth = fast.node.fabric.bandwidth * 2;
  std::get<spec::LeafSpineNetwork>(fast.network).nic_bandwidth =
      std::get<spec::LeafSpineNetwork>(fast.network).nic_bandwidth * 1.5;
  test::CostFixture a(slow), b(fast);
  for (const auto& algo : {"ring", "tree", "hier", "direct"}) {
    for (const auto kind : {CollectiveKind::AllReduce, CollectiveKind::AllToAll}) {
      for (const auto& g : {test::devices(0, 8), test::devices(0, 32)}) {
        const auto* pa = a.model.plan(kind, a.model.intern(g), algo);
        if (!pa) continue;
        for (std::int64_t bytes = 1024; bytes <= (std::int64_t{1} << 33); bytes *= 16)
          CHECK(b.model.cost(make_collective(kind, Bytes{bytes}), g, algo).time <=
                a.model.cost(make_collective(kind, Bytes{bytes}), g, algo).time);
      }
    }
  }
}

TEST_CASE("an inter-node ring loads every NIC with one channel each way") {
  test::CostFixture f(test::fat_tree_cluster(2, 40, true, 2));
  const auto* plan = f.model.plan(CollectiveKind::AllReduce, f.model.intern(test::devices(0, 16)), "ring");
  REQUIRE(plan);
  const double expected = 2.0 * 15 / 16 / 8;  // 2(n−1)/n of the data, one of eight channels
  int nic_links = 0;
  for (const auto& l : plan->total_loads()) {
    const auto& link = f.topo.link(l.link);
    if (link.cls != topo::LinkClass::Network) continue;
    CHECK(l.bytes_per_byte == doctest::Approx(expected));
    ++nic_links;
  }
  CHECK(nic_links == 2 * 16);  // 16 NICs, up and down: same-rail hops never cross a spine
}

TEST_CASE("a ring that leaves the node pays the proxy's step latency on every hop inside a node") {
  // NCCL's ring latency across nodes: max(intraLat, netOverhead) per intra-node step (tuning.cc).
  // 16 ranks on 2 nodes: each channel's ring has 14 hops inside a node and 2 between them; an
  // all-gather's chunk travels 15 of the 16 hops.
  const double floor = 1e-3;  // far above any link's latency
  auto with = textbook();
  with.proxy_step_latency = Duration::from_seconds(floor);
  auto without = textbook();
  without.proxy_step_latency = Duration::zero();
  test::CostFixture a(test::fat_tree_cluster(2, 40, true, 2), with);
  test::CostFixture b(test::fat_tree_cluster(2, 40, true, 2), without);
  const auto g = test::devices(0, 16);
  const double hop = 0.2e-6;  // the node fabric's latency, GPU to GPU through the NVSwitch
  const double added = a.model.cost(AllGather{mib(64)}, g, "ring").time.seconds() -
                       b.model.cost(AllGather{mib(64)}, g, "ring").time.seconds();
  CHECK(added == doctest::Approx(14 * (floor - hop) * 15.0 / 16).epsilon(1e-6));
  // inside one node the ring never waits on a proxy
  const auto node = test::devices(0, 8);
  CHECK(a.model.cost(AllGather{mib(64)}, node, "ring").time == b.model.cost(AllGather{mib(64)}, node, "ring").time);
}

TEST_CASE("across nodes a ring's latency grows with its ranks, not its nodes") {
  // the default floor: 3 µs per intra-node step under Simple
  test::CostFixture f(test::fat_tree_cluster(64, 40, true, 2), textbook());
  const auto small = [&](std::uint32_t ranks) {
    return f.model.cost(AllGather{kib(64) * ranks}, test::devices(0, ranks), "ring").time.seconds();
  };
  // 256 more ranks on 32 more nodes: 224 more intra-node steps at 3 µs, 32 more network hops
  const double growth = small(512) - small(256);
  CHECK(growth > 224 * 3e-6);
  CHECK(growth < 224 * 3e-6 + 32 * 10e-6 + 256 * 64e3 / 25e9);
}
