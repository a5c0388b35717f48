#include "trainsim/search/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "search/bound_order.hpp"
#include "search/space.hpp"
#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/lower/bound.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/parallel.hpp"

namespace trainsim::search {
namespace {

// Candidates simulated per round before the bound is tightened. Fixed, so that what is simulated
// does not depend on the thread count.
constexpr std::size_t kRound = 32;

struct Choice {
  Objective objective;
  std::string_view name;
};
constexpr Choice kObjectives[] = {
    {Objective::StepTime, "step_time"}, {Objective::TokensPerS, "tokens_per_s"}, {Objective::Cost, "cost"}};

// What phase one learns about a candidate without simulating it.
struct Screened {
  enum class Verdict { Invalid, OutOfMemory, Candidate } verdict = Verdict::Candidate;
  std::string reason;  // the family, for pruned candidates
  std::string example;
  std::unique_ptr<spec::Job> job;
  double kernel_bound = 0;      // lower bound on the objective from the kernels alone (lower::kernel_lower_bound)
  std::optional<double> bound;  // the full one (lower::step_time_lower_bound), once needed
};

double tokens_per_step(const spec::WorkloadSpec& w) {
  return static_cast<double>(w.training.global_batch) * static_cast<double>(w.training.seq_len);
}

// The objective to minimise for a step time on `gpus` devices.
double objective_of(Objective o, double step_time_s, std::int64_t gpus, const spec::WorkloadSpec& w) {
  switch (o) {
    case Objective::StepTime:
    case Objective::TokensPerS:
      return step_time_s;
    case Objective::Cost:
      return gpu_hours_per_mtoken(step_time_s, gpus, w);
  }
  return step_time_s;
}

Screened screen(const Candidate& c, const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload,
                const spec::Sources& sources, const SweepOptions& options) {
  Screened out;
  const auto text = spec::strategy_text(c.strategy);
  try {
    out.job = std::make_unique<spec::Job>(spec::resolve_job(cluster, workload, c.strategy, sources));
  } catch (const SpecError& e) {
    const auto& d = e.diagnostics().front();
    out.verdict = Screened::Verdict::Invalid;
    out.reason = d.pointer.empty() ? d.message : fmt::format("{}: {}", d.pointer, d.message);
    out.example = text;
    return out;
  }
  auto& job = *out.job;
  if (driver::layer_passes(job) > driver::kMaxSimulatedLayerPasses) {
    out.verdict = Screened::Verdict::Invalid;
    out.reason = fmt::format("more micro-batches × layers per pipeline than a simulation takes ({})",
                             driver::kMaxSimulatedLayerPasses);
    out.example = text;
    out.job.reset();
    return out;
  }
  job.strategy.dp = job.dp;  // the plan names its data-parallel degree rather than the device count
  job.strategy.gpus.reset();
  const auto tunables = options.run.tunables(cluster).values;
  const auto memory = model::apply_remat_to_fit(job, tunables.memory, tunables.collectives.channels);
  const auto& peak = memory.peak().bytes;
  // the memory a plan may use: the device's, for its live tensors (a plan in the headroom or that
  // needs the allocator's reserve is kept and flagged: published runs use the memory to the last
  // few percent, docs/validation.md "Memory"; the reserve is given back under pressure)
  const auto device = job.cluster.device.memory;
  if (memory.live_peak() > device) {
    out.verdict = Screened::Verdict::OutOfMemory;
    const auto states = peak.params + peak.grads + peak.optimizer;
    const auto& s = job.strategy;
    if (states > device) {
      out.reason =
          fmt::format("model states exceed device memory at tp·cp·pp = {}, zero={}", s.tp * s.cp * s.pp, s.zero);
    } else {
      out.reason = fmt::format("activations exceed device memory at recompute={}, mb={}",
                               spec::recompute_name(s.recompute), s.mb);
    }
    out.example = fmt::format("{} (analytic peak {})", spec::strategy_text(s), report::human_bytes(peak.total()));
    out.job.reset();
    return out;
  }
  const double bound = lower::kernel_lower_bound(job, options.run.lowering(tunables)).seconds();
  out.kernel_bound = objective_of(options.objective, bound, job.gpus, workload);
  return out;
}

// The full bound of a screened candidate.
double full_bound(const spec::Job& job, const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload,
                  const SweepOptions& options, cost::CostModel& costs) {
  const auto tunables = options.run.tunables(cluster).values;
  const auto memory = model::estimate_memory(job, tunables.memory, tunables.collectives.channels);
  auto lowering = options.run.lowering(tunables);
  lowering.memory_estimate = &memory;
  lowering.distinct_groups = driver::straddling_groups(job);  // the simulation waits for them
  const double bound = lower::step_time_lower_bound(job, costs, lowering).seconds();
  return objective_of(options.objective, bound, job.gpus, workload);
}

// Cost models for the simulating threads: one per thread at a time, reused across candidates so
// that collective plans are laid out once per group.
class CostModelPool {
 public:
  CostModelPool(const spec::ClusterSpec& cluster, const cost::CollectiveTuning& tuning) : cluster_(cluster, tuning) {}
  std::unique_ptr<cost::CostModel> acquire() {
    const std::scoped_lock lock(mutex_);
    if (free_.empty()) return cluster_.cost_model();
    auto m = std::move(free_.back());
    free_.pop_back();
    return m;
  }
  void release(std::unique_ptr<cost::CostModel> m) {
    const std::scoped_lock lock(mutex_);
    free_.push_back(std::move(m));
  }

