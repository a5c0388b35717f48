#include "trainsim/spec/quantity.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "trainsim/util/error.hpp"

namespace trainsim::spec {
namespace {

struct Unit {
  std::string_view symbol;
  double factor;  // to SI base units
};

// Decimal prefixes are powers of 1000, binary ones powers of 1024; "b" is a bit, "B" a byte.
constexpr std::array kByteUnits{
    Unit{"B", 1.0},
    Unit{"KB", 1e3},
    Unit{"MB", 1e6},
    Unit{"GB", 1e9},
    Unit{"TB", 1e12},
    Unit{"PB", 1e15},
    Unit{"KiB", 1024.0},
    Unit{"MiB", 1048576.0},
    Unit{"GiB", 1073741824.0},
    Unit{"TiB", 1099511627776.0},
    Unit{"PiB", 1125899906842624.0},
};

constexpr std::array kBandwidthUnits{
    Unit{"B/s", 1.0},    Unit{"KB/s", 1e3},     Unit{"MB/s", 1e6},        Unit{"GB/s", 1e9},
    Unit{"TB/s", 1e12},  Unit{"KiB/s", 1024.0}, Unit{"MiB/s", 1048576.0}, Unit{"GiB/s", 1073741824.0},
    Unit{"b/s", 0.125},  Unit{"Kb/s", 125.0},   Unit{"Mb/s", 125e3},      Unit{"Gb/s", 125e6},
    Unit{"Tb/s", 125e9}, Unit{"Gbps", 125e6},   Unit{"Mbps", 125e3},      Unit{"Tbps", 125e9},
    Unit{"GBps", 1e9},
};

constexpr std::array kDurationUnits{
    Unit{"s", 1.0},   Unit{"ms", 1e-3},  Unit{"us", 1e-6},  Unit{"µs", 1e-6},
    Unit{"ns", 1e-9}, Unit{"ps", 1e-12}, Unit{"min", 60.0}, Unit{"h", 3600.0},
    Unit{"d", 86400.0}, Unit{"days", 86400.0},
};

constexpr std::array kFlopRateUnits{
    Unit{"FLOP/s", 1.0}, Unit{"GFLOP/s", 1e9}, Unit{"TFLOP/s", 1e12}, Unit{"PFLOP/s", 1e15},
    Unit{"FLOPS", 1.0},  Unit{"GFLOPS", 1e9},  Unit{"TFLOPS", 1e12},  Unit{"PFLOPS", 1e15},
};

constexpr std::array kPowerUnits{Unit{"W", 1.0}, Unit{"kW", 1e3}, Unit{"MW", 1e6}};

template <std::size_t N>
std::string join_symbols(const std::array<Unit, N>& units) {
  std::string out;
  for (const auto& u : units) {
    if (!out.empty()) out += ", ";
    out += u.symbol;
  }
  return out;
}

template <class F>
decltype(auto) with_units(QuantityKind kind, F&& f) {
  switch (kind) {
    case QuantityKind::Bytes:
      return f(kByteUnits);
    case QuantityKind::Bandwidth:
      return f(kBandwidthUnits);
    case QuantityKind::Duration:
      return f(kDurationUnits);
    case QuantityKind::FlopRate:
      return f(kFlopRateUnits);
    case QuantityKind::Power:
      return f(kPowerUnits);
  }
  SIM_ASSERT(false, "unhandled quantity kind");
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string shorten(std::string_view s) {
  if (s.size() <= 40) return std::string(s);
  return std::string(s.substr(0, 37)) + "...";
}

}  // namespace

std::string_view quantity_example(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::Bytes:
      return "80 GiB";
    case QuantityKind::Bandwidth:
      return "400 Gb/s";
    case QuantityKind::Duration:
      return "2 us";
    case QuantityKind::FlopRate:
      return "312 TFLOP/s";
    case QuantityKind::Power:
      return "700 W";
  }
  return "";
}

std::string_view quantity_name(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::Bytes:
      return "a size";
    case QuantityKind::Bandwidth:
      return "a bandwidth";
    case QuantityKind::Duration:
      return "a duration";
    case QuantityKind::FlopRate:
      return "a FLOP rate";
    case QuantityKind::Power:
      return "a power";
  }
  return "a quantity";
}

std::string accepted_units(QuantityKind kind) {
  return with_units(kind, [](const auto& units) { return join_symbols(units); });
}

QuantityResult parse_quantity(std::string_view text, QuantityKind kind) {
  const std::string_view body = trim(text);
  double number = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), number);
  if (ec != std::errc() || body.empty() || body.front() == '-' || body.front() == '+') {
    if (ec == std::errc::result_out_of_range)
      return QuantityError{fmt::format("\"{}\" is out of range", shorten(text))};
    return QuantityError{fmt::format("\"{}\" does not start with a non-negative number; expected {} such as \"{}\"",
                                     shorten(text), quantity_name(kind), quantity_example(kind))};
  }
  if (!std::isfinite(number)) return QuantityError{fmt::format("\"{}\" is not a finite number", shorten(text))};
  const std::string_view unit = trim(std::string_view(end, static_cast<std::size_t>(body.data() + body.size() - end)));
  if (unit.empty()) {
    return QuantityError{
        fmt::format("\"{}\" has no unit; write a plain JSON number for SI base units or add one of: {}", shorten(text),
                    accepted_units(kind))};
  }
  return with_units(kind, [&](const auto& units) -> QuantityResult {
    for (const auto& u : units) {
      if (u.symbol != unit) continue;
      const double value = number * u.factor;
      if (!std::isfinite(value)) return QuantityError{fmt::format("\"{}\" is out of range", shorten(text))};
      return value;
    }
    return QuantityError{fmt::format("unknown unit \"{}\" in \"{}\"; expected one of: {}", shorten(unit), shorten(text),
                                     join_symbols(units))};
  });
}

namespace {

// nccl-tests' sizes (-b 8 -e 8G): a plain integer of bytes, or a number with K, M, G or T for
// binary multiples (either case).
std::optional<double> nccl_tests_size(std::string_view text) {
  double factor = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': factor = 0x1p10; break;
      case 'M': case 'm': factor = 0x1p20; break;
      case 'G': case 'g': factor = 0x1p30; break;
      case 'T': case 't': factor = 0x1p40; break;
      default: break;
    }
  }
  const auto digits = factor == 1 ? text : text.substr(0, text.size() - 1);
  if (digits.empty() || digits.find_first_not_of("0123456789.") != std::string_view::npos) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value * factor;
}

}  // namespace

Bytes parse_bytes_option(std::string_view text, const std::string& source) {
  double bytes = 0;
  if (const auto plain = nccl_tests_size(text)) {
    bytes = *plain;
    if (bytes != std::floor(bytes))
      throw SpecError(source, "", fmt::format("{} is not a whole number of bytes", shorten(text)));
  } else {
    const auto result = parse_quantity(text, QuantityKind::Bytes);
    if (const auto* err = std::get_if<QuantityError>(&result)) throw SpecError(source, "", err->message);
    bytes = std::get<double>(result);
  }
  if (bytes < 1 || bytes > 1e15) {
    throw SpecError(source, "", fmt::format("{} is out of range; expected a size from 1 B to 1 PB", shorten(text)));
  }
  return Bytes::from_double(bytes);
}

}  // namespace trainsim::spec
