#pragma once
// The `collective` report: one size or an nccl-tests-like sweep.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/cost/plan.hpp"
#include "trainsim/report/format.hpp"

namespace trainsim::report {

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

nlohmann::ordered_json to_json(const CollectiveReport& report);
std::string render(const CollectiveReport& report, Format format);

}  // namespace trainsim::report
