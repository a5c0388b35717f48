#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/api/api.hpp"
#include "trainsim/report/collective_report.hpp"

namespace trainsim::cli {
namespace {

struct CollectiveOptions {
  std::string format = "table";
  api::CollectiveRequest request;
};

int run(const CollectiveOptions& o) {
  const auto format = parse_format(o.format);
  const auto report = api::collective(o.request);
  print_report(report::render(report, format), report.warnings, format);
  return kOk;
}

}  // namespace

void add_collective_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<CollectiveOptions>();
  auto& q = o->request;
  auto* cmd = app.add_subcommand("collective", "cost of one collective on a topology (or an nccl-tests-like sweep)");
  cmd->footer(
      "Example: trainsim collective -t topologies/dgx-h100-superpod.json --op all_reduce --group 0-7 --sweep 8:8G");
  cmd->add_option("-t,--topology", q.topology.text, "topology JSON file")->required();
  cmd->add_option("--op", q.op, "operation")->required()->check(CLI::IsMember(cost::collective_names()));
  cmd->add_option("--bytes", q.bytes, "message size, e.g. 1GiB (nccl-tests convention)");
  cmd->add_option("--sweep", q.sweep, "sizes MIN:MAX, doubling, e.g. 1KiB:8GiB");
  cmd->add_option("--group", q.group, "all, tp, dp, pp, cp, ep (rank 0's group) or devices such as 0-7,16-23");
  cmd->add_option("--algo", q.algorithm, "auto or an algorithm: ring, tree, hier, nvls, sharp, torus, direct");
  cmd->add_option("-s,--strategy", q.strategy, "strategy that defines named groups (default: tp = one node)");
  cmd->add_option("--calibration", q.calibration, "calibration JSON (fitted collectives replace the model)");
  add_format_option(*cmd, o->format);
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

}  // namespace trainsim::cli
