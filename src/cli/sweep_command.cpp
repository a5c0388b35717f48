#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/api/api.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::cli {
namespace {

struct SweepCommandOptions {
  std::string topology;
  std::string workload;
  std::vector<std::int64_t> gpus;
  std::size_t top = 10;
  unsigned threads = 0;
  std::string format = "table";
  std::string rank_by = "step_time";
  std::string fix;
  std::string shard;
  std::string calibration;
  double memory_headroom = driver::RunOptions::kDefaultMemoryHeadroom;
  bool exhaustive = false;
  bool quiet = false;
  std::vector<std::string> merge_files;
  TrainingFlags training;
  std::string html;
};

// A progress line on stderr when it is a terminal.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}
  void update(std::size_t done, std::size_t at_most) {
    if (!enabled_) return;
    constexpr int kWidth = 30;
    const int filled = at_most ? static_cast<int>(kWidth * done / at_most) : kWidth;
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "\rsimulating [{:<{}}] {} of at most {}", std::string(static_cast<std::size_t>(filled), '#'),
               kWidth, done, at_most);
    std::fflush(stderr);
  }
  void finish() {
    if (enabled_) fmt::print(stderr, "\r{:<80}\r", "");
  }

 private:
  bool enabled_;
};

int run_sweep(const SweepCommandOptions& o) {
  Progress progress(!o.quiet);
  const auto result =
      api::sweep({.topology = {.text = o.topology},
                  .workload = {.text = o.workload},
                  .training = o.training.overrides(),
                  .gpus = o.gpus,
                  .fix = o.fix,
                  .rank_by = o.rank_by,
                  .top = o.top,
                  .threads = o.threads,
                  .shard = o.shard,
                  .calibration = o.calibration,
                  .memory_headroom = o.memory_headroom,
                  .exhaustive = o.exhaustive,
                  .progress = [&](std::size_t done, std::size_t at_most) { progress.update(done, at_most); }});
  progress.finish();
  if (!o.html.empty()) html::write_page(o.html, html::sweep_page(result));
  fmt::print("{}", search::render(result, parse_format(o.format)));
  if (!o.quiet) {
    const auto& s = result.stats;
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr,
               "{} configurations in {:.1f} s ({:.0f} per second); simulated {} of {} candidates ({:.1f} per "
               "second), {} skipped by the compute bound, {} did not fit once simulated\n",
               result.enumerated, s.seconds, static_cast<double>(result.enumerated) / s.seconds, s.simulated,
               result.candidates, static_cast<double>(s.simulated) / s.seconds, s.bounded_out,
               s.simulated_out_of_memory);
  }
  return result.top.empty() ? kDoesNotFit : kOk;
}

int run_merge(const SweepCommandOptions& o) {
  const auto result = api::merge_sweeps(o.merge_files);
  if (!o.html.empty()) html::write_page(o.html, html::sweep_page(result));
  fmt::print("{}", search::render(result, parse_format(o.format)));
  return result.top.empty() ? kDoesNotFit : kOk;
}

}  // namespace

void add_sweep_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<SweepCommandOptions>();
  auto* cmd =
      app.add_subcommand("sweep", "search every strategy of a workload on a cluster and rank the ones that fit");
  cmd->add_option("-t,--topology", o->topology, "topology JSON file");
  cmd->add_option("-w,--workload", o->workload, "workload JSON file or Hugging Face config (as for run)");
  add_training_options(*cmd, o->training);
  cmd->add_option("--gpus", o->gpus, "device counts to try, e.g. 512,1024 (default: every device)")->delimiter(',');
  cmd->add_option("--top", o->top, "plans to list (default 10)");
  cmd->add_option("--threads", o->threads, "threads (default: all cores); the output does not depend on it");
  cmd->add_option("--rank-by", o->rank_by, "step_time (default), tokens_per_s or cost (GPU-hours per million tokens)");
  cmd->add_option("--fix", o->fix, "strategy keys to pin, e.g. tp=8,zero=1");
  cmd->add_option("--shard", o->shard, "run share I of N (0 ≤ I < N) of the space; join with `sweep merge`");
  cmd->add_option("--calibration", o->calibration, "calibration JSON overriding the model's defaults");
  cmd->add_flag("--exhaustive", o->exhaustive, "simulate every candidate that fits (no bound)");
  cmd->add_option("--memory-headroom", o->memory_headroom,
                  "share of device memory kept free; plans whose peak enters it are pruned (default 0.05)")
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_flag("--quiet", o->quiet, "no progress bar or summary on stderr");
  add_format_option(*cmd, o->format);
  cmd->add_option("--html", o->html, "write a self-contained HTML page of the result");
  cmd->require_subcommand(0, 1);
  cmd->footer(
      "Example: trainsim sweep -t topologies/dgx-h100-superpod.json -w workloads/llama3-70b.json --gpus 512 "
      "--top 5");
  auto* merge = cmd->add_subcommand("merge", "join the JSON results of sweep shards into the whole sweep's answer");
  merge->footer("Example: trainsim sweep merge shard-0.json shard-1.json");
  merge->add_option("files", o->merge_files, "shard results (sweep --shard I/N --format json)")->required();
  merge->add_option("--html", o->html, "write a self-contained HTML page of the merged result");
  add_format_option(*merge, o->format);
  merge->callback([o, &action] { action = [o] { return run_merge(*o); }; });
  cmd->callback([o, cmd, &action] {
    if (cmd->got_subcommand("merge")) return;
    action = [o] { return run_sweep(*o); };
  });
}

}  // namespace trainsim::cli