 private:
  driver::ClusterModel cluster_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<cost::CostModel>> free_;
};

// A pool per segment the candidates run under, each on its allocated part of the cluster: the
// topology of the largest job tried there (the links smaller ones cross are the same).
class CostModelPools {
 public:
  CostModelPools(const spec::ClusterSpec& cluster, const std::vector<Candidate>& all,
                 const cost::CollectiveTuning& tuning) {
    std::map<std::optional<int>, std::int64_t> most_gpus;
    for (const auto& c : all) most_gpus[c.strategy.segment] = std::max(most_gpus[c.strategy.segment], c.gpus);
    for (const auto& [segment, gpus] : most_gpus) {
      spec::StrategySpec part;
      part.segment = segment;
      pools_.emplace(std::piecewise_construct, std::forward_as_tuple(segment),
                     std::forward_as_tuple(topo::reachable_part(spec::allocated_part(cluster, part), gpus), tuning));
    }
  }
  CostModelPool& of(const spec::StrategySpec& strategy) { return pools_.at(strategy.segment); }

 private:
  std::map<std::optional<int>, CostModelPool> pools_;
};

// Best first; ties broken by enumeration order.
bool better(const Plan& a, const Plan& b) {
  return std::tie(a.objective, a.index) < std::tie(b.objective, b.index);
}

void sort_families(std::vector<PrunedFamily>& families) {
  std::sort(families.begin(), families.end(), [](const PrunedFamily& a, const PrunedFamily& b) {
    return std::tie(b.count, a.example_index) < std::tie(a.count, b.example_index);
  });
}

void add_family(std::map<std::string, PrunedFamily>& families, const std::string& reason, std::size_t index,
                const std::string& example, std::int64_t count = 1) {
  auto [it, inserted] = families.try_emplace(reason, PrunedFamily{reason, 0, index, example});
  it->second.count += count;
  if (index < it->second.example_index) {
    it->second.example_index = index;
    it->second.example = example;
  }
}

}  // namespace

double gpu_hours_per_mtoken(double step_time_s, std::int64_t gpus, const spec::WorkloadSpec& workload) {
  return step_time_s * static_cast<double>(gpus) / 3600.0 / (tokens_per_step(workload) / 1e6);
}

std::string_view objective_name(Objective objective) {
  for (const auto& c : kObjectives)
    if (c.objective == objective) return c.name;
  return "step_time";
}

Objective objective_from_name(std::string_view name) {
  for (const auto& c : kObjectives)
    if (c.name == name) return c.objective;
  throw SpecError("--rank-by", "",
                  fmt::format("\"{}\" is not valid; expected one of: step_time, tokens_per_s, cost", name));
}

namespace {

// This shard's candidates, by their index in the whole space.
std::vector<std::size_t> shard_of(std::size_t total, const SweepOptions& options) {
  std::vector<std::size_t> mine;
  for (auto i = static_cast<std::size_t>(options.shard); i < total; i += static_cast<std::size_t>(options.shards))
    mine.push_back(i);
  return mine;
}

// Phase one: the job rules, the analytic memory estimate and the kernel bound, for every candidate
// of the shard. Pruned candidates are counted into `result` by family; the rest are returned as
// positions in `mine`.
std::vector<std::size_t> screen_all(const std::vector<Candidate>& all, const std::vector<std::size_t>& mine,
                                    const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload,
                                    const spec::Sources& sources, const SweepOptions& options,
                                    std::vector<Screened>& screened, SweepResult& result) {
  screened.resize(mine.size());
  parallel_for(mine.size(), options.threads,
               [&](std::size_t i) { screened[i] = screen(all[mine[i]], cluster, workload, sources, options); });
  std::map<std::string, PrunedFamily> families;
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    auto& s = screened[i];
    switch (s.verdict) {
      case Screened::Verdict::Invalid:
        ++result.invalid;
        add_family(families, s.reason, mine[i], s.example);
        break;
      case Screened::Verdict::OutOfMemory:
        ++result.out_of_memory;
        add_family(families, s.reason, mine[i], s.example);
        break;
      case Screened::Verdict::Candidate:
        ++result.candidates;
        candidates.push_back(i);
        break;
    }
  }
  for (auto& [reason, family] : families) result.pruned.push_back(std::move(family));
  sort_families(result.pruned);
  return candidates;
}

// The plan a simulated candidate ranks as, or nothing when it does not fit once simulated.
std::optional<Plan> simulate_one(const spec::Job& job, std::size_t index, double bound,
                                 const spec::WorkloadSpec& workload, const SweepOptions& options,
                                 const driver::RunOptions& run, CostModelPools& pools) {
  auto& pool = pools.of(job.strategy);
  auto costs = pool.acquire();
  const auto report = driver::build_run_report(job, run, costs.get());
  pool.release(std::move(costs));
  // the ranking is exact only if the bound holds
  const double step = report.simulation->step_time_s;
  SIM_ASSERT(objective_of(options.objective, step, job.gpus, workload) >= bound * (1 - 1e-9),
             "the step-time bound {} s exceeds the simulated {} s for {}", bound, step,
             spec::strategy_text(job.strategy));
  if (!report.fits) return std::nullopt;
  const auto& sim = *report.simulation;
  return Plan{.index = index,
              .strategy = spec::strategy_text(job.strategy),
              .gpus = job.gpus,
              .step_time_s = sim.step_time_s,
              .tokens_per_s = report.tokens_per_s,
              .tflops_per_gpu = report.tflops_per_gpu,
              .mfu = report.mfu,
              .bubble_fraction = sim.bubble_fraction,
              .exposed_comm_s = sim.breakdown.exposed_comm_s,
              .gpu_hours_per_mtoken = gpu_hours_per_mtoken(sim.step_time_s, job.gpus, workload),
              .peak_memory = report.peak_memory,
              .memory_at_risk = report.memory_at_risk,
              .objective = objective_of(options.objective, sim.step_time_s, job.gpus, workload),
              .bound = bound};
}

// Phase two: simulate in rounds of kRound, best bound first, until the bound passes the K-th best.
// Returns the top K; counts what it simulated into `stats`.
std::vector<Plan> simulate_rounds(BoundOrder& order, const std::vector<std::size_t>& mine,
                                  std::vector<Screened>& screened, const spec::WorkloadSpec& workload,
                                  const SweepOptions& options, CostModelPools& pools, SearchStats& stats,
                                  std::vector<Plan>& simulated_plans) {
  driver::RunOptions run = options.run;
  run.simulate = true;
  std::vector<Plan> kept;
  std::mutex progress_mutex;
  std::size_t simulated = 0;
  const auto threshold = [&] {
    if (options.exhaustive || kept.size() < options.top) return std::numeric_limits<double>::infinity();
    return kept[options.top - 1].objective;
  };
  while (order.peek(threshold())) {
    // the next kRound candidates in bound order whose bound does not exceed the K-th best
    std::vector<std::size_t> round;
    while (round.size() < kRound) {
      const auto next = order.peek(threshold());
      if (!next) break;
      round.push_back(next->first);
      order.pop();
    }
    std::vector<std::optional<Plan>> plans(round.size());
    parallel_for(round.size(), options.threads, [&](std::size_t r) {
      const auto i = round[r];
      plans[r] = simulate_one(*screened[i].job, mine[i], *screened[i].bound, workload, options, run, pools);
      if (options.progress) {
        const std::scoped_lock lock(progress_mutex);
        ++simulated;
        options.progress(simulated, order.size() + simulated);
      }
    });
    for (std::size_t r = 0; r < round.size(); ++r) {
      ++stats.simulated;
      screened[round[r]].job.reset();
      if (!plans[r]) {
        ++stats.simulated_out_of_memory;
        continue;
      }
      simulated_plans.push_back(*plans[r]);
      kept.push_back(std::move(*plans[r]));
    }
    std::sort(kept.begin(), kept.end(), better);
    if (kept.size() > options.top) kept.resize(options.top);
  }
  stats.bounded_out = static_cast<std::int64_t>(order.size());
  std::sort(simulated_plans.begin(), simulated_plans.end(),
            [](const Plan& a, const Plan& b) { return a.index < b.index; });
  return kept;
}

// Keeps the simulated plans every sweep of this space simulates, sharded or not: those whose bound
// does not exceed the K-th best (each shard's threshold is at least the whole sweep's, so each
// simulates them). An exhaustive sweep simulates them all.
void keep_certain_simulations(SweepResult& r) {
  if (r.exhaustive || r.top.size() < r.top_k) return;
  const double threshold = r.top[r.top_k - 1].objective;
  std::erase_if(r.simulated, [&](const Plan& p) { return p.bound > threshold; });
}

}  // namespace

