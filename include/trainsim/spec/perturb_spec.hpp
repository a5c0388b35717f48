#pragma once
// Stragglers (docs/goodput.md "Stragglers"): ranks whose compute runs slower, NICs at a fraction of
// their bandwidth, and per-step noise on every rank's compute, for `run --perturb FILE`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trainsim::spec {

struct SlowGpus {
  std::optional<std::int64_t> rank;  // one rank, or
  std::int64_t count = 0;            // this many ranks drawn from `seed`
  std::uint64_t seed = 1;
  double compute_factor = 1;  // its compute kernels take this many times longer
};

struct ComputeNoise {
  double sigma = 0;  // lognormal: each rank's compute factor in each step is exp(sigma·N(0, 1))
  std::uint64_t seed = 1;
};

// A network port at a fraction of its line rate (a NIC or its leaf-switch port renegotiated to a
// lower speed, a cable losing lanes): both directions of the cable between a rank's NIC and its
// leaf switch.
struct DegradedNics {
  std::optional<std::int64_t> rank;  // the NIC of one rank, or
  std::int64_t count = 0;            // of this many ranks drawn from `seed`
  std::uint64_t seed = 1;
  double bandwidth_fraction = 1;  // of the line rate left, in (0, 1]
};

struct PerturbSpec {
  std::vector<SlowGpus> slow_gpus;
  std::vector<DegradedNics> degraded_links;
  std::optional<ComputeNoise> noise;
  // Whether it changes anything (all factors 1, no noise: the unperturbed run).
  bool active() const;
};

PerturbSpec read_perturb_spec(const nlohmann::json& json, const std::string& source);
PerturbSpec load_perturb_spec(const std::string& path);

}  // namespace trainsim::spec
