// The engine's event queue against a stable sort: events come out earliest first and, at equal
// times, in the order they went in, however pushes and pops interleave.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sim/event_queue.hpp"

using namespace trainsim;
using namespace trainsim::sim;

TEST_CASE("the event queue pops by time, then by push order, as a stable sort would") {
  std::mt19937_64 rng(7);
  EventQueue q;
  // the reference: pending events with their push number, the earliest (time, number) popped
  struct Pending {
    std::int64_t time;
    std::uint32_t number;
  };
  std::vector<Pending> pending;
  std::uint32_t pushed = 0;
  std::int64_t now = 0;
  for (int step = 0; step < 20000; ++step) {
    // pushes never go before the last popped time (the engine's clock); few distinct times, so
    // that ties are common
    if (pending.empty() || rng() % 3 != 0) {
      const std::int64_t at = now + static_cast<std::int64_t>(rng() % 8);
      q.push({Duration{at}, pushed, pushed * 3, pushed % 2 == 0 ? EventKind::Finish : EventKind::LatencyDone});
      pending.push_back({at, pushed++});
      continue;
    }
    const auto first = std::min_element(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
      return a.time < b.time || (a.time == b.time && a.number < b.number);
    });
    REQUIRE(q.top_time() == Duration{first->time});
    const Event e = q.top();
    q.pop();
    CHECK(e.task == first->number);
    CHECK(e.version == first->number * 3);
    CHECK(e.kind == (first->number % 2 == 0 ? EventKind::Finish : EventKind::LatencyDone));
    now = first->time;
    pending.erase(first);
    REQUIRE(q.size() == pending.size());
  }
}
