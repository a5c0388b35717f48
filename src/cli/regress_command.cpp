#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/report/regress.hpp"

namespace trainsim::cli {
namespace {

struct RegressOptions {
  std::string directory;
  bool update = false;
  unsigned threads = 0;
  std::string format = "table";
};

int run(const RegressOptions& o) {
  const auto results = report::run_regression(o.directory, {.update = o.update, .threads = o.threads});
  if (o.format == "markdown")
    fmt::print("{}", report::regress_markdown(results));
  else
    fmt::print("{}", report::regress_table(results));
  return report::all_passed(results) ? kOk : kDoesNotFit;
}

}  // namespace

void add_regress_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<RegressOptions>();
  auto* cmd = app.add_subcommand("regress", "recompute every case under a directory and compare with expectations");
  cmd->footer("Example: trainsim regress results/");
  cmd->add_option("directory", o->directory, "directory of cases, e.g. results/")->required();
  cmd->add_flag("--update", o->update, "rewrite the predicted values (never the measured ones) with today's output");
  cmd->add_option("--threads", o->threads, "cases computed in parallel (default: all cores)");
  cmd->add_option("--format", o->format, "table or markdown (docs/validation.md)")
      ->check(CLI::IsMember({"table", "markdown"}));
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

}  // namespace trainsim::cli
