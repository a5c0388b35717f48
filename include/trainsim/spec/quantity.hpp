#pragma once
// Unit strings of docs/cli.md ("80 GiB", "400 Gb/s", "2 us", "312 TFLOP/s") and plain SI numbers.
// This is the only place in trainsim that turns text into quantities.
#include <string>
#include <string_view>
#include <variant>

#include "trainsim/util/units.hpp"

namespace trainsim::spec {

enum class QuantityKind { Bytes, Bandwidth, Duration, FlopRate, Power };

// The value in SI base units (bytes, bytes/s, seconds, FLOP/s), or the reason it is not one.
struct QuantityError {
  std::string message;
};
using QuantityResult = std::variant<double, QuantityError>;

QuantityResult parse_quantity(std::string_view text, QuantityKind kind);

// "B, KB, MB, ..." — the units accepted for a kind, for error messages.
std::string accepted_units(QuantityKind kind);
std::string_view quantity_name(QuantityKind kind);
// A typical value of the kind ("80 GiB"), for error messages.
std::string_view quantity_example(QuantityKind kind);

// Convenience for command-line values: throws SpecError naming `source` (e.g. "--bytes").
Bytes parse_bytes_option(std::string_view text, const std::string& source);

}  // namespace trainsim::spec
