// `goodput`: how long a run really takes once failures, checkpoints and restarts are counted.
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/api/api.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/goodput_format.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::cli {
namespace {

struct GoodputOptions {
  std::string topology;
  std::string workload;
  std::string strategy;
  std::string reliability;
  std::string format = "table";
  std::string checkpoint_interval;
  double tokens = 0;
  double days = 0;
  std::uint64_t seed = 1;
  int samples = 1000;
  TrainingFlags training;
  std::string html;
  bool allow_no_fit = false;
};

int run_goodput(const GoodputOptions& o) {
  api::GoodputRequest request{.topology = {.text = o.topology},
                              .workload = {.text = o.workload},
                              .strategy = {.text = o.strategy},
                              .training = o.training.overrides(),
                              .reliability = o.reliability,
                              .checkpoint_interval = o.checkpoint_interval,
                              .seed = o.seed,
                              .samples = o.samples};
  if (o.tokens != 0) request.tokens = o.tokens;
  if (o.days != 0) request.days = o.days;
  const auto result = api::goodput(request);
  const auto& report = result.report;
  if (!report.fits && !o.allow_no_fit) {
    // a plan that cannot run has no training time: not priced unless asked for
    fmt::print(stderr, "{}; goodput prices only plans that fit (--allow-no-fit prices it anyway)\n",
               report::does_not_fit_text(report.peak_memory, report.device_memory));
    return kDoesNotFit;
  }
  if (!o.html.empty()) html::write_page(o.html, html::goodput_page(report));
  const auto format = parse_format(o.format);
  print_report(report::render(report, format), report.warnings, format);
  if (!report.fits) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "{} (priced anyway: --allow-no-fit)\n",
               report::does_not_fit_text(report.peak_memory, report.device_memory));
  }
  return kOk;
}

}  // namespace

void add_goodput_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<GoodputOptions>();
  auto* cmd = app.add_subcommand(
      "goodput", "training time under failures: interruptions, checkpoints, restarts, ETTR, by Monte Carlo");
  cmd->add_option("-t,--topology", o->topology, "topology JSON file")->required();
  cmd->add_option("-w,--workload", o->workload, "workload JSON file or Hugging Face config (as for run)")->required();
  cmd->add_option("-s,--strategy", o->strategy, "strategy (as for run)")->required();
  cmd->add_option("--reliability", o->reliability,
                  "reliability spec JSON (default: Llama 3 405B's 54 days on 16,384 H100s, Dubey et al. 2024)");
  cmd->add_option("--tokens", o->tokens, "tokens to train (e.g. 15e12)");
  cmd->add_option("--days", o->days, "or: days of wall time to train for");
  cmd->add_option("--checkpoint-interval", o->checkpoint_interval,
                  "training between checkpoints, e.g. 30min (default: the spec's, else Daly's optimum)");
  cmd->add_option("--seed", o->seed, "Monte Carlo seed (the same seed, the same answer)");
  cmd->add_option("--samples", o->samples, "Monte Carlo runs (default 1000)");
  add_training_options(*cmd, o->training);
  add_format_option(*cmd, o->format);
  cmd->add_option("--html", o->html, "write a self-contained HTML page of the report");
  cmd->add_flag("--allow-no-fit", o->allow_no_fit,
                "price a plan whose memory peak exceeds the device's (exit 0, the report says it does not fit); "
                "without it such a plan exits 1 unpriced");
  cmd->footer(
      "Example: trainsim goodput -t topologies/h100-roce-llama3.json -w workloads/llama3-405b.json "
      "-s tp=8,sp=on,pp=16,zero=2,first_stage_layers=7,last_stage_layers=7,gpus=16384 --days 54");
  cmd->callback([o, &action] { action = [o] { return run_goodput(*o); }; });
}

}  // namespace trainsim::cli
