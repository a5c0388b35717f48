#include "trainsim/driver/run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/random.hpp"

namespace trainsim::driver {
namespace {

void simulate(RunReport& r, const spec::Job& job, const lower::LoweringOptions& lowering, cost::CostModel& costs) {
  auto step = std::make_shared<SimulatedStep>();
  step->lowered = lower::lower(job, costs, lowering);
  step->timeline = sim::run(step->lowered.graph);
  r.simulation = summarize(step->lowered, step->timeline);
  // the caching allocator's reserve on top of each stage's live peak (model::fragmentation_bytes)
  auto& s = *r.simulation;
  s.peak_memory = 0;
  for (auto& f : s.per_stage) {
    const Bytes transient{f.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)] +
                          f.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Buffers)]};
    f.peak_memory += model::fragmentation_bytes(transient, lowering.memory).count;
    s.peak_memory = std::max(s.peak_memory, f.peak_memory);
  }
  r.step = std::move(step);
}

// The ranks' compute factors for step `step`: the slow GPUs' factors, times each rank's noise.
std::vector<double> compute_factors(const spec::PerturbSpec& p, std::int64_t gpus, int step,
                                    std::vector<int>& slow_ranks) {
  std::vector<double> f(static_cast<std::size_t>(gpus), 1.0);
  slow_ranks.clear();
  for (const auto& s : p.slow_gpus) {
    std::vector<int> ranks;
    if (s.rank) {
      if (*s.rank >= gpus)
        throw SpecError("--perturb", "/slow_gpus",
                        fmt::format("rank {} is outside the job's {} ranks (0 to {})", *s.rank, gpus, gpus - 1));
      ranks.push_back(static_cast<int>(*s.rank));
    } else {
      if (s.count > gpus)
        throw SpecError("--perturb", "/slow_gpus", fmt::format("{} slow GPUs of a job of {}", s.count, gpus));
      // a seeded partial Fisher-Yates shuffle of the ranks
      std::vector<int> all(static_cast<std::size_t>(gpus));
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
      Random random(s.seed);
      for (std::int64_t i = 0; i < s.count; ++i) {
        const auto j = static_cast<std::size_t>(i) + static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(gpus - i)));
        std::swap(all[static_cast<std::size_t>(i)], all[j]);
        ranks.push_back(all[static_cast<std::size_t>(i)]);
      }
    }
    for (const int r : ranks) {
      f[static_cast<std::size_t>(r)] *= s.compute_factor;
      slow_ranks.push_back(r);
    }
  }
  if (p.noise && p.noise->sigma > 0) {
    // lognormal per rank and step
    Random random(p.noise->seed + static_cast<std::uint64_t>(step));
    for (auto& x : f) x *= std::exp(p.noise->sigma * random.normal());
  }
  std::sort(slow_ranks.begin(), slow_ranks.end());
  return f;
}

// Stragglers: `steps` steps with every rank simulated, each with its own factors; the report keeps
// the last step's timeline and the mean step.
void simulate_perturbed(RunReport& r, const spec::Job& job, const RunOptions& options,
                        const spec::Tunables& tunables, cost::CostModel& costs) {
  Perturbation p;
  p.steps = options.steps;
  p.unperturbed_step_s = r.simulation->step_time_s;
  std::vector<double> steps;
  double slowest = -1;
  for (int s = 0; s < options.steps; ++s) {
    auto lowering = options.lowering(tunables);
    lowering.full = true;
    lowering.compute_factor = compute_factors(*options.perturb, job.gpus, s, p.slow_ranks);
    simulate(r, job, lowering, costs);
    const double t = r.simulation->step_time_s;
    steps.push_back(t);
    if (t > slowest) {
      // the straggler of the slowest step: the rank whose compute stream was busiest
      slowest = t;
      const auto& lowered = r.step->lowered;
      double most = -1;
      for (const auto& rank : lowered.ranks) {
        double busy = 0;
        for (const auto task : lowered.graph.stream_tasks(rank.streams[0]))
          busy += (r.step->timeline.tasks[task.index()].end - r.step->timeline.tasks[task.index()].start).seconds();
        if (busy > most) {
          most = busy;
          p.critical_rank = rank.rank;
        }
      }
    }
  }
  for (const double t : steps) p.mean_step_s += t / static_cast<double>(steps.size());
  p.p50 = percentile(steps, 0.5);
  p.p90 = percentile(steps, 0.9);
  p.p99 = percentile(steps, 0.99);
  p.gpu_hours_per_day = static_cast<double>(job.gpus) * 24 * (1 - p.unperturbed_step_s / p.mean_step_s);
  r.simulation->step_time_s = p.mean_step_s;
  r.perturbation = std::move(p);
}

}  // namespace

RunReport build_run_report(const spec::Job& job, const RunOptions& options) {
  if (!options.simulate) return build_run_report(job, options, nullptr);
  const ClusterModel cluster(job.cluster, options.tunables(job.cluster).values.collectives);
  const auto costs = cluster.cost_model();
  return build_run_report(job, options, costs.get());
}

