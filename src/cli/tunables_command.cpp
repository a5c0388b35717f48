// `trainsim tunables`: the parameters of the kernel, collective and memory models in force for a
// cluster (its device's fitted values) and a calibration file, and where each comes from.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/report/tunables_report.hpp"

namespace trainsim::cli {
namespace {

struct TunablesOptions {
  std::string topology;
  std::string calibration;
  std::string format = "table";
};

int run(const TunablesOptions& o) {
  spec::ClusterSpec cluster;
  if (!o.topology.empty()) cluster = spec::load_cluster_spec(o.topology);
  std::optional<spec::CalibrationSpec> calibration;
  if (!o.calibration.empty()) calibration = spec::load_calibration_spec(o.calibration);
  const auto resolved = driver::resolve_tunables(cluster, calibration ? &*calibration : nullptr);
  if (o.format == "markdown")
    fmt::print("{}", report::to_markdown(resolved));
  else
    fmt::print("{}", report::render(resolved, parse_format(o.format)));
  return kOk;
}

}  // namespace

void add_tunables_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<TunablesOptions>();
  auto* cmd =
      app.add_subcommand("tunables", "the kernel, collective and memory parameters in force, and their sources");
  cmd->footer("Example: trainsim tunables -t topologies/dgx-h100-superpod.json");
  cmd->add_option("-t,--topology", o->topology, "topology JSON file (its device's fitted parameters)");
  cmd->add_option("--calibration", o->calibration, "calibration JSON overriding them");
  cmd->add_option("--format", o->format, "table, json, csv or markdown (the table of docs/model.md)")
      ->check(CLI::IsMember({"table", "json", "csv", "markdown"}));
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

}  // namespace trainsim::cli
