#pragma once
// A JSON reader that knows its own path (docs/architecture.md "Conventions"). Every accessor records the key it reads, so
// finish() can reject keys nobody asked for (with a "did you mean" hint). Problems are collected
// in a Diagnostics list rather than thrown, so that all errors of a file are reported together.
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/spec/quantity.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::spec {

class Diagnostics {
 public:
  void add(std::string pointer, std::string message, std::string source = {}) {
    items_.push_back({std::move(pointer), std::move(message), std::move(source)});
  }
  bool empty() const { return items_.empty(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  // Throws SpecError(source, every diagnostic) when there is at least one.
  void throw_if_any(const std::string& source) const;
  // The file declares itself a what-if study ("what_if": true): a figure outside what the hardware
  // can be is kept, with a warning, instead of being an error (Reader::plausible_quantity).
  bool what_if = false;

 private:
  std::vector<Diagnostic> items_;
};

// Closed ranges for integers and numbers read from specs.
struct IntRange {
  std::int64_t min;
  std::int64_t max;
};
struct NumberRange {
  double min;
  double max;
  bool min_exclusive = false;
};

template <class E>
struct Choice {
  std::string_view name;
  E value;
};

// JSON pointer of `key` under `base`, escaping '~' and '/' as RFC 6901 says.
std::string pointer_join(std::string_view base, std::string_view key);
// A JSON value rendered for an error message, shortened to about 40 characters.
std::string describe(const nlohmann::json& value);
// The closest candidate to `key` by edit distance, or "" when none is close.
std::string closest_match(std::string_view key, const std::vector<std::string>& candidates);

// Where a physical figure can lie and where it usually does (SI units), with the ranges as a
// user reads them: outside `possible` it is an error naming the likely unit slip; outside `usual`
// a warning.
struct Plausibility {
  std::string_view what;  // "a NIC's bandwidth"
  NumberRange possible;
  NumberRange usual;
  std::string_view possible_text;  // "1 Gb/s to 3.2 Tb/s"
  std::string_view usual_text;
};

class Reader {
 public:
  Reader(const nlohmann::json& node, std::string pointer, Diagnostics& diagnostics);

  const std::string& pointer() const { return pointer_; }
  // Present and not null. Marks the key as known.
  bool has(std::string_view key);

  Reader object(std::string_view key);
  std::optional<Reader> optional_object(std::string_view key);

  std::int64_t integer(std::string_view key, IntRange range);
  std::optional<std::int64_t> optional_integer(std::string_view key, IntRange range);
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, IntRange range);
  std::vector<std::int64_t> integer_list(std::string_view key, IntRange range, std::size_t min_size,
                                         std::size_t max_size);

  double number(std::string_view key, NumberRange range);
  double number_or(std::string_view key, double fallback, NumberRange range);

  bool boolean(std::string_view key);
  bool boolean_or(std::string_view key, bool fallback);

  std::string string(std::string_view key);
  std::string string_or(std::string_view key, std::string fallback);

  template <class E>
  E choice(std::string_view key, std::span<const Choice<E>> choices);
  template <class E>
  E choice_or(std::string_view key, E fallback, std::span<const Choice<E>> choices);
  // Absent, null or invalid (reported) gives nullopt.
  template <class E>
  std::optional<E> optional_choice(std::string_view key, std::span<const Choice<E>> choices);

  // A quantity with a unit string or a plain SI number, checked against [min, max] in SI units.
  double quantity(std::string_view key, QuantityKind kind, NumberRange range);
  std::optional<double> optional_quantity(std::string_view key, QuantityKind kind, NumberRange range);
  // A required physical figure checked for plausibility; an unusual one adds a warning.
  double plausible_quantity(std::string_view key, QuantityKind kind, const Plausibility& p,
                            std::vector<std::string>& warnings);
  Bytes bytes(std::string_view key, NumberRange range);
  Bandwidth bandwidth(std::string_view key, NumberRange range);
  Duration duration(std::string_view key, NumberRange range);
  FlopRate flop_rate(std::string_view key, NumberRange range);

  // Every key of this object (for maps such as peak_flops); marks them all as known.
  std::vector<std::string> keys();
  // A child value of any type, for readers of nested maps.
  Reader child(std::string_view key);
  // The raw value of a key (nullptr when absent or null); marks the key as known.
  const nlohmann::json* value(std::string_view key) { return lookup(key); }

  // Records an error at this object's pointer or at one of its keys.
  void error(std::string message);
  void error_at(std::string_view key, std::string message);

  // The optional "sources" object every spec may carry: citations for its figures, keyed by the
  // JSON pointer they support. Strings only; nothing else reads them.
  void sources();

  // Reports every key that no accessor asked for.
  void finish();
  // The keys no accessor asked for, in the object's order (for readers that tolerate them).
  std::vector<std::string> unread() const;

 private:
  const nlohmann::json* lookup(std::string_view key);
  std::string text_choices(std::span<const std::string_view> names) const;
  std::optional<std::size_t> choice_index(std::string_view key, std::span<const std::string_view> names);

  const nlohmann::json* node_;
  std::string pointer_;
  Diagnostics* diagnostics_;
  std::set<std::string, std::less<>> known_;
  bool is_object_;
};

template <class E>
E Reader::choice(std::string_view key, std::span<const Choice<E>> choices) {
  std::vector<std::string_view> names;
  for (const auto& c : choices) names.push_back(c.name);
  if (!has(key)) {
    error_at(key, fmt::format("missing; expected one of: {}", text_choices(names)));
    return choices.front().value;
  }
  const auto index = choice_index(key, names);
  return index ? choices[*index].value : choices.front().value;
}

template <class E>
E Reader::choice_or(std::string_view key, E fallback, std::span<const Choice<E>> choices) {
  if (!has(key)) return fallback;
  std::vector<std::string_view> names;
  for (const auto& c : choices) names.push_back(c.name);
  const auto index = choice_index(key, names);
  return index ? choices[*index].value : fallback;
}

template <class E>
std::optional<E> Reader::optional_choice(std::string_view key, std::span<const Choice<E>> choices) {
  if (!has(key)) return std::nullopt;
  std::vector<std::string_view> names;
  for (const auto& c : choices) names.push_back(c.name);
  const auto index = choice_index(key, names);
  if (!index) return std::nullopt;
  return choices[*index].value;
}

// Reads a file (or "-" for stdin is not supported) and parses it as JSON with a depth limit;
// an unreadable file is an IoError, invalid JSON a SpecError naming line and column.
nlohmann::json load_json_file(const std::string& path);
// A spec file's text (at most 64 MiB); an unreadable file is an IoError.
std::string read_text_file(const std::string& path);
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// The name an enum value has in a choice table, for reports.
template <class E>
std::string_view choice_name(std::span<const Choice<E>> choices, E value) {
  for (const auto& c : choices)
    if (c.value == value) return c.name;
  return "?";
}

}  // namespace trainsim::spec
