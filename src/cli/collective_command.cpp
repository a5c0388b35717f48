#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/cost/cost_model.hpp"
#include "trainsim/report/collective_report.hpp"
#include "trainsim/report/report.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/quantity.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/topo/placement.hpp"

namespace trainsim::cli {
namespace {

struct CollectiveOptions {
  std::string topology;
  std::string op;
  std::string bytes;
  std::string sweep;
  std::string group = "all";
  std::string algorithm = "auto";
  std::string strategy;
  std::string format = "table";
  std::string calibration;
};

// The placement named groups refer to: the given strategy, or tp = one node and dp = the rest.
topo::Placement placement_for(const CollectiveOptions& o, const topo::Topology& topo) {
  spec::StrategySpec s;
  std::string source = "--strategy";
  if (!o.strategy.empty())
    s = spec::load_strategy_spec(o.strategy, source);
  else
    s.tp = topo.devices_per_node();
  const std::int64_t model_parallel = std::int64_t{s.tp} * s.cp * s.pp;
  const std::int64_t devices = s.gpus.value_or(topo.num_devices());
  if (devices > topo.num_devices() || devices % model_parallel != 0)
    throw SpecError(source, "",
                    fmt::format("tp·cp·pp = {} does not divide the {} devices used", model_parallel, devices));
  return topo::Placement::from_strategy(s, s.dp.value_or(devices / model_parallel));
}

cost::Group resolve_group(const CollectiveOptions& o, const topo::Topology& topo, std::string& description) {
  using spec::ParallelDim;
  const std::map<std::string, ParallelDim> named{{"tp", ParallelDim::Tp},
                                                 {"cp", ParallelDim::Cp},
                                                 {"dp", ParallelDim::Dp},
                                                 {"pp", ParallelDim::Pp},
                                                 {"ep", ParallelDim::Ep}};
  if (o.group == "all") {
    description = "all devices";
    cost::Group g;
    for (std::int64_t d = 0; d < topo.num_devices(); ++d) g.devices.push_back({static_cast<std::uint32_t>(d)});
    return g;
  }
  if (const auto it = named.find(o.group); it != named.end()) {
    const auto placement = placement_for(o, topo);
    description = fmt::format("the {} group of rank 0", o.group);
    return cost::Group{placement.group(it->second, 0)};
  }
  description = o.group;
  return cost::Group{topo::parse_device_list(o.group, topo.num_devices(), "--group")};
}

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
  std::vector<Bytes> out;
  for (Bytes b = lo; b <= hi; b = b * 2) out.push_back(b);
  return out;
}

int run(const CollectiveOptions& o) {
  const auto cluster = spec::load_cluster_spec(o.topology);
  const auto topo = topo::Topology::build(cluster);
  cost::AlgorithmRegistry registry;
  cost::register_builtin_algorithms(registry);
  if (o.algorithm != "auto") registry.get(o.algorithm, "--algo");
  report::RunOptions tuned;
  if (!o.calibration.empty()) report::apply_calibration(spec::load_calibration_spec(o.calibration), tuned);
  cost::CostModel model(topo, registry, tuned.collectives);
  report::CollectiveReport r{
      .topology = cluster.name, .op = o.op, .requested_algorithm = o.algorithm, .warnings = cluster.warnings};
  const auto group = resolve_group(o, topo, r.group);
  r.ranks = group.size();
  const auto id = model.intern(group);
  const auto kind = cost::collective_kind_from_name(o.op);
  for (const auto bytes : sizes(o))
    r.rows.push_back({bytes, model.cost(cost::make_collective(kind, bytes), id, o.algorithm, "--group")});
  for (auto& w : model.warnings()) r.warnings.push_back(std::move(w));
  fmt::print("{}", report::render(r, parse_format(o.format)));
  return kOk;
}

}  // namespace

void add_collective_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<CollectiveOptions>();
  auto* cmd = app.add_subcommand("collective", "cost of one collective on a topology (or an nccl-tests-like sweep)");
  cmd->add_option("-t,--topology", o->topology, "topology JSON file")->required();
  cmd->add_option("--op", o->op, "operation")->required()->check(CLI::IsMember(cost::collective_names()));
  cmd->add_option("--bytes", o->bytes, "message size, e.g. 1GiB (nccl-tests convention)");
  cmd->add_option("--sweep", o->sweep, "sizes MIN:MAX, doubling, e.g. 1KiB:8GiB");
  cmd->add_option("--group", o->group, "all, tp, dp, pp, cp, ep (rank 0's group) or devices such as 0-7,16-23");
  cmd->add_option("--algo", o->algorithm, "auto or an algorithm: ring, tree, hier, nvls, sharp, torus, direct");
  cmd->add_option("-s,--strategy", o->strategy, "strategy that defines named groups (default: tp = one node)");
  cmd->add_option("--calibration", o->calibration, "calibration JSON (fitted collectives replace the model)");
  add_format_option(*cmd, o->format);
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

}  // namespace trainsim::cli
