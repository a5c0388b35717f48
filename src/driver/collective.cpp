#include "trainsim/driver/collective.hpp"

#include <map>

#include <fmt/format.h>

#include "trainsim/driver/cluster_model.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/topo/placement.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::driver {
namespace {

// The placement named groups refer to: the given strategy, or tp = one node and dp = the rest.
topo::Placement placement_for(const CollectiveQuery& q, const topo::Topology& topo) {
  spec::StrategySpec s;
  std::string source = "--strategy";
  if (!q.strategy.empty())
    s = spec::load_strategy_spec(q.strategy, source);
  else
    s.tp = topo.devices_per_node();
  const std::int64_t model_parallel = std::int64_t{s.tp} * s.cp * s.pp;
  const std::int64_t devices = s.gpus.value_or(topo.num_devices());
  if (devices > topo.num_devices() || devices % model_parallel != 0)
    throw SpecError(source, "",
                    fmt::format("tp·cp·pp = {} does not divide the {} devices used", model_parallel, devices));
  return topo::Placement::from_strategy(s, s.dp.value_or(devices / model_parallel));
}

cost::Group resolve_group(const CollectiveQuery& q, const topo::Topology& topo, std::string& description) {
  using spec::ParallelDim;
  const std::map<std::string, ParallelDim> named{{"tp", ParallelDim::Tp},
                                                 {"cp", ParallelDim::Cp},
                                                 {"dp", ParallelDim::Dp},
                                                 {"pp", ParallelDim::Pp},
                                                 {"ep", ParallelDim::Ep}};
  if (q.group == "all") {
    description = "all devices";
    cost::Group g;
    for (std::int64_t d = 0; d < topo.num_devices(); ++d) g.devices.push_back({static_cast<std::uint32_t>(d)});
    return g;
  }
  if (const auto it = named.find(q.group); it != named.end()) {
    const auto placement = placement_for(q, topo);
    description = fmt::format("the {} group of rank 0", q.group);
    return cost::Group{placement.group(it->second, 0)};
  }
  description = q.group;
  return cost::Group{topo::parse_device_list(q.group, topo.num_devices(), q.group_source)};
}

// The part of the cluster the strategy's job is given: its segment's hosts of each node.
spec::ClusterSpec allocated_cluster(const spec::ClusterSpec& cluster, const CollectiveQuery& q) {
  if (q.strategy.empty()) return cluster;
  std::string source = "--strategy";
  return spec::checked_allocated_part(cluster, spec::load_strategy_spec(q.strategy, source), source);
}

}  // namespace

CollectiveReport run_collective(const spec::ClusterSpec& whole, const CollectiveQuery& q,
                                const spec::Tunables& tunables) {
  const auto cluster = allocated_cluster(whole, q);
  const ClusterModel model(cluster, tunables.collectives);
  if (q.algorithm != "auto") model.registry().get(q.algorithm, q.algorithm_source);
  const auto costs = model.cost_model();
  CollectiveReport r{
      .topology = cluster.name, .op = q.op, .requested_algorithm = q.algorithm, .warnings = cluster.warnings};
  const auto group = resolve_group(q, model.topology(), r.group);
  r.ranks = group.size();
  const auto id = costs->intern(group);
  const auto kind = cost::collective_kind_from_name(q.op);
  for (const auto bytes : q.sizes)
    r.rows.push_back({bytes, costs->cost(cost::make_collective(kind, bytes), id, q.algorithm, q.group_source)});
  for (auto& w : costs->warnings()) r.warnings.push_back(std::move(w));
  return r;
}

std::vector<Bytes> doubling_sizes(Bytes lo, Bytes hi) {
  std::vector<Bytes> out;
  for (Bytes b = lo; b <= hi; b = b * 2) out.push_back(b);
  return out;
}

}  // namespace trainsim::driver
