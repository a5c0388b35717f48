#pragma once
// Rendering reports: JSON (stable key order, one object on stdout), CSV and a readable table.
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/driver/run.hpp"

namespace trainsim::report {

enum class Format { Table, Json, Csv };

nlohmann::ordered_json to_json(const driver::RunReport& report);
std::string to_table(const driver::RunReport& report);
std::string to_csv(const driver::RunReport& report);
std::string render(const driver::RunReport& report, Format format);

// The JSON text of a report, indented by two. Bytes that are not UTF-8 (a command-line argument
// can carry any) become U+FFFD instead of an exception.
template <class Json>
std::string json_text(const Json& json) {
  return json.dump(2, ' ', false, Json::error_handler_t::replace);
}

// RFC 4180: a field holding a comma, a quote or a line break is quoted.
std::string csv_field(const std::string& s);

// "61.2 GiB", "2.72 B": short human forms for tables.
std::string human_bytes(Bytes bytes);
std::string human_count(double count);

// "MFU 13.9% of the 1979 TFLOP/s fp8 peak (27.8% of the bf16 peak, as Megatron-LM and NeMo report
// it)"; "bf16 training, FP8 GEMMs (tensorwise)".
std::string mfu_text(const driver::RunReport& report);
std::string precision_text(const driver::RunReport& report);

// The loud line of a plan that does not fit: "DOES NOT FIT: peak 85.07 GiB per GPU exceeds the
// device's 79.19 GiB", shown by every command that prices a layout.
std::string does_not_fit_text(std::int64_t peak_memory, Bytes device_memory);
// The memory verdict in a few words, for the HTML pages' figures.
std::string fit_verdict(bool fits, bool at_risk, std::int64_t peak_memory, Bytes device_memory);

}  // namespace trainsim::report