spec::ClusterSpec allocated_cluster(const spec::ClusterSpec& cluster, const SweepOptions& options) {
  return spec::checked_allocated_part(cluster, spec::read_strategy_spec(options.fixed, options.fixed_source),
                                      options.fixed_source);
}

SweepResult sweep(const spec::ClusterSpec& cluster, const spec::WorkloadSpec& workload, const spec::Sources& sources,
                  const SweepOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  SIM_ASSERT(options.shards >= 1 && options.shard >= 0 && options.shard < options.shards, "bad shard {}/{}",
             options.shard, options.shards);
  SIM_ASSERT(options.top >= 1, "the top K must hold at least one plan");
  const auto all = enumerate_space(cluster, workload, options);

  SweepResult result;
  result.topology = cluster.name;
  result.workload = workload.name;
  result.objective = options.objective;
  result.top_k = options.top;
  result.shards = options.shards;
  result.shard_indices = {options.shard};
  result.fingerprint = options.fingerprint;
  for (const auto& c : all)
    if (std::find(result.gpus.begin(), result.gpus.end(), c.gpus) == result.gpus.end()) result.gpus.push_back(c.gpus);

  const auto mine = shard_of(all.size(), options);
  result.enumerated = static_cast<std::int64_t>(mine.size());
  CostModelPools pools(cluster, all, options.run.tunables(cluster).values.collectives);
  std::vector<Screened> screened;
  const auto candidates = screen_all(all, mine, cluster, workload, sources, options, screened, result);
  std::vector<double> kernel_bounds(screened.size());
  for (const auto i : candidates) kernel_bounds[i] = screened[i].kernel_bound;
  const auto full_bounds = [&](std::span<const std::size_t> batch) {
    std::vector<double> out(batch.size());
    parallel_for(batch.size(), options.threads, [&](std::size_t b) {
      auto& s = screened[batch[b]];
      auto& pool = pools.of(s.job->strategy);
      auto costs = pool.acquire();
      s.bound = out[b] = full_bound(*s.job, cluster, workload, options, *costs);
      pool.release(std::move(costs));
      // the order's premise (both are whole picoseconds through the same monotone objective)
      SIM_ASSERT(s.kernel_bound <= *s.bound, "the kernel bound {} exceeds the full bound {} for {}", s.kernel_bound,
                 *s.bound, spec::strategy_text(s.job->strategy));
    });
    return out;
  };
  const unsigned threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  BoundOrder order(candidates, kernel_bounds, full_bounds, 16 * std::size_t{threads});
  result.top = simulate_rounds(order, mine, screened, workload, options, pools, result.stats, result.simulated);
  result.exhaustive = options.exhaustive;
  if (options.shards == 1) keep_certain_simulations(result);
  result.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

namespace {

// The first of parts[0..i] that covers the same shard as parts[i] (i itself when none does).
std::size_t first_with_shard(const std::vector<SweepResult>& parts, std::size_t i) {
  for (std::size_t j = 0; j < i; ++j)
    if (parts[j].shard_indices == parts[i].shard_indices) return j;
  return i;
}

}  // namespace

SweepResult merge_sweeps(std::vector<SweepResult> parts, const std::vector<std::string>& sources) {
  SIM_ASSERT(parts.size() == sources.size(), "one source per sweep result");
  if (parts.empty()) throw SpecError("sweep merge", "", "no sweep results to merge");
  SweepResult out = parts.front();
  out.top.clear();
  out.simulated.clear();
  out.pruned.clear();
  out.shard_indices.clear();
  out.enumerated = out.invalid = out.out_of_memory = out.candidates = 0;
  out.stats = {};
  std::map<std::string, PrunedFamily> families;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    const auto differs = [&](const char* pointer, const auto& a, const auto& b) {
      if (a != b)
        throw SpecError(sources[i], pointer,
                        fmt::format("differs from {}: the results come from different sweeps", sources.front()));
    };
    differs("/topology", p.topology, out.topology);
    differs("/workload", p.workload, out.workload);
    differs("/rank_by", objective_name(p.objective), objective_name(out.objective));
    differs("/top_k", p.top_k, out.top_k);
    differs("/gpus", p.gpus, out.gpus);
    differs("/shard/count", p.shards, out.shards);
    differs("/exhaustive", p.exhaustive, out.exhaustive);
    differs("/shard/fingerprint", p.fingerprint, out.fingerprint);
    // a shard given twice: a rerun, counted once if it found the same, else two different answers
    if (const auto j = first_with_shard(parts, i); j < i) {
      if (to_json(p) != to_json(parts[j]))
        throw SpecError(sources[i], "/shard/index",
                        fmt::format("shard {} of {} appears twice, with different answers (also {})",
                                    p.shard_indices.front(), out.shards, sources[j]));
      continue;
    }
    for (const int s : p.shard_indices) out.shard_indices.push_back(s);
    out.enumerated += p.enumerated;
    out.invalid += p.invalid;
    out.out_of_memory += p.out_of_memory;
    out.candidates += p.candidates;
    out.stats.simulated += p.stats.simulated;
    out.stats.bounded_out += p.stats.bounded_out;
    out.stats.simulated_out_of_memory += p.stats.simulated_out_of_memory;
    out.stats.seconds += p.stats.seconds;
    out.top.insert(out.top.end(), p.top.begin(), p.top.end());
    out.simulated.insert(out.simulated.end(), p.simulated.begin(), p.simulated.end());
    for (const auto& f : p.pruned) add_family(families, f.reason, f.example_index, f.example, f.count);
  }
  std::sort(out.shard_indices.begin(), out.shard_indices.end());
  if (static_cast<int>(out.shard_indices.size()) != out.shards) {
    std::vector<std::string> missing;
    for (int s = 0; s < out.shards; ++s)
      if (!std::binary_search(out.shard_indices.begin(), out.shard_indices.end(), s))
        missing.push_back(fmt::format("{}", s));
    throw SpecError("sweep merge", "",
                    fmt::format("shards {} of {} are missing", fmt::join(missing, ", "), out.shards));
  }
  // every shard is here: the result is the whole sweep's
  out.shards = 1;
  out.shard_indices = {0};
  out.fingerprint.clear();
  std::sort(out.top.begin(), out.top.end(), better);
  if (out.top.size() > out.top_k) out.top.resize(out.top_k);
  std::sort(out.simulated.begin(), out.simulated.end(), [](const Plan& a, const Plan& b) { return a.index < b.index; });
  keep_certain_simulations(out);
  for (auto& [reason, family] : families) out.pruned.push_back(std::move(family));
  sort_families(out.pruned);
  return out;
}

}  // namespace trainsim::search
