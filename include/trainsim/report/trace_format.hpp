#pragma once
// Rendering what `trace summary`, `replay` and `calibrate` found (docs/traces.md "Report (trace
// summary / replay)" and "Calibration").
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/report/format.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/trace/chakra.hpp"
#include "trainsim/trace/microbench.hpp"

namespace trainsim::report {

nlohmann::ordered_json to_json(const trace::TraceReport& report);
std::string to_table(const trace::TraceReport& report);
std::string to_csv(const trace::TraceReport& report);
std::string render(const trace::TraceReport& report, Format format);

// `replay --chakra`: per rank, the nodes by kind and the recorded and replayed spans.
nlohmann::ordered_json to_json(const trace::ChakraReport& report);
std::string render(const trace::ChakraReport& report, Format format);

// The calibration file: the fitted values `run --calibration` reads, the traces they came from
// ("traces") and the fit's residuals ("fit").
nlohmann::ordered_json to_json(const trace::CalibrationReport& report, const std::vector<std::string>& traces);
std::string to_table(const trace::CalibrationReport& report);
// The calibration file of a microbenchmark fit, with its residuals; the table of them.
nlohmann::ordered_json to_json(const trace::MicrobenchFit& fit, const std::string& path, const std::string& match);
std::string to_table(const trace::MicrobenchFit& fit);

}  // namespace trainsim::report
