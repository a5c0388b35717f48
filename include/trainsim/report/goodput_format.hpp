#pragma once
// Rendering `goodput` (docs/goodput.md "Report").
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/driver/goodput.hpp"
#include "trainsim/report/format.hpp"

namespace trainsim::report {

nlohmann::ordered_json to_json(const driver::GoodputReport& report);
std::string render(const driver::GoodputReport& report, Format format);

}  // namespace trainsim::report
