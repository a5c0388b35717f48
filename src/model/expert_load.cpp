#include "trainsim/model/expert_load.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <random>
#include <vector>

#include "trainsim/util/error.hpp"

namespace trainsim::model {

namespace {

double integrate_expected_max(int n) {
  // E[max] = ∫ x · n φ(x) Φ(x)^(n-1) dx, Simpson's rule over ±12 standard deviations
  constexpr int kSteps = 4800;
  constexpr double kLo = -12.0;
  constexpr double kHi = 12.0;
  const double h = (kHi - kLo) / kSteps;
  double sum = 0;
  for (int i = 0; i <= kSteps; ++i) {
    const double x = kLo + i * h;
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
    const double upper = 0.5 * std::erfc(x / std::numbers::sqrt2);  // 1 - Φ(x), exact in the tail
    const double f = x * n * pdf * std::exp((n - 1) * std::log1p(-upper));
    sum += f * (i == 0 || i == kSteps ? 1 : i % 2 == 1 ? 4 : 2);
  }
  return sum * h / 3;
}

// How evenly each balancing method leaves the experts, as a measured busiest expert or rank and the
// expert-parallel degree it was measured at (1: over all the experts). Each gives the experts'
// coefficient of variation through the form busiest_rank_load inverts:
// cv = (busiest - 1) · √(experts/ep) / E[max of ep] (docs/model.md "Expert load").
struct MeasuredBalance {
  double busiest;
  int ep;
  int experts;
};
double cv_of(const MeasuredBalance& m) {
  return (m.busiest - 1) * std::sqrt(static_cast<double>(m.experts) / m.ep) / expected_max_normal(m.ep);
}
double mean_cv(const MeasuredBalance& a, const MeasuredBalance& b) {
  return (cv_of(a) + cv_of(b)) / 2;
}
// An auxiliary loss on each micro-batch, which balances the micro-batch it is computed on: Wang et
// al. 2024 (arXiv 2408.15664) Table 2's auxiliary-loss baselines (coefficient 1e-3, 64 experts,
// top-6), the busiest expert 1.72 and 1.52 times the mean over their validation set: cv 0.31, 0.22.
constexpr MeasuredBalance kAuxLoss1b{1.72, 64, 64};
constexpr MeasuredBalance kAuxLoss3b{1.52, 64, 64};
// The busiest EP rank per layer and micro-batch in training under Megatron-LM at EP 64 (UltraEP, Wei
// et al. 2026, arXiv 2606.04101, its training figure's "Avg Imbalance"; checkpoints pre-trained with
// each model's own balancing, trained on): a global-batch auxiliary loss, Qwen3-235B-A22B (128
// experts, 2 a rank) 2.86, cv 1.12; auxiliary-loss-free bias, DeepSeek-V3 (256 experts, 4 a rank)
// 1.30 and GLM-4.5-Air (128 experts, 2 a rank) 2.23, cv 0.26 and 0.74.
constexpr MeasuredBalance kQwen3_235b{2.86, 64, 128};
constexpr MeasuredBalance kDeepseekV3{1.30, 64, 256};
constexpr MeasuredBalance kGlm45Air{2.23, 64, 128};

// 64 uniform bits to (0, 1): the standard fixes mt19937_64's output, not its distributions'.
double uniform(std::mt19937_64& g) {
  return (static_cast<double>(g() >> 11) + 0.5) * 0x1.0p-53;
}

double drawn_busiest_rank(const spec::MoeSpec& moe, int ep, int layers, double cv) {
  std::mt19937_64 g(*moe.load_seed);
  const int per_rank = moe.experts / ep;
  std::vector<double> load(static_cast<std::size_t>(moe.experts));
  double sum_of_busiest = 0;
  for (int layer = 0; layer < layers; ++layer) {
    for (std::size_t e = 0; e < load.size(); e += 2) {  // Box-Muller: two normals per pair of uniforms
      const double r = std::sqrt(-2 * std::log(uniform(g)));
      const double a = 2 * std::numbers::pi * uniform(g);
      load[e] = std::max(0.0, 1 + cv * r * std::cos(a));
      if (e + 1 < load.size()) load[e + 1] = std::max(0.0, 1 + cv * r * std::sin(a));
    }
    double total = 0;
    double busiest = 0;
    for (int rank = 0; rank < ep; ++rank) {
      double sum = 0;
      for (int i = 0; i < per_rank; ++i) sum += load[static_cast<std::size_t>(rank * per_rank + i)];
      total += sum;
      busiest = std::max(busiest, sum);
    }
    sum_of_busiest += total > 0 ? busiest * ep / total : 1.0;
  }
  return sum_of_busiest / layers;
}

}  // namespace

double expected_max_normal(int n) {
  SIM_ASSERT(n >= 1, "the maximum of {} draws", n);
  if (n == 1) return 0;
  static std::mutex mutex;
  static std::map<int, double> known;
  const std::scoped_lock lock(mutex);
  auto it = known.find(n);
  if (it == known.end()) it = known.emplace(n, integrate_expected_max(n)).first;
  return it->second;
}

double expert_load_cv(const spec::MoeSpec& moe) {
  if (moe.load_imbalance) return (*moe.load_imbalance - 1) / std::max(expected_max_normal(moe.experts), 1e-9);
  switch (moe.balancing) {
    case spec::Balancing::AuxLoss:
      return mean_cv(kAuxLoss1b, kAuxLoss3b);
    case spec::Balancing::GlobalAuxLoss:
      return cv_of(kQwen3_235b);
    case spec::Balancing::AuxFree:
      return mean_cv(kDeepseekV3, kGlm45Air);
    case spec::Balancing::Forced:
      return 0;
  }
  return 0;
}

double expert_load_imbalance(const spec::MoeSpec& moe) {
  return moe.load_imbalance.value_or(1 + expert_load_cv(moe) * expected_max_normal(moe.experts));
}

double busiest_rank_load(const spec::MoeSpec& moe, int ep, int moe_layers) {
  if (moe.capacity_factor) return *moe.capacity_factor;
  SIM_ASSERT(ep >= 1 && moe.experts % ep == 0, "{} experts over {} ranks", moe.experts, ep);
  const double cv = expert_load_cv(moe);
  if (ep == 1 || cv == 0) return 1.0;
  if (moe.load_seed) return drawn_busiest_rank(moe, ep, std::max(moe_layers, 1), cv);
  return 1 + cv / std::sqrt(moe.experts / ep) * expected_max_normal(ep);
}

}  // namespace trainsim::model
