#include "trainsim/util/units.hpp"

#include <cmath>

#include "trainsim/util/error.hpp"

namespace trainsim {
namespace {

constexpr std::int64_t kMaxPs = std::numeric_limits<std::int64_t>::max();

Duration saturating_ps(double ps) {
  if (!(ps > 0)) return Duration::zero();  // also NaN
  if (ps >= static_cast<double>(kMaxPs)) return Duration::max();
  return {static_cast<std::int64_t>(std::llround(ps))};
}

}  // namespace

Duration Duration::from_seconds(double seconds) {
  return saturating_ps(seconds * 1e12);
}

Duration operator+(Duration a, Duration b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a.ps, b.ps, &out)) return a.ps > 0 ? Duration::max() : Duration{-kMaxPs};
  return {out};
}

Duration operator-(Duration a, Duration b) {
  std::int64_t out = 0;
  if (__builtin_sub_overflow(a.ps, b.ps, &out)) return a.ps > 0 ? Duration::max() : Duration{-kMaxPs};
  return {out};
}

Duration operator*(Duration d, std::int64_t k) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(d.ps, k, &out)) return (d.ps > 0) == (k > 0) ? Duration::max() : Duration{-kMaxPs};
  return {out};
}

Bytes Bytes::from_double(double bytes) {
  SIM_ASSERT(std::isfinite(bytes) && std::fabs(bytes) < 9.2e18, "byte count {} is not representable", bytes);
  return {static_cast<std::int64_t>(std::llround(bytes))};
}

Bytes Bytes::saturating_from_double(double bytes) {
  if (!(bytes > 0)) return {0};
  if (bytes >= static_cast<double>(kSaturated)) return {kSaturated};
  return {static_cast<std::int64_t>(std::llround(bytes))};
}

Duration transfer_time(double bytes, Bandwidth bandwidth) {
  SIM_ASSERT(bandwidth.bytes_per_s > 0, "transfer over a link of zero bandwidth");
  return saturating_ps(bytes / bandwidth.bytes_per_s * 1e12);
}

Duration operator/(Bytes bytes, Bandwidth bandwidth) {
  return transfer_time(bytes.as_double(), bandwidth);
}

Duration compute_time(double flops, FlopRate rate) {
  SIM_ASSERT(rate.flop_per_s > 0, "compute at a zero FLOP rate");
  return saturating_ps(flops / rate.flop_per_s * 1e12);
}

}  // namespace trainsim
