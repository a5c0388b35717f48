#include "trainsim/report/collective_report.hpp"

#include <fmt/format.h>

#include "trainsim/report/format.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

using driver::CollectiveReport;
using driver::CollectiveRow;
using nlohmann::ordered_json;

ordered_json row_json(const CollectiveRow& r) {
  return {{"bytes", r.bytes.count},
          {"algorithm", r.cost.algorithm},
          {"protocol", cost::protocol_name(r.cost.protocol)},
          {"time_s", r.cost.time.seconds()},
          {"algbw_Bps", r.cost.algbw_Bps},
          {"busbw_Bps", r.cost.busbw_Bps}};
}

std::string table(const CollectiveReport& r) {
  std::string out = fmt::format("# {} on {} ranks ({}) of {}, algorithm {}\n", r.op, r.ranks, r.group, r.topology,
                                r.requested_algorithm);
  out += fmt::format("{:>14} {:>12} {:>10} {:>10}  {:<8} {}\n", "size (B)", "time (us)", "algbw", "busbw", "algo",
                     "proto");
  out += fmt::format("{:>14} {:>12} {:>10} {:>10}\n", "", "", "(GB/s)", "(GB/s)");
  for (const auto& row : r.rows)
    out += fmt::format("{:>14} {:>12.2f} {:>10.2f} {:>10.2f}  {:<8} {}\n", row.bytes.count,
                       row.cost.time.seconds() * 1e6, row.cost.algbw_Bps / 1e9, row.cost.busbw_Bps / 1e9,
                       row.cost.algorithm, cost::protocol_name(row.cost.protocol));
  return out;
}

std::string csv(const CollectiveReport& r) {
  std::string out = "op,ranks,bytes,time_s,algbw_Bps,busbw_Bps,algorithm,protocol\n";
  for (const auto& row : r.rows)
    out +=
        fmt::format("{},{},{},{:.9e},{:.6e},{:.6e},{},{}\n", r.op, r.ranks, row.bytes.count, row.cost.time.seconds(),
                    row.cost.algbw_Bps, row.cost.busbw_Bps, row.cost.algorithm, cost::protocol_name(row.cost.protocol));
  return out;
}

}  // namespace

ordered_json to_json(const CollectiveReport& r) {
  ordered_json out;
  if (r.rows.size() == 1) {
    // docs/cli.md's single-size report, plus context
    const auto& row = r.rows.front();
    out = {{"op", r.op},
           {"bytes", row.bytes.count},
           {"ranks", r.ranks},
           {"algorithm", row.cost.algorithm},
           {"protocol", cost::protocol_name(row.cost.protocol)},
           {"time_s", row.cost.time.seconds()},
           {"algbw_Bps", row.cost.algbw_Bps},
           {"busbw_Bps", row.cost.busbw_Bps}};
  } else {
    out = {{"op", r.op}, {"ranks", r.ranks}, {"rows", ordered_json::array()}};
    for (const auto& row : r.rows) out["rows"].push_back(row_json(row));
  }
  out["group"] = r.group;
  out["topology"] = r.topology;
  out["warnings"] = r.warnings;
  return out;
}

std::string render(const CollectiveReport& report, Format format) {
  switch (format) {
    case Format::Json:
      return json_text(to_json(report)) + "\n";
    case Format::Csv:
      return csv(report);
    case Format::Table:
      return table(report);
  }
  SIM_ASSERT(false, "unhandled format");
}

}  // namespace trainsim::report
