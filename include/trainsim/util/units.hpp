#pragma once
// Physical quantities as strong types. Simulated time is integer picoseconds (docs/architecture.md "Conventions"): an int64
// holds ±2^63 ps ≈ ±106 days, enough for a 100-day run. Sizes are integer bytes; rates and FLOP
// counts are doubles (they are products of model dimensions and routinely exceed 2^63).
#include <compare>
#include <cstdint>
#include <limits>

namespace trainsim {

struct Duration {
  std::int64_t ps = 0;

  static constexpr Duration max() { return {std::numeric_limits<std::int64_t>::max()}; }
  static constexpr Duration zero() { return {0}; }
  // Rounds to the nearest picosecond; negative or NaN input gives zero, overlarge input saturates.
  static Duration from_seconds(double seconds);
  double seconds() const { return static_cast<double>(ps) * 1e-12; }

  friend constexpr auto operator<=>(Duration, Duration) = default;
  friend Duration operator+(Duration a, Duration b);  // saturating
  friend Duration operator-(Duration a, Duration b);
  Duration& operator+=(Duration other) { return *this = *this + other; }
  Duration& operator-=(Duration other) { return *this = *this - other; }
  friend Duration operator*(Duration d, std::int64_t k);  // saturating
  friend Duration operator*(std::int64_t k, Duration d) { return d * k; }
};

constexpr Duration picoseconds(std::int64_t v) {
  return {v};
}
constexpr Duration nanoseconds(std::int64_t v) {
  return {v * 1000};
}
constexpr Duration microseconds(std::int64_t v) {
  return {v * 1000'000};
}

struct Bytes {
  std::int64_t count = 0;

  friend constexpr auto operator<=>(Bytes, Bytes) = default;
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return {a.count + b.count}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return {a.count - b.count}; }
  Bytes& operator+=(Bytes other) { return *this = *this + other; }
  Bytes& operator-=(Bytes other) { return *this = *this - other; }
  friend constexpr Bytes operator*(Bytes b, std::int64_t k) { return {b.count * k}; }
  friend constexpr Bytes operator*(std::int64_t k, Bytes b) { return {b.count * k}; }
  friend constexpr Bytes operator/(Bytes b, std::int64_t k) { return {b.count / k}; }
  double as_double() const { return static_cast<double>(count); }
  // Rounds a byte count computed in floating point; SIM_ASSERTs it is finite and representable.
  static Bytes from_double(double bytes);
  // Clamps to [0, kSaturated] instead: for estimates of absurd configurations, reported as such.
  static Bytes saturating_from_double(double bytes);
  static constexpr std::int64_t kSaturated = std::int64_t{1} << 60;  // 1 EiB; a sum of a few stays representable
};

constexpr Bytes kib(std::int64_t v) {
  return {v << 10};
}
constexpr Bytes mib(std::int64_t v) {
  return {v << 20};
}
constexpr Bytes gib(std::int64_t v) {
  return {v << 30};
}

struct Bandwidth {
  double bytes_per_s = 0;
  friend constexpr auto operator<=>(Bandwidth, Bandwidth) = default;
  friend constexpr Bandwidth operator*(Bandwidth b, double k) { return {b.bytes_per_s * k}; }
};

constexpr Bandwidth gigabytes_per_s(double v) {
  return {v * 1e9};
}

struct FlopRate {
  double flop_per_s = 0;
  friend constexpr auto operator<=>(FlopRate, FlopRate) = default;
  friend constexpr FlopRate operator*(FlopRate r, double k) { return {r.flop_per_s * k}; }
};

constexpr FlopRate teraflops(double v) {
  return {v * 1e12};
}

// bytes / bandwidth: time to move them at that rate
Duration operator/(Bytes bytes, Bandwidth bandwidth);
// floating-point operations / rate
Duration transfer_time(double bytes, Bandwidth bandwidth);
Duration compute_time(double flops, FlopRate rate);

}  // namespace trainsim
