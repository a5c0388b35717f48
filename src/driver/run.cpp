#include "trainsim/driver/run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/model/kernel_model.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/topo/placement.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/random.hpp"

namespace trainsim::driver {
namespace {

void simulate(RunReport& r, const spec::Job& job, const lower::LoweringOptions& lowering, cost::CostModel& costs) {
  r.step.reset();  // a step before this one is let go first: one every-rank step at a time in memory
  auto step = std::make_shared<SimulatedStep>();
  step->lowered = lower::lower(job, costs, lowering);
  step->timeline = sim::run(step->lowered.graph);
  r.simulation = summarize(step->lowered, step->timeline);
  // the caching allocator's reserve on top of each stage's live peak (model::fragmentation_bytes),
  // and the loss's cached block from the loss's backward on (model::loss_cached_bytes)
  auto& s = *r.simulation;
  s.live_peak_memory = s.peak_memory;
  s.peak_memory = 0;
  const auto loss_cached =
      Bytes::saturating_from_double(model::loss_cached_bytes(job.workload.model, model::gpu_layer_shape(job)));
  for (auto& f : s.per_stage) {
    const Bytes transient{f.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)] +
                          f.memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Buffers)]};
    if (job.strategy.caching_allocator)
      f.reserve =
          (model::fragmentation_bytes(transient, lowering.memory) + (f.peak_after_loss ? loss_cached : Bytes{})).count;
    f.peak_memory += f.reserve;
    s.peak_memory = std::max(s.peak_memory, f.peak_memory);
  }
  r.step = std::move(step);
}

// The ranks a perturbation names: one given rank, or `count` drawn from `seed` (a seeded partial
// Fisher-Yates shuffle of the job's ranks).
std::vector<int> chosen_ranks(std::optional<std::int64_t> rank, std::int64_t count, std::uint64_t seed,
                              std::int64_t gpus, const std::string& path, std::string_view what) {
  if (rank) {
    if (*rank >= gpus)
      throw SpecError("--perturb", path,
                      fmt::format("rank {} is outside the job's {} ranks (0 to {})", *rank, gpus, gpus - 1));
    return {static_cast<int>(*rank)};
  }
  if (count > gpus) throw SpecError("--perturb", path, fmt::format("{} {} of a job of {}", count, what, gpus));
  std::vector<int> all(static_cast<std::size_t>(gpus));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  Random random(seed);
  std::vector<int> ranks;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto j =
        static_cast<std::size_t>(i) + static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(gpus - i)));
    std::swap(all[static_cast<std::size_t>(i)], all[j]);
    ranks.push_back(all[static_cast<std::size_t>(i)]);
  }
  return ranks;
}

