#pragma once
// Rendering the `collective` report: one size or an nccl-tests-like sweep.
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/driver/collective.hpp"
#include "trainsim/report/format.hpp"

namespace trainsim::report {

nlohmann::ordered_json to_json(const driver::CollectiveReport& report);
std::string render(const driver::CollectiveReport& report, Format format);

}  // namespace trainsim::report
