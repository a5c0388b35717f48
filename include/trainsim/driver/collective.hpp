#pragma once
// A `collective` query: the cost of one collective on a group of a cluster, at one size or over
// an nccl-tests-like sweep, with the tuning in force. The `collective` verb and the regression
// cases both come through here.
#include <string>
#include <vector>

#include "trainsim/cost/plan.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/tunables.hpp"

namespace trainsim::driver {

struct CollectiveQuery {
  std::string op;  // a collective name (cost::collective_names())
  std::vector<Bytes> sizes;
  // "all", a device list such as "0-7,16-23", or tp, cp, dp, pp, ep: rank 0's group under `strategy`
  std::string group = "all";
  std::string algorithm = "auto";
  // A strategy file or inline list that defines the named groups; empty: tp = one node, dp = the rest.
  std::string strategy;
  // How the inputs are named in errors.
  std::string group_source = "--group";
  std::string algorithm_source = "--algo";
};

struct CollectiveRow {
  Bytes bytes;
  cost::CollectiveCost cost;
};

struct CollectiveReport {
  std::string topology;
  std::string op;
  std::string group;  // how the group was given
  int ranks = 0;
  std::string requested_algorithm;
  std::vector<CollectiveRow> rows;
  std::vector<std::string> warnings;
};

CollectiveReport run_collective(const spec::ClusterSpec& cluster, const CollectiveQuery& query,
                                const spec::Tunables& tunables);

// The sizes of an nccl-tests sweep: from `lo` doubling while at most `hi`.
std::vector<Bytes> doubling_sizes(Bytes lo, Bytes hi);

}  // namespace trainsim::driver
