#include "trainsim/driver/goodput.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "trainsim/model/memory.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/random.hpp"

namespace trainsim::driver {
namespace {

Percentiles percentiles(const std::vector<double>& values) {
  return {percentile(values, 0.1), percentile(values, 0.5), percentile(values, 0.9)};
}

// The Monte Carlo runs (sample i on seed + i): means and percentiles into the report.
void monte_carlo(GoodputReport& r, const GoodputRequest& request) {
  r.samples = request.samples;
  r.seed = request.seed;
  std::vector<double> walls;
  std::vector<double> tokens;
  std::vector<double> by_class(r.model.classes.size(), 0.0);
  double ettr = 0;
  for (int i = 0; i < request.samples; ++i) {
    const auto o = model::simulate_run(r.model, r.work_s, r.horizon_s.value_or(std::numeric_limits<double>::infinity()),
                                       request.seed + static_cast<std::uint64_t>(i));
    walls.push_back(o.wall_s);
    tokens.push_back(o.work_s / r.step_s * r.tokens_per_step);
    ettr += o.work_s / o.wall_s;
    r.interruptions += static_cast<double>(o.interruptions);
    r.checkpoint_overhead_s += o.checkpoint_s;
    r.lost_s += o.lost_s;
    r.restart_total_s += o.restart_s;
    r.waiting_s += o.waiting_s;
    for (std::size_t c = 0; c < by_class.size(); ++c) by_class[c] += static_cast<double>(o.by_class[c]);
  }
  const double n = request.samples;
  for (auto* mean : {&r.interruptions, &r.checkpoint_overhead_s, &r.lost_s, &r.restart_total_s, &r.waiting_s})
    *mean /= n;
  for (const auto w : walls) r.wall_s += w / n;
  for (const auto t : tokens) r.tokens += t / n;
  r.ettr = ettr / n;
  r.wall = percentiles(walls);
  r.tokens_trained = percentiles(tokens);
  for (std::size_t c = 0; c < by_class.size(); ++c)
    r.interruptions_by_cause.emplace_back(r.model.classes[c].cause, by_class[c] / n);
}

// What the command line asks, in range.
void check_request(const GoodputRequest& request) {
  if (request.tokens.has_value() == request.days.has_value())
    throw SpecError("command line", "", "give --tokens N (what to train) or --days D (how long to train), not both");
  if (request.tokens && !(*request.tokens >= 1 && *request.tokens <= 1e18))
    throw SpecError("--tokens", "", fmt::format("{} is not a token count in [1, 1e18]", *request.tokens));
  if (request.days && !(*request.days > 0 && *request.days <= 3650))
    throw SpecError("--days", "", fmt::format("{} is not a duration in days in (0, 3650]", *request.days));
  if (request.samples < 1 || request.samples > 1'000'000)
    throw SpecError("--samples", "", fmt::format("{} is not a sample count in [1, 1000000]", request.samples));
}

// The Monte Carlo runs event by event (each failure, restart attempt and checkpoint): what it is
// asked must end in a bounded number of them, or the command would not end at all. A job that
// makes almost no progress is answered with a warning saying why.
constexpr double kMaxYears = 100;
constexpr double kMaxEvents = 1e9;  // over all samples

void check_progress(GoodputReport& r, const spec::ReliabilitySpec& reliability, const GoodputRequest& request) {
  constexpr double kYear = 365.25 * 86400;
  const double mtbf = r.model.mtbf_s();
  if (request.tokens && r.work_s > kMaxYears * kYear)
    throw SpecError("--tokens", "",
                    fmt::format("{:g} tokens take {:.3g} years of failure-free training at {:.4g} s per step of {:g} "
                                "tokens; goodput simulates runs of at most {:.0f} years",
                                *request.tokens, r.work_s / kYear, r.step_s, r.tokens_per_step, kMaxYears));
  // a restart completes with probability e^(−restart/MTBF), a checkpoint interval likewise
  const double wall = request.tokens ? r.closed_wall_s : *r.horizon_s;
  const double events = (std::isfinite(wall) ? wall : std::numeric_limits<double>::infinity()) *
                        (1 / mtbf + 1 / r.model.interval_s) * request.samples;
  if (!(events <= kMaxEvents))
    throw SpecError(
        reliability.source, "",
        fmt::format(
            "the job cannot make progress in bounded time: a restart takes {:.4g} s and a "
            "checkpoint interval and its save {:.4g} s against the job's MTBF of {:.4g} s, so {} would take about "
            "{:.3g} failures and checkpoints over {} samples (at most {:.0e}); check the failure "
            "rates, or ask for fewer --samples",
            r.model.restart_s, r.model.interval_s + r.model.checkpoint_s, mtbf,
            request.tokens ? fmt::format("{:g} tokens", *request.tokens) : fmt::format("{:g} days", *request.days),
            events, request.samples, kMaxEvents));
  if (r.closed_ettr < 0.01)
    r.warnings.push_back(
        fmt::format("the job makes almost no progress: ETTR {:.2g}% (closed form), a restart of {:.4g} s "
                    "and a checkpoint interval of {:.4g} s against an MTBF of {:.4g} s",
                    r.closed_ettr * 100, r.model.restart_s, r.model.interval_s, mtbf));
}

// The rack's spare-tray policy: the job's domains, each with its spare trays idle beside the job. A
// strategy's segment has already chosen the trays the job takes: the spares are among the rest.
void set_spare_trays(GoodputReport& r, const spec::Job& job, const spec::ReliabilitySpec& reliability) {
  const int k = reliability.spare_trays_per_domain;
  if (k == 0) return;
  const auto& c = job.cluster;
  const int host = c.host_devices();
  const int domain = c.node.domain_devices();
  if (std::holds_alternative<spec::TorusNetwork>(c.network) || domain <= host)
    throw SpecError(reliability.source, "/spare_trays_per_domain",
                    fmt::format("topology {} has no scale-up domain of several hosts ({} devices per domain, {} per "
                                "host): spare trays keep a domain whole, use spare_nodes",
                                c.name, domain, host));
  if (job.strategy.segment && k > c.node.idle_hosts)
    throw SpecError(reliability.source, "/spare_trays_per_domain",
                    fmt::format("{} spare trays per domain, but the strategy's segment={} leaves {} of each domain's "
                                "{} trays idle",
                                k, *job.strategy.segment, c.node.idle_hosts, domain / host));
  const int used = job.strategy.segment ? c.node.devices : domain - k * host;
  if (used <= 0)
    throw SpecError(
        reliability.source, "/spare_trays_per_domain",
        fmt::format("{} spare trays of {} devices leave nothing of a {}-device domain for the job", k, host, domain));
  r.model.spare_trays_per_domain = k;
  r.model.spare_domains = reliability.spare_domains;
  r.model.domains = (job.gpus + used - 1) / used;
  r.domain_devices_used = used;
}

std::string spares_in_words(const GoodputReport& r, const spec::ReliabilitySpec& reliability) {
  if (reliability.repair_s <= 0) return "failed nodes are replaced at once (no repair time given)";
  if (r.model.spare_trays_per_domain == 0)
    return fmt::format("{} spare nodes; a failed node is back after {:.1f} h", reliability.spare_nodes,
                       reliability.repair_s / 3600);
  return fmt::format(
      "{} spare trays in each of the job's {} scale-up domains ({} of {} devices each run the job), "
      "{} spare domains; a failed tray is back after {:.1f} h",
      r.model.spare_trays_per_domain, r.model.domains, r.domain_devices_used, r.job->cluster.node.domain_devices(),
      r.model.spare_domains, reliability.repair_s / 3600);
}

// Every figure in force, in words.
std::vector<std::string> assumptions(const GoodputReport& r, const spec::ReliabilitySpec& reliability,
                                     const GoodputRequest& request) {
  const auto& job = *r.job;
  const auto& k = reliability.checkpoint;
  const double mtbf = r.model.mtbf_s();
  return {fmt::format("failures: {} causes from \"{}\", {:.3g} per hour for {} GPUs on {} nodes (MTBF {:.2f} h)",
                      r.model.classes.size(), reliability.name, 3600 / mtbf, job.gpus, r.nodes, mtbf / 3600),
          fmt::format("checkpoint: {:.3g} GB of weights and optimizer state, written in {:.1f} s, loaded in {:.1f} s; "
                      "training stalls {:.1f} s per save{}",
                      r.checkpoint_bytes / 1e9, r.checkpoint_write_s, r.checkpoint_load_s, r.model.checkpoint_s,
                      k.asynchronous ? " (asynchronous: the copy to host memory)" : ""),
          fmt::format("checkpoint interval {:.0f} s ({:.0f} steps){}", r.model.interval_s,
                      r.model.interval_s / r.step_s, r.interval_optimal ? ", Daly's optimum" : ""),
          fmt::format("restart {:.0f} s: detection {:.0f} s, rescheduling {:.0f} s, initialization {:.0f} s, loading "
                      "{:.1f} s",
                      r.model.restart_s, reliability.restart.detection_s, reliability.restart.rescheduling_s,
                      reliability.restart.initialization_s, r.checkpoint_load_s),
          spares_in_words(r, reliability),
          fmt::format("{} Monte Carlo samples from seed {}", request.samples, request.seed)};
}

}  // namespace

double GoodputReport::gpu_hours() const {
  return static_cast<double>(job->gpus) * wall_s / 3600;
}

GoodputReport build_goodput_report(const spec::Job& job, const spec::ReliabilitySpec& reliability,
                                   const GoodputRequest& request, const RunOptions& options) {
  check_request(request);
  GoodputReport r;
  r.job = &job;
  r.reliability = reliability.name;
  const auto run = build_run_report(job, options);
  r.step_s = run.simulation->step_time_s;
  r.warnings = run.warnings;
  r.fits = run.fits;
  r.memory_at_risk = run.memory_at_risk;
  r.peak_memory = run.peak_memory;
  r.device_memory = run.device_memory;
  r.tokens_per_step =
      static_cast<double>(job.workload.training.global_batch) * static_cast<double>(job.workload.training.seq_len);
  // a node failure takes out one host (an NVL72 compute tray of 4 GPUs, a server of 8), not the
  // whole scale-up domain
  r.nodes = (job.gpus + job.cluster.host_devices() - 1) / job.cluster.host_devices();

  // failures of the job's GPUs and nodes
  for (const auto& c : reliability.causes) {
    const double units = c.per == spec::FailureUnit::Gpu    ? static_cast<double>(job.gpus)
                         : c.per == spec::FailureUnit::Node ? static_cast<double>(r.nodes)
                                                            : 1.0;
    if (c.rate_per_unit_hour > 0)
      r.model.classes.push_back({c.cause, c.rate_per_unit_hour * units / 3600, c.replaces_node});
  }
  if (r.model.classes.empty()) throw SpecError(reliability.source, "/failures", "every failure rate is zero");

  // the checkpoint: each parameter's training copy and optimizer state, once, written in parallel
  // by every rank (distributed checkpointing spreads replicated state over the replicas)
  const auto per_param = model::state_bytes_per_param(job.workload.training.dtype, job.workload.training.optimizer);
  r.checkpoint_bytes = model::count_params(job.workload.model, job.workload.training.seq_len).total() *
                       (per_param.weights + per_param.optimizer);
  const auto& k = reliability.checkpoint;
  const double per_node = r.checkpoint_bytes / static_cast<double>(r.nodes);
  const auto transfer = [&](double aggregate, double node) {
    return std::max(r.checkpoint_bytes / aggregate, node > 0 ? per_node / node : 0.0);
  };
  r.checkpoint_write_s = transfer(k.write_bandwidth, k.node_write_bandwidth);
  r.checkpoint_load_s = transfer(k.read_bandwidth, k.node_read_bandwidth);
  r.model.checkpoint_s = k.asynchronous ? r.checkpoint_bytes / static_cast<double>(job.gpus) / k.host_copy_bandwidth
                                        : r.checkpoint_write_s;
  r.model.restart_s = reliability.restart.detection_s + reliability.restart.rescheduling_s +
                      reliability.restart.initialization_s + r.checkpoint_load_s;
  r.model.spare_nodes = reliability.spare_nodes;
  r.model.repair_s = reliability.repair_s;
  set_spare_trays(r, job, reliability);
  const double mtbf = r.model.mtbf_s();
  if (const auto interval = request.interval_s ? request.interval_s : k.interval_s) {
    r.model.interval_s = *interval;
  } else {
    r.model.interval_s = std::max(model::daly_interval(r.model.checkpoint_s, mtbf), r.step_s);
    r.interval_optimal = true;
  }
  // a save happens between steps: the interval is a whole number of steps
  r.model.interval_s = std::max(1.0, std::round(r.model.interval_s / r.step_s)) * r.step_s;

  // closed form
  const double ratio = r.model.interval_s / model::expected_wall_time(r.model.interval_s, r.model.interval_s,
                                                                      r.model.checkpoint_s, r.model.restart_s, mtbf);
  r.closed_ettr = ratio;
  if (request.tokens) {
    r.work_s = std::ceil(*request.tokens / r.tokens_per_step) * r.step_s;
    r.closed_wall_s = r.work_s / ratio;
  } else {
    r.horizon_s = *request.days * 86400;
    r.work_s = std::numeric_limits<double>::infinity();
    r.closed_wall_s = *r.horizon_s;
  }

  check_progress(r, reliability, request);
  monte_carlo(r, request);
  r.assumptions = assumptions(r, reliability, request);
  return r;
}

}  // namespace trainsim::driver
