#include "trainsim/api/api.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/cost/collective.hpp"
#include "trainsim/driver/replay.hpp"
#include "trainsim/model/memory.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/launch_config.hpp"
#include "trainsim/spec/quantity.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/reliability_spec.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::api {
namespace {

constexpr std::string_view kMegatronPrefix = "megatron:";

spec::StrategySpec load_strategy(const SpecInput& in, std::string& source) {
  if (in.value) {
    source = in.label;
    return spec::read_strategy_spec(*in.value, in.label);
  }
  return spec::load_strategy_spec(in.text, source);
}

std::string shortened(const std::string& text) {
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// The launch configuration a run was given, if any: a strategy "megatron:ARGS", a Megatron-LM
// launch file or a TorchTitan TOML.
std::optional<spec::LaunchConfig> launch_config(const RunRequest& r) {
  std::optional<spec::LaunchConfig> launch;
  const auto add = [&](spec::LaunchConfig config) {
    if (launch)
      throw SpecError("command line", "",
                      fmt::format("{} and {}: give one launch configuration", launch->source, config.source));
    launch = std::move(config);
  };
  if (!r.strategy.value && r.strategy.text.starts_with(kMegatronPrefix)) {
    const auto args = r.strategy.text.substr(kMegatronPrefix.size());
    add(spec::read_megatron_args(args, fmt::format("-s megatron:\"{}\"", shortened(args))));
  }
  if (!r.megatron_args.empty()) add(spec::load_megatron_args(r.megatron_args));
  if (!r.torchtitan.empty()) add(spec::load_torchtitan_toml(r.torchtitan));
  return launch;
}

// The workload and strategy of a run given a launch configuration: the launch's strategy,
// training settings and (without a workload) model; strategy keys and the training overrides fill
// in and win over it, except an override contradicting the launch's sequence or batch.
void resolve_launched(const RunRequest& r, const spec::LaunchConfig& launch, std::int64_t devices,
                      spec::WorkloadSpec& workload, spec::StrategySpec& strategy, spec::Sources& sources) {
  nlohmann::json keys = nlohmann::json::object();
  if (r.strategy.value)
    keys = *r.strategy.value;
  else if (!r.strategy.text.empty() && !r.strategy.text.starts_with(kMegatronPrefix))
    keys = spec::parse_inline_strategy(r.strategy.text, r.strategy.text);
  std::optional<spec::WorkloadSpec> file;
  if (!r.workload.empty()) file = load_workload(r.workload, spec::launch_training(launch, keys, r.training, devices));
  auto launched = spec::resolve_launch(launch, keys, file, devices, r.training);
  workload = std::move(launched.workload);
  strategy = std::move(launched.strategy);
  if (!file) sources.workload = launch.source;
  sources.strategy = launch.source;
}

spec::Job build_job(const SpecInput& topology, const SpecInput& workload_in, const SpecInput& strategy_in,
                    const spec::TrainingOverrides& training) {
  spec::Sources sources{.topology = topology.name(), .workload = workload_in.name(), .strategy = {}};
  auto cluster = load_cluster(topology);
  auto workload = load_workload(workload_in, training);
  auto strategy = load_strategy(strategy_in, sources.strategy);
  auto job = spec::resolve_job(std::move(cluster), std::move(workload), std::move(strategy), sources);
  driver::prepare_job(job, {});
  return job;
}

// "I/N" with 0 ≤ I < N.
std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  int index = -1;
  int count = 0;
  const auto number = [](std::string_view s, int& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), index) ||
      !number(std::string_view(text).substr(slash + 1), count) || count < 1 || count > (1 << 20) || index < 0 ||
      index >= count)
    throw SpecError("--shard", "", fmt::format("\"{}\" is not I/N with 0 ≤ I < N (for example 0/4)", text));
  return {index, count};
}

