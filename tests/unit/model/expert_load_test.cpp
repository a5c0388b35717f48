#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/paths.hpp"
#include "trainsim/model/expert_load.hpp"

using namespace trainsim;
using namespace trainsim::model;

namespace {
// a relative tolerance (doctest's Approx alone scales by 1 + the larger magnitude)
doctest::Approx near(double value, double relative) {
  return doctest::Approx(value).epsilon(relative).scale(0);
}
spec::MoeSpec experts(int n, int top_k, double busiest) {
  return spec::MoeSpec{.experts = n, .top_k = top_k, .expert_ffn_hidden = 512, .load_imbalance = busiest};
}
}  // namespace

TEST_CASE("the busiest of gamma loads: closed forms of exponential and Erlang maxima") {
  CHECK(expected_busiest(0.7, 4, 1) == 1.0);  // one rank waits for nobody
  CHECK(expected_busiest(0.0, 4, 16) == 1.0);
  // cv 1, one expert a rank: exponential loads, E[max of m] = H(m), the m-th harmonic number
  for (const auto& c : {std::pair{2, 1.5}, std::pair{4, 25.0 / 12}, std::pair{10, 7381.0 / 2520}}) {
    CAPTURE(c.first);
    CHECK(expected_busiest(1.0, 1, c.first) == near(c.second, 1e-6));
  }
  // cv 1, two experts a rank: Erlang-2 loads of mean 2; E[min of two] = ∫(1 + x)² e^(−2x) dx = 1.25,
  // so E[max] = 4 − 1.25 and over the mean 1.375
  CHECK(expected_busiest(1.0, 2, 2) == near(1.375, 1e-6));
  // and by the same expansion of 1 − F^m: Erlang-4 of two ranks 163/128, Erlang-2 of four 12259/6912
  CHECK(expected_busiest(1.0, 4, 2) == near(163.0 / 128, 1e-6));
  CHECK(expected_busiest(1.0, 2, 4) == near(12259.0 / 6912, 1e-6));
  // small cv: nearly normal, 1 + cv/√n · E[max of m normals] (Harter 1961: 1.53875 for m = 10)
  CHECK(expected_busiest(0.05, 4, 10) == near(1 + 0.05 / 2 * 1.53875, 2e-3));
  // loads piling up at zero (shape 1/cv² far below 1): adaptive quadrature of the same integral
  // (mpmath, by the reviewer of dbee42a) gives 1.963, 1.99 and 3.88, never above the rank count
  CHECK(expected_busiest(6.0, 1, 2) == near(1.963, 2e-3));
  CHECK(expected_busiest(16.0, 1, 2) == near(1.99, 5e-3));
  CHECK(expected_busiest(16.0, 1, 2) <= 2.0);
  CHECK(expected_busiest(8.0, 1, 4) == near(3.88, 5e-3));
  // a load just above even: no overflow of the incomplete gamma at shapes of 1e11
  auto nearly_even = experts(256, 8, 1.00001);
  CHECK(busiest_rank_load(nearly_even, 2, 10) == near(1.0, 1e-5));
  CHECK(busiest_rank_load(nearly_even, 256, 10) == near(1.00001, 1e-6));
  // and where the shape is in the tens of thousands (128 experts a rank): 1 + cv/√128 · 1/√π
  CHECK(expected_busiest(0.05, 128, 2) == near(1 + 0.05 / std::sqrt(128.0) / std::sqrt(3.14159265358979), 1e-4));
}

