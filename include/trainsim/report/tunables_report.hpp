#pragma once
// The `tunables` report: every tunable of the kernel, collective and memory models with the value
// in force, its unit, where the value comes from, its meaning and its source. The markdown form is
// the table in docs/model.md.
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/driver/tunables.hpp"
#include "trainsim/report/format.hpp"

namespace trainsim::report {

nlohmann::ordered_json to_json(const driver::ResolvedTunables& tunables);
std::string to_table(const driver::ResolvedTunables& tunables);
std::string to_markdown(const driver::ResolvedTunables& tunables);
std::string render(const driver::ResolvedTunables& tunables, Format format);

}  // namespace trainsim::report
