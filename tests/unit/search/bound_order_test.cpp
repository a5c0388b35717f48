// The sweep's lazy bound order against the plain one: every full bound computed, sorted.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "search/bound_order.hpp"

using namespace trainsim;

namespace {

// Candidates whose full bounds tie often (with each other and with cheap bounds), each cheap bound
// at most its full one, some equal to it.
struct Space {
  std::vector<double> cheap, full;
  std::vector<std::size_t> positions;
};

Space random_space(unsigned seed, std::size_t n) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(0, 20);
  std::uniform_int_distribution<int> slack(0, 3);
  Space s;
  for (std::size_t i = 0; i < n; ++i) {
    const double full = level(rng);
    s.full.push_back(full);
    s.cheap.push_back(full - slack(rng));      // equal in a quarter of them
    if (i % 3 != 1) s.positions.push_back(i);  // not every index is a candidate
  }
  std::shuffle(s.positions.begin(), s.positions.end(), rng);
  return s;
}

}  // namespace

TEST_CASE("the lazy bound order is the order of every full bound computed and sorted, ties by position") {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    for (const std::size_t batch : {1, 3, 16, 1000}) {
      CAPTURE(seed);
      CAPTURE(batch);
      const auto s = random_space(seed, 200);
      std::set<std::size_t> computed;
      search::BoundOrder order(
          s.positions, s.cheap,
          [&](std::span<const std::size_t> b) {
            std::vector<double> out;
            for (const auto p : b) {
              CHECK(computed.insert(p).second);  // each at most once
              out.push_back(s.full[p]);
            }
            return out;
          },
          batch);
      auto expected = s.positions;
      std::sort(expected.begin(), expected.end(),
                [&](std::size_t a, std::size_t b) { return std::tie(s.full[a], a) < std::tie(s.full[b], b); });
      std::vector<std::size_t> got;
      const double inf = std::numeric_limits<double>::infinity();
      while (const auto next = order.peek(inf)) {
        CHECK(next->second == s.full[next->first]);
        got.push_back(next->first);
        order.pop();
      }
      CHECK(got == expected);
      CHECK(order.size() == 0);
    }
  }
}

TEST_CASE("the lazy bound order stops at the limit and computes no full bound whose cheap one passes it") {
  const auto s = random_space(7, 300);
  const double limit = 10;
  std::size_t computed_beyond = 0;
  search::BoundOrder order(
      s.positions, s.cheap,
      [&](std::span<const std::size_t> b) {
        std::vector<double> out;
        for (const auto p : b) {
          computed_beyond += s.cheap[p] > limit ? 1 : 0;
          out.push_back(s.full[p]);
        }
        return out;
      },
      8);
  std::size_t taken = 0;
  while (const auto next = order.peek(limit)) {
    CHECK(next->second <= limit);
    order.pop();
    ++taken;
  }
  const auto within = std::count_if(s.positions.begin(), s.positions.end(), [&](auto p) { return s.full[p] <= limit; });
  CHECK(taken == static_cast<std::size_t>(within));
  CHECK(computed_beyond == 0);
  CHECK(order.size() == s.positions.size() - taken);
  // the candidates left are those the limit rules out: a higher limit takes them up again
  CHECK(order.peek(std::numeric_limits<double>::infinity()).has_value());
}