// What a spec holds, for the fingerprint: a file's bytes, or a value's JSON.
std::string spec_bytes(const SpecInput& in) {
  if (in.value) return in.value->dump();
  std::ifstream file(in.text, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// 64-bit FNV-1a of everything that decides a sweep's answer: its inputs' bytes and its options. A
// shard records it; `sweep merge` refuses shards whose fingerprints differ.
std::string sweep_fingerprint(const SweepRequest& r) {
  std::string text;
  const auto add = [&](std::string_view part) {
    text += part;
    text += '\0';
  };
  add(spec_bytes(r.topology));
  add(spec_bytes(r.workload));
  add(r.calibration.empty() ? "" : spec_bytes({.text = r.calibration}));
  add(r.fix);
  add(r.rank_by);
  add(fmt::format("{} {} {} {}", r.top, r.memory_headroom, r.exhaustive, fmt::join(r.gpus, ",")));
  const auto& t = r.training;
  add(fmt::format("{} {} {} {}", t.seq_len.value_or(0), t.global_batch.value_or(0), t.dtype.value_or(""),
                  t.optimizer.value_or("")));
  std::uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

std::vector<Bytes> collective_sizes(const CollectiveRequest& r) {
  if (r.sweep.empty()) {
    if (r.bytes.empty()) throw SpecError("command line", "", "give --bytes SIZE or --sweep MIN:MAX");
    return {spec::parse_bytes_option(r.bytes, "--bytes")};
  }
  const auto colon = r.sweep.find(':');
  if (colon == std::string::npos) throw SpecError("--sweep", "", fmt::format("\"{}\" is not MIN:MAX", r.sweep));
  const Bytes lo = spec::parse_bytes_option(r.sweep.substr(0, colon), "--sweep");
  const Bytes hi = spec::parse_bytes_option(r.sweep.substr(colon + 1), "--sweep");
  if (hi < lo) throw SpecError("--sweep", "", fmt::format("\"{}\" runs backwards", r.sweep));
  return driver::doubling_sizes(lo, hi);
}

}  // namespace

spec::ClusterSpec load_cluster(const SpecInput& in) {
  if (in.value) return spec::read_cluster_spec(*in.value, in.label);
  return spec::load_cluster_spec(in.text);
}

spec::WorkloadSpec load_workload(const SpecInput& in, const spec::TrainingOverrides& overrides) {
  if (in.value) return spec::workload_from_json(*in.value, in.label, overrides);
  return spec::load_workload_spec(in.text, overrides);
}

RunResult run(const RunRequest& r) {
  spec::Sources sources{.topology = r.topology.name(), .workload = r.workload.name(), .strategy = {}};
  auto cluster = load_cluster(r.topology);
  spec::WorkloadSpec workload;
  spec::StrategySpec strategy;
  if (const auto launch = launch_config(r)) {
    resolve_launched(r, *launch, cluster.num_devices(), workload, strategy, sources);
  } else {
    if (r.workload.empty())
      throw SpecError(
          "command line", "",
          "run needs -w WORKLOAD (or a launch configuration: --megatron-args, --torchtitan, -s megatron:ARGS)");
    if (r.strategy.empty())
      throw SpecError("command line", "", "run needs -s STRATEGY (or --megatron-args FILE, --torchtitan FILE)");
    workload = load_workload(r.workload, r.training);
    strategy = load_strategy(r.strategy, sources.strategy);
  }
  if (r.analytic && r.timeline)
    throw SpecError("command line", "--timeline",
                    "the timeline (and the memory over the step) needs a simulated step; --analytic skips the "
                    "simulation (drop one of them)");
  if (r.analytic && r.chakra)
    throw SpecError("command line", "--chakra",
                    "a Chakra export is the simulated step's task graph; --analytic skips the simulation (drop one "
                    "of them)");
  RunResult result;
  result.job = std::make_unique<spec::Job>(
      spec::resolve_job(std::move(cluster), std::move(workload), std::move(strategy), sources));
  driver::RunOptions options;
  options.simulate = !r.analytic;
  options.full = r.full;
  options.memory_headroom = r.memory_headroom;
  if (!r.perturb.empty()) options.perturb = spec::load_perturb_spec(r.perturb);
  options.steps = r.steps;
  options.record_work = r.chakra;
  if (!r.calibration.empty()) options.calibration = spec::load_calibration_spec(r.calibration);
  driver::prepare_job(*result.job, options);
  result.report = driver::build_run_report(*result.job, options);
  return result;
}

search::SweepResult sweep(const SweepRequest& r) {
  if (r.topology.empty() || r.workload.empty())
    throw SpecError("command line", "", "sweep needs --topology and --workload (or: sweep merge FILE...)");
  const auto cluster = load_cluster(r.topology);
  const auto workload = load_workload(r.workload, r.training);
  search::SweepOptions options;
  if (!r.fix.empty()) options.fixed = spec::parse_inline_strategy(r.fix, "--fix");
  const auto allocated = search::allocated_cluster(cluster, options);
  for (const auto g : r.gpus)
    if (g < 1 || g > allocated.num_devices())
      throw SpecError(
          "--gpus", "",
          fmt::format("{} is not a device count in [1, {}] of topology \"{}\"{}", g, allocated.num_devices(),
                      cluster.name, allocated.node.idle_hosts > 0 ? " under the pinned segment" : ""));
  options.gpus = r.gpus;
  options.objective = search::objective_from_name(r.rank_by);
  if (r.top < 1) throw SpecError("--top", "", "must be at least 1");
  options.top = r.top;
  options.threads = r.threads;
  if (!r.shard.empty()) std::tie(options.shard, options.shards) = parse_shard(r.shard);
  options.exhaustive = r.exhaustive;
  if (!r.calibration.empty()) options.run.calibration = spec::load_calibration_spec(r.calibration);
  options.run.memory_headroom = r.memory_headroom;
  options.progress = r.progress;
  if (options.shards > 1) options.fingerprint = sweep_fingerprint(r);
  return search::sweep(cluster, workload, spec::Sources{r.topology.name(), r.workload.name(), "--fix"}, options);
}

search::SweepResult merge_sweeps(const std::vector<std::string>& files) {
  std::vector<search::SweepResult> parts;
  for (const auto& file : files) parts.push_back(search::sweep_from_json(spec::load_json_file(file), file));
  return search::merge_sweeps(std::move(parts), files);
}

driver::CollectiveReport collective(const CollectiveRequest& r) {
  const auto cluster = load_cluster(r.topology);
  // the device's fitted collective parameters, then the calibration: as run resolves them
  std::optional<spec::CalibrationSpec> calibration;
  if (!r.calibration.empty()) calibration = spec::load_calibration_spec(r.calibration);
  const auto tunables = driver::resolve_tunables(cluster, calibration ? &*calibration : nullptr).values;
  driver::CollectiveQuery query{.op = r.op, .group = r.group, .algorithm = r.algorithm, .strategy = r.strategy};
  const auto& names = cost::collective_names();
  if (std::find(names.begin(), names.end(), r.op) == names.end())
    throw SpecError("--op", "",
                    fmt::format("unknown collective \"{}\"; expected one of: {}", r.op, fmt::join(names, ", ")));
  query.sizes = collective_sizes(r);
  return driver::run_collective(cluster, query, tunables);
}

GoodputResult goodput(const GoodputRequest& r) {
  GoodputResult result;
  result.job = std::make_unique<spec::Job>(build_job(r.topology, r.workload, r.strategy, r.training));
  const auto reliability =
      spec::load_reliability_spec(r.reliability.empty() ? spec::default_reliability_path() : r.reliability);
  driver::GoodputRequest request{.tokens = r.tokens, .days = r.days, .seed = r.seed, .samples = r.samples};
  if (!r.checkpoint_interval.empty()) {
    const auto parsed = spec::parse_quantity(r.checkpoint_interval, spec::QuantityKind::Duration);
    if (const auto* err = std::get_if<spec::QuantityError>(&parsed))
      throw SpecError("--checkpoint-interval", "", err->message);
    const double s = std::get<double>(parsed);
    if (!(s >= 1 && s <= 1e8)) throw SpecError("--checkpoint-interval", "", fmt::format("{} s is out of range", s));
    request.interval_s = s;
  }
  result.report = driver::build_goodput_report(*result.job, reliability, request);
  return result;
}

std::vector<trace::RankTrace> read_traces(const std::vector<std::string>& paths) {
  std::vector<trace::RankTrace> out;
  for (const auto& p : paths) out.push_back(trace::read_trace(p));
  return out;
}

namespace {

// The job the traces recorded, simulated, against the allocator's recorded peaks; with the
// model's reserve at its peak beside the share of it memory.fragmentation gives (to fit the share).
struct ModelledMemory {
  trace::MemoryComparison comparison;
  spec::ClusterSpec cluster;  // the part of -t the job is given (a segment's hosts of each node)
  double transient = 0;    // the peak stage's activations and buffers (the share's base)
  double loss_cached = 0;  // of its reserve, the loss's cached block
};

ModelledMemory compare_memory(const std::vector<trace::RankTrace>& traces, const std::string& topology,
                              const std::string& workload, const std::string& strategy) {
  if (workload.empty() != strategy.empty())
    throw SpecError(workload.empty() ? "--workload" : "--strategy", "",
                    "the job the traces recorded needs both -w WORKLOAD and -s STRATEGY");
  if (topology.empty()) throw SpecError("--topology", "", "the job the traces recorded needs -t TOPOLOGY too");
  const auto peaks = trace::recorded_memory_peaks(traces);
  if (!peaks)
    throw SpecError(traces.front().path, "",
                    "no [memory] events: record with torch.profiler.profile(profile_memory=True) to compare the "
                    "model's peak memory (-w, -s)");
  const auto result =
      run({.topology = {.text = topology}, .workload = {.text = workload}, .strategy = {.text = strategy}});
  const auto& report = result.report;
  const auto runtime = report.runtime_memory.count;
  ModelledMemory out{.comparison = {.recorded_allocated = peaks->first,
                                    .recorded_reserved = peaks->second,
                                    .model_live = report.live_peak_memory - runtime,
                                    .model_reserved = report.peak_memory - runtime},
                     .cluster = result.job->cluster};
  if (report.simulation) {
    const auto& stages = report.simulation->per_stage;
    const auto peak = std::max_element(stages.begin(), stages.end(),
                                       [](const auto& a, const auto& b) { return a.peak_memory < b.peak_memory; });
    if (peak != stages.end()) {
      out.transient =
          static_cast<double>(peak->memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Activations)] +
                              peak->memory_at_peak[static_cast<std::size_t>(lower::MemoryKind::Buffers)]);
      if (peak->peak_after_loss)
        out.loss_cached = model::loss_cached_bytes(result.job->workload.model, model::gpu_layer_shape(*result.job));
    }
  }
  return out;
}

}  // namespace

