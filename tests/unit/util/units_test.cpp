#include <doctest/doctest.h>

#include "trainsim/util/error.hpp"
#include "trainsim/util/units.hpp"

using namespace trainsim;

TEST_CASE("durations are integer picoseconds and round to the nearest") {
  CHECK(Duration::from_seconds(1.0).ps == 1'000'000'000'000);
  CHECK(Duration::from_seconds(2.5e-12).ps == 3);  // llround: half away from zero
  CHECK(microseconds(2).ps == 2'000'000);
  CHECK(Duration::from_seconds(1.5).seconds() == doctest::Approx(1.5));
}

TEST_CASE("a 100-day run fits in simulated time") {
  const Duration hundred_days = Duration::from_seconds(100.0 * 86400.0);
  CHECK(hundred_days < Duration::max());
  CHECK(hundred_days.seconds() == doctest::Approx(8.64e6));
}

TEST_CASE("duration arithmetic saturates instead of overflowing") {
  CHECK(Duration::max() + microseconds(1) == Duration::max());
  CHECK(Duration::max() * 2 == Duration::max());
  CHECK(Duration::from_seconds(1e300) == Duration::max());
  CHECK(Duration::from_seconds(-1.0) == Duration::zero());
  CHECK(Duration::from_seconds(std::numeric_limits<double>::quiet_NaN()) == Duration::zero());
}

TEST_CASE("bytes over bandwidth is a transfer time") {
  CHECK((gib(1) / Bandwidth{1073741824.0}).ps == 1'000'000'000'000);
  CHECK((Bytes{300'000'000'000} / gigabytes_per_s(300)).seconds() == doctest::Approx(1.0));
  CHECK(compute_time(312e12, teraflops(312)).seconds() == doctest::Approx(1.0));
}

TEST_CASE("a zero bandwidth is a bug, not a silent infinity") {
  CHECK_THROWS_AS(transfer_time(1.0, Bandwidth{0}), InternalError);
}

TEST_CASE("byte estimates saturate at 1 EiB so that sums stay representable") {
  CHECK(Bytes::saturating_from_double(1e30).count == Bytes::kSaturated);
  CHECK(Bytes::saturating_from_double(-5).count == 0);
  const Bytes s{Bytes::kSaturated};
  CHECK((s + s + s + s + s).count > 0);
}