RunReport build_run_report(const spec::Job& job, const RunOptions& options, cost::CostModel* costs) {
  SIM_ASSERT(!options.simulate || costs != nullptr, "a simulated report needs a cost model");
  const auto tuned = options.tunables(job.cluster);
  const auto& tunables = tuned.values;
  RunReport r;
  r.job = &job;
  const auto& m = job.workload.model;
  r.params_total = model::count_params(m, job.workload.training.seq_len).total();
  for (const auto& s : model::stage_params(job)) r.params_per_gpu = std::max(r.params_per_gpu, s.total());
  r.flops = model::step_flops(job);
  r.megatron_formula_flops =
      model::megatron_formula_flops(job.workload, job.strategy.recompute == spec::Recompute::Full);
  r.memory = model::estimate_memory(job, tunables.memory, tunables.collectives.channels);
  r.device_memory = job.cluster.device.memory;
  r.memory_tuning = tunables.memory;
  r.runtime_memory = model::runtime_memory(job, tunables.memory, tunables.collectives.channels);
  r.warnings = job.warnings;
  r.peak_memory = r.memory.peak().bytes.total().count;
  if (r.peak_memory >= Bytes::kSaturated)
    r.warnings.push_back("memory estimate saturated at 1 EiB: the configuration is far outside any real device");

  if (options.simulate) {
    // every micro-batch is a set of tasks: beyond a million per pipeline a step takes hours
    if (job.micro_batches > kMaxSimulatedMicroBatches)
      throw SpecError(job.sources.workload, "/training/global_batch",
                      fmt::format("{} micro-batches per pipeline per step (global_batch / (dp·mb)) are more than "
                                  "a simulation takes ({}); raise mb or dp, or use --analytic",
                                  job.micro_batches, kMaxSimulatedMicroBatches));
    simulate(r, job, options.lowering(tunables), *costs);
    if (options.perturb && options.perturb->active()) {
      if (options.steps < 1 || options.steps > 10000)
        throw SpecError("--steps", "", fmt::format("{} is not a step count in [1, 10000]", options.steps));
      simulate_perturbed(r, job, options, tunables, *costs);
    }
    const auto& s = *r.simulation;
    // a figure at the clock's limit is a saturated sum, never a prediction to print
    SIM_ASSERT(s.step_time_s < Duration::max().seconds() / 2,
               "the simulated step of {} s saturated the clock (a task's duration overflowed): no figure is "
               "reported",
               s.step_time_s);
    r.peak_memory = s.peak_memory;
    const double tokens =
        static_cast<double>(job.workload.training.global_batch) * static_cast<double>(job.workload.training.seq_len);
    const double gpus = static_cast<double>(job.gpus);
    const double counted = job.strategy.recompute == spec::Recompute::Full ? r.flops.hardware : r.flops.model;
    const double peak = job.cluster.device.peak_flops.at(job.workload.training.dtype).flop_per_s;
    r.tokens_per_s = tokens / s.step_time_s;
    r.tflops_per_gpu = counted / s.step_time_s / gpus / 1e12;
    r.mfu = r.flops.model / s.step_time_s / gpus / peak;
    if (!tuned.kernels_fitted)
      r.warnings.push_back(fmt::format(
          "device \"{}\" has no fitted kernel parameters: the defaults (A100 values) apply and no measurement "
          "validates them (name a catalogue device, or calibrate from microbenchmarks or a profiler trace: "
          "trainsim calibrate)",
          job.cluster.device.name));
    for (auto& w : costs->warnings()) r.warnings.push_back(std::move(w));
  }
  SIM_ASSERT(r.peak_memory < std::numeric_limits<std::int64_t>::max() / 2,
             "the memory peak saturated its counter: no figure is reported");
  r.fits = r.peak_memory <= r.device_memory.count;
  r.memory_headroom = options.memory_headroom;
  const double usable = r.device_memory.as_double() * (1 - r.memory_headroom);
  r.memory_at_risk = r.fits && static_cast<double>(r.peak_memory) > usable;

  const auto shape = model::gpu_layer_shape(job);
  if (!m.moe || m.moe->dense_layers > 0) r.layers.push_back({"dense", model::layer_ops(m, shape, false)});
  if (m.moe) r.layers.push_back({"moe", model::layer_ops(m, shape, true)});
  return r;
}

ResolvedTunables RunOptions::tunables(const spec::ClusterSpec& cluster) const {
  return resolve_tunables(cluster, calibration ? &*calibration : nullptr, &overrides);
}

lower::LoweringOptions RunOptions::lowering(const spec::Tunables& tunables) const {
  return {.full = full,
          .kernel = tunables.kernels,
          .memory = tunables.memory,
          .nccl_channels = tunables.collectives.channels,
          .min_bucket_params = min_bucket_params};
}

}  // namespace trainsim::driver
