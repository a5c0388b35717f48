#pragma once
// Seeded random numbers that are the same with every standard library: a 64-bit Mersenne twister
// (fully specified by the standard) with its own transforms, where std::*_distribution's
// algorithms are unspecified. What a seed gives must not depend on the compiler.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace trainsim {

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  // Uniform in (0, 1], from 53 random bits.
  double uniform() { return (static_cast<double>(engine_() >> 11) + 1) * 0x1p-53; }
  // Exponential of `rate`, by inversion.
  double exponential(double rate) { return -std::log(uniform()) / rate; }
  // Standard normal (Box-Muller).
  double normal() { return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * 3.141592653589793 * uniform()); }
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return engine_() % n; }

 private:
  std::mt19937_64 engine_;
};

// The value below which `share` of the values lie (nearest rank); `values` must not be empty.
inline double percentile(std::vector<double> values, double share) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(share * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

}  // namespace trainsim
