#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/driver/collective.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/report/collective_report.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/quantity.hpp"

namespace trainsim::cli {
namespace {

struct CollectiveOptions {
  std::string topology;
  std::string bytes;
  std::string sweep;
  std::string format = "table";
  std::string calibration;
  driver::CollectiveQuery query;
};

std::vector<Bytes> sizes(const CollectiveOptions& o) {
  if (o.sweep.empty()) {
    if (o.bytes.empty()) throw SpecError("command line", "", "give --bytes SIZE or --sweep MIN:MAX");
    return {spec::parse_bytes_option(o.bytes, "--bytes")};
  }
  const auto colon = o.sweep.find(':');
  if (colon == std::string::npos) throw SpecError("--sweep", "", fmt::format("\"{}\" is not MIN:MAX", o.sweep));
  const Bytes lo = spec::parse_bytes_option(o.sweep.substr(0, colon), "--sweep");
  const Bytes hi = spec::parse_bytes_option(o.sweep.substr(colon + 1), "--sweep");
  if (hi < lo) throw SpecError("--sweep", "", fmt::format("\"{}\" runs backwards", o.sweep));
  return driver::doubling_sizes(lo, hi);
}

int run(CollectiveOptions o) {
  const auto cluster = spec::load_cluster_spec(o.topology);
  // the device's fitted collective parameters, then the calibration: as run resolves them
  std::optional<spec::CalibrationSpec> calibration;
  if (!o.calibration.empty()) calibration = spec::load_calibration_spec(o.calibration);
  const auto tunables = driver::resolve_tunables(cluster, calibration ? &*calibration : nullptr).values;
  o.query.sizes = sizes(o);
  const auto format = parse_format(o.format);
  const auto report = driver::run_collective(cluster, o.query, tunables);
  print_report(report::render(report, format), report.warnings, format);
  return kOk;
}

}  // namespace

void add_collective_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<CollectiveOptions>();
  auto& q = o->query;
  auto* cmd = app.add_subcommand("collective", "cost of one collective on a topology (or an nccl-tests-like sweep)");
  cmd->footer("Example: trainsim collective -t topologies/dgx-h100-superpod.json --op all_reduce --group 0-7 --sweep 8:8G");
  cmd->add_option("-t,--topology", o->topology, "topology JSON file")->required();
  cmd->add_option("--op", q.op, "operation")->required()->check(CLI::IsMember(cost::collective_names()));
  cmd->add_option("--bytes", o->bytes, "message size, e.g. 1GiB (nccl-tests convention)");
  cmd->add_option("--sweep", o->sweep, "sizes MIN:MAX, doubling, e.g. 1KiB:8GiB");
  cmd->add_option("--group", q.group, "all, tp, dp, pp, cp, ep (rank 0's group) or devices such as 0-7,16-23");
  cmd->add_option("--algo", q.algorithm, "auto or an algorithm: ring, tree, hier, nvls, sharp, torus, direct");
  cmd->add_option("-s,--strategy", q.strategy, "strategy that defines named groups (default: tp = one node)");
  cmd->add_option("--calibration", o->calibration, "calibration JSON (fitted collectives replace the model)");
  add_format_option(*cmd, o->format);
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

}  // namespace trainsim::cli