TEST_CASE("the busiest expert-parallel rank: capacity, forced balance, one rank, the physical limit") {
  auto capped = experts(100, 2, 1.8);
  capped.load_imbalance.reset();
  capped.capacity_factor = 1.25;
  CHECK(busiest_rank_load(capped, 10, 10) == 1.25);  // padded to capacity whatever the routing
  auto forced = experts(100, 2, 1.0);
  forced.balancing = spec::Balancing::Forced;
  forced.load_imbalance.reset();
  CHECK(busiest_rank_load(forced, 100, 10) == 1.0);
  CHECK(expert_load_imbalance(forced) == 1.0);
  const auto moe = experts(100, 2, 1.8);
  CHECK(busiest_rank_load(moe, 1, 10) == 1.0);                // every expert on one rank
  CHECK(busiest_rank_load(moe, 100, 10) == near(1.8, 1e-6));  // one expert a rank: the busiest expert
  CHECK(expected_busiest(expert_load_cv(moe), 1, 100) == near(1.8, 1e-6));
  // more ranks of fewer experts each: the busiest rank further from the mean
  double previous = 1.0;
  for (const int ep : {2, 4, 5, 10, 20, 25, 50, 100}) {
    CAPTURE(ep);
    const double load = busiest_rank_load(moe, ep, 10);
    CHECK(load > previous);
    previous = load;
  }
  // a rank of one expert of top-1 routing may hold every token: at most ep times its share
  auto skewed = experts(4, 1, 4.0);
  CHECK(busiest_rank_load(skewed, 4, 10) <= 4.0);
  // eight experts a rank under top-2: at most 2 of a token's copies, 2·ep/2 = ep times the share
  CHECK(busiest_rank_load(experts(16, 2, 8.0), 2, 10) <= 2.0);
}

TEST_CASE("seeded expert loads: deterministic, and on average the expected busiest rank") {
  for (const double busiest_expert : {1.5, 3.9}) {  // cv 0.18 and 0.76 over 100 experts
    CAPTURE(busiest_expert);
    auto moe = experts(100, 8, busiest_expert);
    moe.load_seed = 11;
    CHECK(busiest_rank_load(moe, 10, 3) == busiest_rank_load(moe, 10, 3));
    auto other = moe;
    other.load_seed = 12;
    CHECK(busiest_rank_load(other, 10, 3) != busiest_rank_load(moe, 10, 3));
    // 4,000 layers drawn against the expected form, which they must meet within sampling error
    auto expected = moe;
    expected.load_seed.reset();
    CHECK(busiest_rank_load(moe, 10, 4000) == near(busiest_rank_load(expected, 10, 1), 0.01));
    CHECK(busiest_rank_load(moe, 100, 4000) == near(busiest_expert, 0.02));
  }
}

TEST_CASE("the balancing methods' busiest rank against the published measurements") {
  // tests/reference/moe_load_imbalance.json (UltraEP at EP 64): the global-batch loss's cv is
  // Qwen3-235B's own; the loss-free cv, the mean of two models', puts their figures on either side,
  // each within a quarter
  const auto reference = nlohmann::json::parse(std::ifstream(test::reference("moe_load_imbalance.json")));
  std::vector<double> loss_free_errors;
  for (const auto& m : reference.at("measurements")) {
    CAPTURE(m.at("model").get<std::string>());
    spec::MoeSpec moe{.experts = m.at("experts"), .top_k = m.at("top_k"), .expert_ffn_hidden = 512};
    moe.balancing = m.at("balancing") == "aux_free" ? spec::Balancing::AuxFree : spec::Balancing::GlobalAuxLoss;
    const double measured = m.at("busiest_rank");
    const double predicted = busiest_rank_load(moe, m.at("ep"), 10);
    CHECK(predicted == near(measured, 0.25));
    if (moe.balancing == spec::Balancing::AuxFree) loss_free_errors.push_back(predicted / measured - 1);
  }
  REQUIRE(loss_free_errors.size() == 2);
  CHECK(loss_free_errors[0] * loss_free_errors[1] < 0);
  // the finer the balancing acts, the less a micro-batch's busiest rank exceeds the mean
  spec::MoeSpec moe{.experts = 128, .top_k = 8, .expert_ffn_hidden = 512};
  double previous = 0;
  for (const auto b :
       {spec::Balancing::Forced, spec::Balancing::AuxLoss, spec::Balancing::AuxFree, spec::Balancing::GlobalAuxLoss}) {
    moe.balancing = b;
    CHECK(busiest_rank_load(moe, 64, 10) > previous);
    previous = busiest_rank_load(moe, 64, 10);
  }
}
