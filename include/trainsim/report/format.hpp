#pragma once
// Rendering reports: JSON (stable key order, one object on stdout), CSV and a readable table.
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/report/report.hpp"

namespace trainsim::report {

enum class Format { Table, Json, Csv };

nlohmann::ordered_json to_json(const RunReport& report);
std::string to_table(const RunReport& report);
std::string to_csv(const RunReport& report);
std::string render(const RunReport& report, Format format);

// RFC 4180: a field holding a comma, a quote or a line break is quoted.
std::string csv_field(const std::string& s);

// "61.2 GiB", "2.72 B": short human forms for tables.
std::string human_bytes(Bytes bytes);
std::string human_count(double count);

}  // namespace trainsim::report