trace::TraceReport replay(const ReplayRequest& r) {
  driver::ReplayRequest request{.compute_scale = r.compute_scale, .network_scale = r.network_scale};
  if (!r.topology.empty()) request.cluster = spec::load_cluster_spec(r.topology);
  if (!r.calibration.empty()) request.calibration = spec::load_calibration_spec(r.calibration);
  const auto traces = read_traces(r.traces);
  if (r.workload.empty() && r.strategy.empty()) return driver::replay(traces, request);
  auto modelled = compare_memory(traces, r.topology, r.workload, r.strategy);
  // -t names the recorded job's cluster; the collectives are costed on the part of it the job is
  // given where the traces hold some
  const bool collectives = std::any_of(traces.begin(), traces.end(), [](const trace::RankTrace& t) {
    return std::any_of(t.gpu.begin(), t.gpu.end(), [](const auto& g) { return g.collective.has_value(); });
  });
  if (collectives)
    request.cluster = std::move(modelled.cluster);
  else
    request.cluster.reset();
  auto report = driver::replay(traces, request);
  report.memory = modelled.comparison;
  return report;
}

trace::ChakraReport replay_chakra(const std::string& dir, const ReplayRequest& r) {
  driver::ReplayRequest request{
      .compute_scale = r.compute_scale, .network_scale = r.network_scale, .cost_compute = r.cost_compute};
  if (!r.topology.empty()) request.cluster = spec::load_cluster_spec(r.topology);
  if (!r.calibration.empty()) request.calibration = spec::load_calibration_spec(r.calibration);
  return driver::replay_chakra(trace::read_chakra_dir(dir), request);
}