// The ranks' compute factors for step `step`: the slow GPUs' factors, times each rank's noise.
std::vector<double> compute_factors(const spec::PerturbSpec& p, std::int64_t gpus, int step,
                                    std::vector<int>& slow_ranks) {
  std::vector<double> f(static_cast<std::size_t>(gpus), 1.0);
  slow_ranks.clear();
  for (const auto& s : p.slow_gpus) {
    for (const int r : chosen_ranks(s.rank, s.count, s.seed, gpus, "/slow_gpus", "slow GPUs")) {
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

// The job's cluster with the perturbation's NICs degraded; fills `ranks` with theirs.
std::unique_ptr<ClusterModel> degraded_cluster(const spec::Job& job, const spec::PerturbSpec& p,
                                               const cost::CollectiveTuning& tuning, std::vector<int>& ranks) {
  auto topology = topo::Topology::build(topo::reachable_part(job.cluster, job.gpus));
  ranks.clear();
  for (const auto& d : p.degraded_links) {
    for (const int r : chosen_ranks(d.rank, d.count, d.seed, job.gpus, "/degraded_links", "degraded NICs")) {
      if (topology.degrade_nic(topo::DeviceId{static_cast<std::uint32_t>(r)}, d.bandwidth_fraction) == 0)
        throw SpecError("--perturb", "/degraded_links",
                        fmt::format("rank {} has no NIC in topology {} (a torus or a single node): no network "
                                    "link to degrade",
                                    r, job.cluster.name));
      ranks.push_back(r);
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return std::make_unique<ClusterModel>(std::move(topology), tuning);
}

// The critical path of a simulated step, walked back from the task that ended last through
// whichever dependency or stream predecessor ended last: the rank with the most compute on it,
// and the resource (compute, or a kind of communication) that held it longest.
void critical_path(const SimulatedStep& step, Perturbation& p) {
  const auto& g = step.lowered.graph;
  const auto& spans = step.timeline.tasks;
  if (g.num_tasks() == 0) return;
  sim::TaskId current{0};
  for (std::uint32_t t = 0; t < g.num_tasks(); ++t)
    if (spans[t].end > spans[current.index()].end) current = sim::TaskId{t};
  std::map<std::uint32_t, double> compute_by_process;
  std::map<std::uint16_t, double> by_category;
  double total = 0;
  for (;;) {
    const auto& span = spans[current.index()];
    const auto next = sim::last_predecessor(g, step.timeline, current);
    const auto from = next ? std::max(span.start, spans[next->index()].end) : span.start;
    const double seconds = (span.end - std::min(from, span.end)).seconds();
    total += seconds;
    by_category[g.category(current)] += seconds;
    if (!g.is_transfer(current)) compute_by_process[g.stream(g.streams(current).front()).process] += seconds;
    if (!next || spans[next->index()].end <= Duration::zero()) break;
    current = *next;
  }
  double most = -1;
  for (const auto& [process, seconds] : compute_by_process)
    if (seconds > most) {
      most = seconds;
      p.critical_rank = static_cast<int>(process);
    }
  most = -1;
  for (const auto& [category, seconds] : by_category)
    if (seconds > most) {
      most = seconds;
      p.critical_resource = std::string(lower::category_name(static_cast<lower::Category>(category)));
      p.critical_share = total > 0 ? seconds / total : 0;
    }
}

// Stragglers: `steps` steps, each with its own factors, against the unperturbed step simulated
// with the same ranks (folding ignores traffic of other groups on shared links: a baseline folded
// differently would count that as the perturbation's); the report keeps the last step's timeline
// and the mean step. Without noise every step is the same: one is simulated.
void simulate_perturbed(RunReport& r, const spec::Job& job, const RunOptions& options, const spec::Tunables& tunables,
                        const std::vector<lower::DistinctGroup>& crossing_groups, cost::CostModel& costs) {
  const auto& spec = *options.perturb;
  Perturbation p;
  p.steps = options.steps;
  std::unique_ptr<ClusterModel> degraded;
  std::unique_ptr<cost::CostModel> degraded_costs;
  if (!spec.degraded_links.empty()) {
    degraded = degraded_cluster(job, spec, tunables.collectives, p.degraded_ranks);
    degraded_costs = degraded->cost_model();
  }
  compute_factors(spec, job.gpus, 0, p.slow_ranks);  // its ranks checked before the long part
  const bool noisy = spec.noise && spec.noise->sigma > 0;
  // Noise makes every rank different (and --full asks for every rank): all are simulated.
  // Otherwise the slow GPUs and the ranks of degraded NICs are simulated on their own, with every
  // rank they make different, and the rest folded. Either way the unperturbed step is simulated
  // with the same ranks, so that the slowdown is the perturbation's alone.
  auto lowering = options.lowering(tunables);
  lowering.memory_estimate = &r.memory;
  lowering.full = options.full || noisy;
  if (!lowering.full) {
    lowering.distinct_ranks = p.slow_ranks;
    lowering.distinct_ranks.insert(lowering.distinct_ranks.end(), p.degraded_ranks.begin(), p.degraded_ranks.end());
    lowering.distinct_groups = crossing_groups;
  }
  if (!lowering.full || r.simulation->simulated_ranks < static_cast<std::size_t>(job.gpus))
    simulate(r, job, lowering, costs);
  p.unperturbed_step_s = r.simulation->step_time_s;
  auto& step_costs = degraded_costs ? *degraded_costs : costs;
  std::vector<double> steps;
  double slowest = -1;
  for (int s = 0; s < (noisy ? options.steps : 1); ++s) {
    lowering.compute_factor = compute_factors(spec, job.gpus, s, p.slow_ranks);
    simulate(r, job, lowering, step_costs);
    const double t = r.simulation->step_time_s;
    steps.push_back(t);
    if (t > slowest) {
      slowest = t;
      critical_path(*r.step, p);
    }
  }
  if (!noisy) steps.assign(static_cast<std::size_t>(options.steps), steps.front());
  if (degraded_costs)
    for (auto& w : degraded_costs->warnings()) r.warnings.push_back(std::move(w));
  for (const double t : steps) p.mean_step_s += t / static_cast<double>(steps.size());
  p.p50 = percentile(steps, 0.5);
  p.p90 = percentile(steps, 0.9);
  p.p99 = percentile(steps, 0.99);
  p.gpu_hours_per_day = static_cast<double>(job.gpus) * 24 * (1 - p.unperturbed_step_s / p.mean_step_s);
  r.simulation->step_time_s = p.mean_step_s;
  r.perturbation = std::move(p);
}

}  // namespace

// A straddling group's collectives leave the NVLink domain, mesh or torus for the network (tp 16
// on 72-GPU NVL72 racks, ep 64 with tp 1). A folded run otherwise simulates the first group, inside
// the first domain, and a synchronous step waits for the slowest. The worst group is the one with
// the largest share of some member's peers in another domain (8 of 64 ranks on one rack and 56 on
// the next: 56/64 of what those 8 exchange crosses their NICs). A tp larger than a GPU domain is
// already said by the job.
std::vector<lower::DistinctGroup> straddling_groups(const spec::Job& job, std::vector<std::string>* warnings) {
  std::vector<lower::DistinctGroup> out;
  const auto& c = job.cluster;
  const auto* torus = std::get_if<spec::TorusNetwork>(&c.network);
  const auto deepep_idle = [&](int ep) {
    if (job.strategy.deepep_dispatch && !spec::ep_folded(job.strategy) && warnings != nullptr)
      warnings->push_back(
          fmt::format("dispatcher=deepep changes nothing here: every ep={} group lies inside one {}, "
                      "where its exchange is alltoall's",
                      ep, torus ? "TPU slice" : "scale-up domain"));
  };
  if (c.nodes < 2 || (torus && torus->slices < 2)) {
    deepep_idle(job.strategy.ep);
    return out;
  }
  const auto placement = topo::Placement::from_strategy(job.strategy, job.dp);
  const auto domain = static_cast<std::uint32_t>(torus ? torus->slice_devices() : c.node.devices);
  for (const auto dim : {spec::ParallelDim::Tp, spec::ParallelDim::Cp, spec::ParallelDim::Ep}) {
    const int size = placement.size(dim);
    if (size < 2 || (!torus && dim == spec::ParallelDim::Tp && size > c.node.devices)) continue;
    int groups = 0;
    int crossing = 0;
    // per group, the most of one member's peers in other domains: the worst and the least
    std::size_t worst_outside = 0;
    std::size_t least_outside = std::numeric_limits<std::size_t>::max();
    std::optional<int> worst;
    const int stride = placement.stride(dim);
    for (int r = 0; r < placement.world_size(); ++r) {
      if (placement.coordinate(r, dim) != 0) continue;
      // the group's devices are r, r + stride, ...: one domain when its first and last share one
      if (static_cast<std::uint32_t>(r) / domain == static_cast<std::uint32_t>(r + (size - 1) * stride) / domain) {
        ++groups;
        least_outside = 0;
        continue;
      }
      const auto g = placement.group(dim, r);
      ++groups;
      // the group is sorted: each domain's members are one run of it
      const auto runs = topo::domain_runs(g, domain);
      const std::size_t domains = runs.size();
      const std::size_t outside = g.size() - *std::min_element(runs.begin(), runs.end());
      least_outside = std::min(least_outside, outside);
      if (domains < 2) continue;
      ++crossing;
      if (outside > worst_outside) {
        worst_outside = outside;
        worst = r;
      }
    }
    // groups that all cross alike (ep 16 over 8-GPU nodes) run alike: the first stands for them
    if (worst && worst_outside > least_outside) out.push_back({*worst, dim});
    if (dim == spec::ParallelDim::Ep && crossing == 0) deepep_idle(size);
    if (crossing > 0 && warnings != nullptr)
      warnings->push_back(fmt::format("{} of the {} {}={} groups span {} of {} devices: their collectives cross the {}",
                                      crossing, groups, spec::parallel_dim_name(dim), size,
                                      torus ? "TPU slices" : "scale-up domains", domain,
                                      torus ? "data-centre network" : "network"));
  }
  return out;
}

void prepare_job(spec::Job& job, const RunOptions& options) {
  const auto tunables = options.tunables(job.cluster).values;
  model::apply_remat_to_fit(job, tunables.memory, tunables.collectives.channels);
}

RunReport build_run_report(const spec::Job& job, const RunOptions& options) {
  if (!options.simulate) return build_run_report(job, options, nullptr);
  const ClusterModel cluster(topo::reachable_part(job.cluster, job.gpus), options.tunables(job.cluster).values.collectives);
  const auto costs = cluster.cost_model();
  return build_run_report(job, options, costs.get());
}

namespace {

// The job's warnings, and what the compiler rematerialises for it to fit (remat_to_fit).
std::vector<std::string> job_warnings(const spec::Job& job) {
  auto out = job.warnings;
  if (job.strategy.remat_layers > 0)
    out.push_back(fmt::format(
        "remat_to_fit: the compiler recomputes the first {} layer(s) of every model chunk whole in the backward, "
        "beyond recompute={}, for the live tensors to fit in the device's memory (XLA's rematerialisation)",
        job.strategy.remat_layers, spec::recompute_name(job.strategy.recompute)));
  return out;
}

// Tokens per second, TFLOP/s per GPU and MFU of a step of `step_s` seconds.
void add_rates(RunReport& r, const spec::Job& job, double step_s) {
  const double tokens =
      static_cast<double>(job.workload.training.global_batch) * static_cast<double>(job.workload.training.seq_len);
  const double gpus = static_cast<double>(job.gpus);
  const double counted = job.strategy.recompute == spec::Recompute::Full ? r.flops.hardware : r.flops.model;
  r.tokens_per_s = tokens / step_s;
  r.tflops_per_gpu = counted / step_s / gpus / 1e12;
  const auto& peaks = job.cluster.device.peak_flops;
  r.mfu = r.flops.model / step_s / gpus / r.mfu_peak_flops;
  if (const auto bf16 = peaks.find(spec::Dtype::Bf16); bf16 != peaks.end())
    r.mfu_bf16 = r.flops.model / step_s / gpus / bf16->second.flop_per_s;
}

}  // namespace

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
  r.warnings = job_warnings(job);
  {
    // the kernel model's precisions: --dtype fp8 and fp8=tensorwise on bf16 run the same kernels
    const auto kernels = model::kernel_context(job, tunables.kernels);
    r.training_dtype = kernels.dtype;
    r.mfu_dtype = kernels.gemm_dtype;
    r.mfu_peak_flops = job.cluster.device.peak_flops.at(r.mfu_dtype).flop_per_s;
  }
  const auto crossing_groups = straddling_groups(job, &r.warnings);
  r.peak_memory = r.memory.peak().bytes.total().count;
  r.live_peak_memory = r.memory.live_peak().count;
  if (r.peak_memory >= Bytes::kSaturated)
    r.warnings.push_back("memory estimate saturated at 1 EiB: the configuration is far outside any real device");

  if (options.simulate) {
    if (layer_passes(job) > kMaxSimulatedLayerPasses)
      throw SpecError(job.sources.workload, "/training/global_batch",
                      fmt::format("{} micro-batches per pipeline per step (global_batch / (dp·mb)) of {} layers are "
                                  "more than a simulation takes ({} layer passes, about a GiB); raise mb or dp, or "
                                  "use --analytic",
                                  job.micro_batches, job.workload.model.layers, kMaxSimulatedLayerPasses));
    auto lowering = options.lowering(tunables);
    lowering.memory_estimate = &r.memory;
    lowering.distinct_groups = crossing_groups;
    simulate(r, job, lowering, *costs);
    if (options.perturb && options.perturb->active()) {
      if (options.steps < 1 || options.steps > 10000)
        throw SpecError("--steps", "", fmt::format("{} is not a step count in [1, 10000]", options.steps));
      simulate_perturbed(r, job, options, tunables, crossing_groups, *costs);
    }
    const auto& s = *r.simulation;
    // a figure at the clock's limit is a saturated sum, never a prediction to print
    SIM_ASSERT(s.step_time_s < Duration::max().seconds() / 2,
               "the simulated step of {} s saturated the clock (a task's duration overflowed): no figure is "
               "reported",
               s.step_time_s);
    r.peak_memory = s.peak_memory;
    r.live_peak_memory = s.live_peak_memory;
    add_rates(r, job, s.step_time_s);
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
  // PyTorch's caching allocator frees its cached blocks that are not split and retries a
  // cudaMalloc that failed (c10/cuda/CUDACachingAllocator.cpp): the reserve it keeps beyond the
  // live tensors is given back under pressure, so the live tensors are what must fit, and a plan
  // that needs part of the reserve is at risk (docs/model.md "Fits")
  r.fits = r.live_peak_memory <= r.device_memory.count;
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
          .host = tunables.host,
          .nccl_channels = tunables.collectives.channels,
          .min_bucket_params = min_bucket_params,
          .record_work = record_work};
}

}  // namespace trainsim::driver
