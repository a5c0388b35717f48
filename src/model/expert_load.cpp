#include "trainsim/model/expert_load.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <numbers>
#include <random>
#include <tuple>
#include <vector>

#include <boost/math/special_functions/gamma.hpp>

#include "trainsim/util/error.hpp"

namespace trainsim::model {

namespace {

// ∫ f over [from, to] by Simpson's rule on `steps` (even) intervals.
template <class F>
double simpson(double from, double to, int steps, F f) {
  const double h = (to - from) / steps;
  double sum = 0;
  for (int i = 0; i <= steps; ++i) sum += f(from + i * h) * (i == 0 || i == steps ? 1 : i % 2 == 1 ? 4 : 2);
  return sum * h / 3;
}

// The value for `key`, computed once a process and shared by every thread (a sweep's ask for the same
// few): two threads may both compute a missing one, get the same value and keep the first.
template <class Key, class Compute>
double remembered(std::mutex& mutex, std::map<Key, double>& known, const Key& key, Compute compute) {
  {
    const std::scoped_lock lock(mutex);
    if (const auto it = known.find(key); it != known.end()) return it->second;
  }
  const double value = compute();
  const std::scoped_lock lock(mutex);
  return known.emplace(key, value).first->second;
}

// E[max of n independent standard normals] = ∫ x · n φ(x) Φ(x)^(n−1) dx (Simpson's rule over ±12).
double expected_max_normal(int n) {
  return simpson(-12.0, 12.0, 4800, [n](double x) {
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
    const double upper = 0.5 * std::erfc(x / std::numbers::sqrt2);  // 1 − Φ(x), exact in the tail
    return x * n * pdf * std::exp((n - 1) * std::log1p(-upper));
  });
}

// E[max of `ranks` independent Gamma(shape, scale) loads] over their mean, shape·scale, as
// ∫₀^∞ (1 − F(x)^ranks) dx. Beyond a shape of 1e5 (skewness under 0.6%) the gamma is normal:
// 1 + E[max of ranks normals]/√shape. From shape 1, Simpson's rule over x, counting the integrand as
// 1 below where every lower tail is under 1e-15 and stopping where each upper tail is under 1e-12.
// Below shape 1 the loads pile up near zero with a long tail: Simpson's rule over log x.
double integrate_busiest(double shape, double scale, int ranks) {
  if (shape > 1e5) return 1 + expected_max_normal(ranks) / std::sqrt(shape);
  const double top = scale * boost::math::gamma_q_inv(shape, 1e-12 / ranks);
  const double bottom = std::max(scale * boost::math::gamma_p_inv(shape, 1e-15 / ranks), 1e-300);
  const bool logarithmic = shape < 1;
  const double tail =
      simpson(logarithmic ? std::log(bottom) : bottom, logarithmic ? std::log(top) : top, 4000, [&](double v) {
        const double x = logarithmic ? std::exp(v) : v;
        const double cdf = boost::math::gamma_p(shape, x / scale);
        // 1 − F^ranks (times dx/dv over log x)
        return -std::expm1(ranks * std::log(cdf > 0 ? cdf : 1e-300)) * (logarithmic ? x : 1.0);
      });
  return (bottom + tail) / (shape * scale);
}

// How each balancing method leaves the experts, as a measured busiest rank (or expert: ep equal to
// the experts) and the expert-parallel degree it was measured at; each gives the experts' load
// cv that expected_busiest maps to it (docs/model.md "Expert load").
struct MeasuredBalance {
  double busiest;
  int ep;
  int experts;
};
// An auxiliary loss on each micro-batch: Wang et al. 2024 (arXiv 2408.15664) Table 2's
// auxiliary-loss baselines (coefficient 1e-3, 64 experts, top-6), the busiest expert 1.72 and 1.52
// times the mean over their validation set.
constexpr MeasuredBalance kAuxLoss1b{1.72, 64, 64};
constexpr MeasuredBalance kAuxLoss3b{1.52, 64, 64};
// The busiest EP rank per layer and micro-batch in training under Megatron-LM at EP 64 (UltraEP,
// Wei et al. 2026, arXiv 2606.04101, the training figure's "Avg Imbalance"; checkpoints pre-trained
// with each model's own balancing, trained on): a global-batch auxiliary loss, Qwen3-235B-A22B (128
// experts, 2 a rank) 2.86; auxiliary-loss-free bias, DeepSeek-V3 (256 experts, 4 a rank) 1.30 and
// GLM-4.5-Air (128 experts, 2 a rank) 2.23.
constexpr MeasuredBalance kQwen3_235b{2.86, 64, 128};
constexpr MeasuredBalance kDeepseekV3{1.30, 64, 256};
constexpr MeasuredBalance kGlm45Air{2.23, 64, 128};

// The cv whose expected busiest rank of `ep` ranks of experts/ep experts is `busiest` (bisection:
// the busiest rank grows with cv).
double cv_for(double busiest, int experts, int ep) {
  if (busiest - 1 < 1e-9 || ep == 1) return 0;
  double lo = 0;
  double hi = 1;
  // any busiest below ep (one rank taking every token) is reached at some cv
  while (expected_busiest(hi, experts / ep, ep) < busiest && hi < 1e4) hi *= 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (expected_busiest(mid, experts / ep, ep) < busiest ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}
double cv_of(const MeasuredBalance& m) {
  return cv_for(m.busiest, m.experts, m.ep);
}

// 53 uniform bits in (0, 1): the standard fixes mt19937_64's output, not its distributions'.
double draw_uniform(std::mt19937_64& g) {
  return (static_cast<double>(g() >> 11) + 0.5) * 0x1.0p-53;
}
// (each draw its own statement: the order of two in one expression is unspecified)
double draw_normal(std::mt19937_64& g) {
  const double radius = std::sqrt(-2 * std::log(draw_uniform(g)));
  return radius * std::cos(2 * std::numbers::pi * draw_uniform(g));
}
// Gamma(shape, 1) by Marsaglia and Tsang (2000); below shape 1, Gamma(shape + 1) · U^(1/shape).
double draw_gamma(std::mt19937_64& g, double shape) {
  if (shape < 1) {
    const double boosted = draw_gamma(g, shape + 1);
    return boosted * std::pow(draw_uniform(g), 1 / shape);
  }
  const double d = shape - 1.0 / 3;
  const double c = 1 / std::sqrt(9 * d);
  while (true) {
    const double x = draw_normal(g);
    const double v = std::pow(1 + c * x, 3);
    if (v > 0 && std::log(draw_uniform(g)) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double drawn_busiest_rank(const spec::MoeSpec& moe, int ep, int layers, double cv) {
  std::mt19937_64 g(*moe.load_seed);
  const int per_rank = moe.experts / ep;
  const double shape = 1 / (cv * cv);
  double sum_of_busiest = 0;
  for (int layer = 0; layer < layers; ++layer) {
    double total = 0;
    double busiest = 0;
    for (int rank = 0; rank < ep; ++rank) {
      double sum = 0;
      for (int i = 0; i < per_rank; ++i) sum += draw_gamma(g, shape);
      total += sum;
      busiest = std::max(busiest, sum);
    }
    sum_of_busiest += busiest * ep / total;
  }
  return sum_of_busiest / layers;
}

}  // namespace

double expected_busiest(double cv, int per_rank, int ranks) {
  SIM_ASSERT(per_rank >= 1 && ranks >= 1 && cv >= 0, "{} ranks of {} experts at cv {}", ranks, per_rank, cv);
  if (ranks == 1 || cv == 0) return 1.0;
  static std::mutex mutex;
  static std::map<std::tuple<double, int, int>, double> known;
  return remembered(mutex, known, std::tuple{cv, per_rank, ranks},
                    [&] { return integrate_busiest(per_rank / (cv * cv), cv * cv, ranks); });
}

double expert_load_cv(const spec::MoeSpec& moe) {
  if (moe.load_imbalance) {
    static std::mutex mutex;
    static std::map<std::pair<double, int>, double> known;
    return remembered(mutex, known, std::pair{*moe.load_imbalance, moe.experts},
                      [&] { return cv_for(*moe.load_imbalance, moe.experts, moe.experts); });
  }
  // once a process (thread-safe initialisation of function statics)
  static const double aux_loss = (cv_of(kAuxLoss1b) + cv_of(kAuxLoss3b)) / 2;
  static const double global_aux_loss = cv_of(kQwen3_235b);
  static const double aux_free = (cv_of(kDeepseekV3) + cv_of(kGlm45Air)) / 2;
  switch (moe.balancing) {
    case spec::Balancing::AuxLoss:
      return aux_loss;
    case spec::Balancing::GlobalAuxLoss:
      return global_aux_loss;
    case spec::Balancing::AuxFree:
      return aux_free;
    case spec::Balancing::Forced:
      return 0;
  }
  return 0;
}

double expert_load_imbalance(const spec::MoeSpec& moe) {
  if (moe.load_imbalance) return *moe.load_imbalance;
  // every token choosing the busiest expert is the most there is
  return std::min(expected_busiest(expert_load_cv(moe), 1, moe.experts), static_cast<double>(moe.experts) / moe.top_k);
}

double busiest_rank_load(const spec::MoeSpec& moe, int ep, int moe_layers) {
  if (moe.capacity_factor) return *moe.capacity_factor;
  SIM_ASSERT(ep >= 1 && moe.experts % ep == 0, "{} experts over {} ranks", moe.experts, ep);
  const double cv = expert_load_cv(moe);
  if (ep == 1 || cv == 0) return 1.0;
  const int per_rank = moe.experts / ep;
  double load = 0;
  if (moe.load_seed) {
    static std::mutex mutex;
    static std::map<std::tuple<std::uint64_t, double, int, int, int>, double> drawn;
    const int layers = std::max(moe_layers, 1);
    load = remembered(mutex, drawn, std::tuple{*moe.load_seed, cv, moe.experts, ep, layers},
                      [&] { return drawn_busiest_rank(moe, ep, layers, cv); });
  } else {
    load = expected_busiest(cv, per_rank, ep);
  }
  // a token's top_k experts are distinct: a rank receives at most min(its experts, top_k) copies of
  // each token, ep·min(experts/ep, top_k)/top_k times its balanced share
  const double most = static_cast<double>(ep) * std::min(per_rank, moe.top_k) / moe.top_k;
  return std::min(load, most);
}

}  // namespace trainsim::model