trace::CalibrationReport calibrate(const std::vector<std::string>& traces, const std::string& topology,
                                   const std::string& workload, const std::string& strategy) {
  std::optional<spec::ClusterSpec> cluster;
  if (!topology.empty()) cluster = spec::load_cluster_spec(topology);
  const auto recorded = read_traces(traces);
  if (workload.empty() && strategy.empty()) return trace::calibrate(recorded, cluster);
  const auto modelled = compare_memory(recorded, topology, workload, strategy);
  auto report = trace::calibrate(recorded, modelled.cluster, true);
  report.memory = modelled.comparison;
  // the allocator's recorded reserve beyond its live peak, less the loss's cached block, as a share
  // of the memory the step allocates and frees (docs/model.md "What a GPU holds beyond the model")
  const auto& c = modelled.comparison;
  const double reserve = static_cast<double>(c.recorded_reserved - c.recorded_allocated) - modelled.loss_cached;
  if (modelled.transient > 0) {
    const double share = std::clamp(reserve / modelled.transient, 0.0, 1.0);
    report.calibration.values.set("memory", "fragmentation", share);
    report.notes.push_back(fmt::format(
        "memory.fragmentation {:.3f}: the allocator reserved {} beyond its {} live peak ({} of it the loss's cached "
        "block), over the {} the model's peak stage allocates and frees",
        share, report::human_bytes(Bytes{c.recorded_reserved - c.recorded_allocated}),
        report::human_bytes(Bytes{c.recorded_allocated}),
        report::human_bytes(Bytes::saturating_from_double(modelled.loss_cached)),
        report::human_bytes(Bytes::saturating_from_double(modelled.transient))));
  }
  return report;
}

}  // namespace trainsim::api
