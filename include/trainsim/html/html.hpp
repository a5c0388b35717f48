#pragma once
// Self-contained HTML pages for run, sweep, replay and goodput (docs/html.md): inline CSS and SVG
// and a few lines of plain JavaScript, nothing fetched, readable in light and dark themes and in
// print. The same inputs give the same bytes.
#include <string>
#include <string_view>

#include "trainsim/driver/goodput.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/trace/analysis.hpp"

namespace trainsim::html {

std::string run_page(const driver::RunReport& report);
std::string sweep_page(const search::SweepResult& result);
std::string replay_page(const trace::TraceReport& report);
std::string goodput_page(const driver::GoodputReport& report);

// Writes a page; an unwritable path is an IoError.
void write_page(const std::string& path, const std::string& page);

// Text for HTML content and attribute values: & < > " ' escaped, invalid UTF-8 replaced by U+FFFD.
std::string escape(std::string_view text);

}  // namespace trainsim::html
