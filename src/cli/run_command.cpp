#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/api/api.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/chakra.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/report/perfetto.hpp"
#include "trainsim/util/error.hpp"

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
  bool allow_no_fit = false;
  TrainingFlags training;
  std::string megatron_args;
  std::string torchtitan;
  std::string html;
  std::string perturb;
  std::string chakra;
  int steps = 1;
};

int run(const RunOptions& o) {
  api::RunRequest request{.topology = {.text = o.topology},
                          .workload = {.text = o.workload},
                          .strategy = {.text = o.strategy},
                          .megatron_args = o.megatron_args,
                          .torchtitan = o.torchtitan,
                          .training = o.training.overrides(),
                          .calibration = o.calibration,
                          .perturb = o.perturb,
                          .steps = o.steps,
                          .memory_headroom = o.memory_headroom,
                          .full = o.full,
                          .analytic = o.analytic,
                          .timeline = !o.timeline.empty(),
                          .chakra = !o.chakra.empty()};
  const auto result = api::run(request);
  const auto& report = result.report;
  if (!o.timeline.empty() && report.step)
    report::write_perfetto(report.step->lowered, report.step->timeline, o.timeline);
  if (!o.html.empty()) html::write_page(o.html, html::run_page(report));
  if (!o.chakra.empty() && report.step) {
    const auto e = report::write_chakra(*result.job, report.step->lowered, report.step->timeline, o.chakra);
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr,
               "wrote {} Chakra traces ({} nodes, {} data and {} control dependencies) and comm_group.json to {}\n",
               e.files, e.nodes, e.data_deps, e.ctrl_deps, o.chakra);
  }
  const auto format = parse_format(o.format);
  print_report(report::render(report, format), report.warnings, format);
  if (!report.fits) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    if (o.allow_no_fit) {
      fmt::print(stderr, "{} (priced anyway: --allow-no-fit)\n",
                 report::does_not_fit_text(report.peak_memory, report.device_memory));
      return kOk;
    }
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
  cmd->footer(
      "Example: trainsim run -t topologies/dgx-a100-superpod.json -w workloads/gpt3-175b.json "
      "-s tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3");
  cmd->add_option("-t,--topology", options->topology, "topology JSON file")->required();
  cmd->add_option("-w,--workload", options->workload,
                  "workload JSON file, a Hugging Face config.json, or {\"hf_config\": PATH, \"training\": {...}}");
  add_training_options(*cmd, options->training);
  cmd->add_option("-s,--strategy", options->strategy,
                  "strategy JSON file, inline list such as tp=8,pp=2,dp=4, or megatron:\"ARGS\" (Megatron-LM "
                  "arguments); with a launch file, keys over it");
  cmd->add_option("--megatron-args", options->megatron_args,
                  "a Megatron-LM launch line (pretrain_gpt.py arguments, a torchrun line, backslash-continued)");
  cmd->add_option("--torchtitan", options->torchtitan, "a TorchTitan training TOML");
  add_format_option(*cmd, options->format);
  cmd->add_option("--timeline", options->timeline, "write the simulated step as Chrome/Perfetto trace events");
  cmd->add_option("--html", options->html, "write a self-contained HTML page of the report");
  cmd->add_option("--chakra", options->chakra,
                  "write the simulated step as Chakra execution traces (one .et file per simulated rank) into DIR");
  cmd->add_option("--perturb", options->perturb,
                  "stragglers: slow GPUs and per-step noise (JSON); every rank is then simulated");
  cmd->add_option("--steps", options->steps, "with --perturb: steps to simulate (default 1)");
  cmd->add_option("--calibration", options->calibration, "calibration JSON overriding the model's defaults");
  cmd->add_flag("--full", options->full, "simulate every rank instead of one per pipeline stage");
  cmd->add_option("--memory-headroom", options->memory_headroom,
                  "share of device memory kept free (allocator fragmentation, workspaces); a peak within it is "
                  "reported at risk (default 0.05)")
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_flag("--allow-no-fit", options->allow_no_fit,
                "exit 0 for a plan whose memory peak exceeds the device's (the report still says it does not fit)");
  cmd->add_flag("--analytic", options->analytic, "skip the simulation: parameters, FLOPs and analytic memory only");
  cmd->callback([options, &action] { action = [options] { return run(*options); }; });
}

}  // namespace trainsim::cli
