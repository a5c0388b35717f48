#include "trainsim/report/tunables_report.hpp"

#include <fmt/format.h>

namespace trainsim::report {
namespace {

// A value as a person writes it: SI numbers with their unit, shares and counts as they are.
std::string value_text(const spec::TunableField& f, double v) {
  switch (f.kind) {
    case spec::TunableKind::Duration:
      return v >= 1e-3 ? fmt::format("{:g} ms", v * 1e3) : fmt::format("{:g} us", v * 1e6);
    case spec::TunableKind::Bandwidth:
      return fmt::format("{:g} GB/s", v / 1e9);
    case spec::TunableKind::Bytes:
      return v >= 1 << 30   ? fmt::format("{:g} GiB", v / (1 << 30))
             : v >= 1 << 20 ? fmt::format("{:g} MiB", v / (1 << 20))
             : v >= 1 << 10 ? fmt::format("{:g} KiB", v / (1 << 10))
                            : fmt::format("{:g} B", v);
    case spec::TunableKind::Share:
    case spec::TunableKind::Number:
    case spec::TunableKind::Integer:
      return fmt::format("{:g}", v);
  }
  return fmt::format("{:g}", v);
}

}  // namespace

nlohmann::ordered_json to_json(const driver::ResolvedTunables& t) {
  auto out = nlohmann::ordered_json::array();
  const auto fields = spec::tunable_fields();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto& f = fields[i];
    out.push_back({{"section", f.section},
                   {"key", f.key},
                   {"value", f.get(t.values)},
                   {"unit", spec::tunable_unit(f.kind)},
                   {"origin", t.origins[i]},
                   {"meaning", f.meaning},
                   {"source", f.source}});
  }
  return out;
}

std::string to_table(const driver::ResolvedTunables& t) {
  std::string out = fmt::format("{:<34} {:>14}  {:<11} {}\n", "tunable", "value", "from", "meaning");
  const auto fields = spec::tunable_fields();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto& f = fields[i];
    out += fmt::format("{:<34} {:>14}  {:<11} {}\n", fmt::format("{}.{}", f.section, f.key),
                       value_text(f, f.get(t.values)), t.origins[i], f.meaning);
  }
  return out;
}

std::string to_markdown(const driver::ResolvedTunables& t) {
  std::string out = "| tunable | default | meaning | source |\n| --- | ---: | --- | --- |\n";
  const auto fields = spec::tunable_fields();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto& f = fields[i];
    out += fmt::format("| `{}.{}` | {} | {} | {} |\n", f.section, f.key, value_text(f, f.get(t.values)), f.meaning,
                       f.source);
  }
  return out;
}

std::string render(const driver::ResolvedTunables& t, Format format) {
  switch (format) {
    case Format::Json:
      return json_text(to_json(t)) + "\n";
    case Format::Csv: {
      std::string out = "section,key,value,unit,origin,meaning,source\n";
      const auto fields = spec::tunable_fields();
      for (std::size_t i = 0; i < fields.size(); ++i) {
        const auto& f = fields[i];
        out += fmt::format("{},{},{:.17g},{},{},{},{}\n", f.section, f.key, f.get(t.values), spec::tunable_unit(f.kind),
                           t.origins[i], csv_field(std::string(f.meaning)), csv_field(std::string(f.source)));
      }
      return out;
    }
    case Format::Table:
      return to_table(t);
  }
  return to_table(t);
}

}  // namespace trainsim::report
