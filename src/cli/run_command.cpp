#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/report/perfetto.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::cli {
namespace {

struct RunOptions {
  std::string topology;
  std::string workload;
  std::string strategy;
  std::string format = "table";
  std::string timeline;
  std::string calibration;
  double memory_headroom = driver::RunOptions::kDefaultMemoryHeadroom;
  bool full = false;
  bool analytic = false;
  TrainingFlags training;
};

int run(const RunOptions& o) {
  spec::Sources sources{.topology = o.topology, .workload = o.workload, .strategy = {}};
  auto cluster = spec::load_cluster_spec(o.topology);
  auto workload = spec::load_workload_spec(o.workload, o.training.overrides());
  auto strategy = spec::load_strategy_spec(o.strategy, sources.strategy);
  const spec::Job job = spec::resolve_job(std::move(cluster), std::move(workload), std::move(strategy), sources);
  driver::RunOptions options;
  options.simulate = !o.analytic;
  options.full = o.full;
  options.memory_headroom = o.memory_headroom;
  if (!o.calibration.empty()) options.calibration = spec::load_calibration_spec(o.calibration);
  const auto report = driver::build_run_report(job, options);
  if (!o.timeline.empty() && report.step)
    report::write_perfetto(report.step->lowered, report.step->timeline, o.timeline);
  const auto format = parse_format(o.format);
  print_report(report::render(report, format), report.warnings, format);
  if (!report.fits) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "does not fit: peak {} per GPU exceeds the device's {}\n",
               report::human_bytes(Bytes{report.peak_memory}), report::human_bytes(report.device_memory));
    return kDoesNotFit;
  }
  return kOk;
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "simulate one training step of a workload on a cluster");
  cmd->add_option("-t,--topology", options->topology, "topology JSON file")->required();
  cmd->add_option("-w,--workload", options->workload,
                  "workload JSON file, a Hugging Face config.json, or {\"hf_config\": PATH, \"training\": {...}}")
      ->required();
  add_training_options(*cmd, options->training);
  cmd->add_option("-s,--strategy", options->strategy, "strategy JSON file or inline list such as tp=8,pp=2,dp=4")
      ->required();
  add_format_option(*cmd, options->format);
  cmd->add_option("--timeline", options->timeline, "write the simulated step as Chrome/Perfetto trace events");
  cmd->add_option("--calibration", options->calibration, "calibration JSON overriding the model's defaults");
  cmd->add_flag("--full", options->full, "simulate every rank instead of one per pipeline stage");
  cmd->add_option("--memory-headroom", options->memory_headroom,
                  "share of device memory kept free (allocator fragmentation, workspaces); a peak within it is "
                  "reported at risk (default 0.05)")
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_flag("--analytic", options->analytic, "skip the simulation: parameters, FLOPs and analytic memory only");
  cmd->callback([options, &action] { action = [options] { return run(*options); }; });
}

}  // namespace trainsim::cli
