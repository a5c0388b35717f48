#include "trainsim/spec/reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace trainsim::spec {
namespace {

std::string base_unit(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::Bytes:
      return "bytes";
    case QuantityKind::Bandwidth:
      return "bytes/s";
    case QuantityKind::Duration:
      return "s";
    case QuantityKind::FlopRate:
      return "FLOP/s";
    case QuantityKind::Power:
      return "W";
  }
  return "";
}

std::string range_text(IntRange r) {
  return fmt::format("an integer in [{}, {}]", r.min, r.max);
}

// Edits between two words, a swap of neighbouring letters counting as one (optimal string
// alignment): "ndoes" is one slip from "nodes".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// An integer read from JSON: integral floats (1e3, 8.0) are accepted, everything else is not.
std::optional<std::int64_t> as_integer(const nlohmann::json& v, IntRange range, std::string& why) {
  double as_double = 0;
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    const auto i = v.get<std::int64_t>();
    if (i >= range.min && i <= range.max) return i;
    why = fmt::format("{} is out of range; expected {}", i, range_text(range));
    return std::nullopt;
  }
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(range.max) && static_cast<std::int64_t>(u) >= range.min)
      return static_cast<std::int64_t>(u);
    why = fmt::format("{} is out of range; expected {}", u, range_text(range));
    return std::nullopt;
  }
  if (!v.is_number_float()) {
    why = fmt::format("expected {}, got {}", range_text(range), describe(v));
    return std::nullopt;
  }
  as_double = v.get<double>();
  if (!std::isfinite(as_double) || std::trunc(as_double) != as_double) {
    why = fmt::format("expected {}, got {}", range_text(range), describe(v));
    return std::nullopt;
  }
  if (as_double < static_cast<double>(range.min) || as_double > static_cast<double>(range.max)) {
    why = fmt::format("{} is out of range; expected {}", describe(v), range_text(range));
    return std::nullopt;
  }
  return static_cast<std::int64_t>(as_double);
}

bool in_range(double value, NumberRange r) {
  if (r.min_exclusive ? !(value > r.min) : !(value >= r.min)) return false;
  return value <= r.max;
}

std::string number_range_text(NumberRange r, std::string_view unit) {
  const std::string suffix = unit.empty() ? "" : fmt::format(" {}", unit);
  if (r.min_exclusive && r.min == 0) return fmt::format("a positive value of at most {:g}{}", r.max, suffix);
  return fmt::format("a value in [{:g}, {:g}]{}", r.min, r.max, suffix);
}

}  // namespace

void Diagnostics::throw_if_any(const std::string& source) const {
  if (!items_.empty()) throw SpecError(source, items_);
}

std::string pointer_join(std::string_view base, std::string_view key) {
  std::string out(base);
  out += '/';
  for (const char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string describe(const nlohmann::json& value) {
  std::string text = value.is_object()  ? "an object"
                     : value.is_array() ? "a list"
                                        : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

namespace {
std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

std::string closest_match(std::string_view key, const std::vector<std::string>& candidates) {
  // the same word in another case first ("TP" for "tp")
  const auto lower = lowercase(key);
  for (const auto& c : candidates)
    if (lowercase(c) == lower) return c;
  // then a slip of at most a third of the letters (and always fewer than the word has): "fp8" is
  // not a misspelt "cp"
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(1, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(lower, lowercase(c));
    if (d < best_distance && d < std::min(key.size(), c.size())) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

Reader::Reader(const nlohmann::json& node, std::string pointer, Diagnostics& diagnostics)
    : node_(&node), pointer_(std::move(pointer)), diagnostics_(&diagnostics), is_object_(node.is_object()) {}

const nlohmann::json* Reader::lookup(std::string_view key) {
  known_.emplace(key);
  if (!is_object_) return nullptr;
  const auto it = node_->find(key);
  if (it == node_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool Reader::has(std::string_view key) {
  return lookup(key) != nullptr;
}

void Reader::error(std::string message) {
  diagnostics_->add(pointer_, std::move(message));
}

void Reader::error_at(std::string_view key, std::string message) {
  diagnostics_->add(pointer_join(pointer_, key), std::move(message));
}

Reader Reader::child(std::string_view key) {
  static const nlohmann::json kNull;
  const auto* v = lookup(key);
  return Reader(v ? *v : kNull, pointer_join(pointer_, key), *diagnostics_);
}

Reader Reader::object(std::string_view key) {
  const auto* v = lookup(key);
  if (!v)
    error_at(key, "missing; expected an object");
  else if (!v->is_object())
    error_at(key, fmt::format("expected an object, got {}", describe(*v)));
  return child(key);
}

std::optional<Reader> Reader::optional_object(std::string_view key) {
  const auto* v = lookup(key);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    error_at(key, fmt::format("expected an object or null, got {}", describe(*v)));
    return std::nullopt;
  }
  return child(key);
}

std::optional<std::int64_t> Reader::optional_integer(std::string_view key, IntRange range) {
  const auto* v = lookup(key);
  if (!v) return std::nullopt;
  std::string why;
  auto value = as_integer(*v, range, why);
  if (!value) error_at(key, why);
  return value;
}

std::int64_t Reader::integer(std::string_view key, IntRange range) {
  if (!has(key)) {
    error_at(key, fmt::format("missing; expected {}", range_text(range)));
    return range.min;
  }
  return optional_integer(key, range).value_or(range.min);
}

std::int64_t Reader::integer_or(std::string_view key, std::int64_t fallback, IntRange range) {
  return optional_integer(key, range).value_or(fallback);
}

std::vector<std::int64_t> Reader::integer_list(std::string_view key, IntRange range, std::size_t min_size,
                                               std::size_t max_size) {
  const auto* v = lookup(key);
  const std::string expected =
      fmt::format("a list of {} to {} integers in [{}, {}]", min_size, max_size, range.min, range.max);
  if (!v) {
    error_at(key, fmt::format("missing; expected {}", expected));
    return {};
  }
  if (!v->is_array() || v->size() < min_size || v->size() > max_size) {
    error_at(key, fmt::format("expected {}, got {}", expected, describe(*v)));
    return {};
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    std::string why;
    const auto item = as_integer((*v)[i], range, why);
    if (!item) {
      diagnostics_->add(pointer_join(pointer_join(pointer_, key), std::to_string(i)), why);
      return {};
    }
    out.push_back(*item);
  }
  return out;
}

double Reader::number(std::string_view key, NumberRange range) {
  if (!has(key)) {
    error_at(key, fmt::format("missing; expected {}", number_range_text(range, "")));
    return range.min;
  }
  return number_or(key, range.min, range);
}

double Reader::number_or(std::string_view key, double fallback, NumberRange range) {
  const auto* v = lookup(key);
  if (!v) return fallback;
  if (!v->is_number()) {
    error_at(key, fmt::format("expected a number, got {}", describe(*v)));
    return fallback;
  }
  const double value = v->get<double>();
  if (!in_range(value, range)) {
    error_at(key, fmt::format("{} is out of range; expected {}", describe(*v), number_range_text(range, "")));
    return fallback;
  }
  return value;
}

bool Reader::boolean(std::string_view key) {
  if (!has(key)) {
    error_at(key, "missing; expected true or false");
    return false;
  }
  return boolean_or(key, false);
}

bool Reader::boolean_or(std::string_view key, bool fallback) {
  const auto* v = lookup(key);
  if (!v) return fallback;
  if (!v->is_boolean()) {
    error_at(key, fmt::format("expected true or false, got {}", describe(*v)));
    return fallback;
  }
  return v->get<bool>();
}

std::string Reader::string(std::string_view key) {
  if (!has(key)) {
    error_at(key, "missing; expected a string");
    return {};
  }
  return string_or(key, {});
}

std::string Reader::string_or(std::string_view key, std::string fallback) {
  const auto* v = lookup(key);
  if (!v) return fallback;
  if (!v->is_string()) {
    error_at(key, fmt::format("expected a string, got {}", describe(*v)));
    return fallback;
  }
  return v->get<std::string>();
}

std::string Reader::text_choices(std::span<const std::string_view> names) const {
  std::string out;
  for (const auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::optional<std::size_t> Reader::choice_index(std::string_view key, std::span<const std::string_view> names) {
  const auto* v = lookup(key);
  if (v->is_string()) {
    const auto text = v->get<std::string>();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == text) return i;
  }
  std::vector<std::string> candidates(names.begin(), names.end());
  const std::string hint = v->is_string() ? closest_match(v->get<std::string>(), candidates) : std::string();
  error_at(key, fmt::format("{} is not valid; expected one of: {}{}", describe(*v), text_choices(names),
                            hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint)));
  return std::nullopt;
}

std::optional<double> Reader::optional_quantity(std::string_view key, QuantityKind kind, NumberRange range) {
  const auto* v = lookup(key);
  if (!v) return std::nullopt;
  double value = 0;
  if (v->is_number()) {
    value = v->get<double>();
  } else if (v->is_string()) {
    const auto parsed = parse_quantity(v->get<std::string>(), kind);
    if (const auto* err = std::get_if<QuantityError>(&parsed)) {
      error_at(key, err->message);
      return std::nullopt;
    }
    value = std::get<double>(parsed);
  } else {
    error_at(key, fmt::format("expected {} such as \"{}\" or a number in {}, got {}", quantity_name(kind),
                              quantity_example(kind), base_unit(kind), describe(*v)));
    return std::nullopt;
  }
  if (!std::isfinite(value) || !in_range(value, range)) {
    error_at(key,
             fmt::format("{} is out of range; expected {}", describe(*v), number_range_text(range, base_unit(kind))));
    return std::nullopt;
  }
  return value;
}

namespace {

// Units a figure of this kind is usually written in, most common first.
std::vector<std::string_view> usual_units(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::Bandwidth:
      return {"Gb/s", "GB/s", "Tb/s", "TB/s", "Mb/s", "MB/s"};
    case QuantityKind::Duration:
      return {"us", "ns", "ms"};
    case QuantityKind::Bytes:
      return {"GiB", "GB", "TiB", "MiB"};
    case QuantityKind::FlopRate:
      return {"TFLOP/s", "PFLOP/s", "GFLOP/s"};
    default:
      return {};
  }
}

// The likely slip behind an implausible figure: the same number in the unit that makes it usual.
std::string slip_hint(const nlohmann::json& v, QuantityKind kind, const Plausibility& p) {
  std::string number;
  std::string written_unit;
  if (v.is_number()) {
    number = v.dump();
  } else if (v.is_string()) {
    const auto text = v.get<std::string>();
    const auto end = text.find_first_not_of("0123456789.+-eE");
    number = text.substr(0, end);
    if (end != std::string::npos) written_unit = text.substr(text.find_first_not_of(' ', end));
  }
  if (number.empty()) return {};
  // a written unit: the bits-for-bytes slip (a factor of 8); a bare number: the usual units
  std::vector<std::string> units;
  if (!written_unit.empty()) {
    std::string swapped = written_unit;
    for (auto& c : swapped) c = c == 'B' ? 'b' : c == 'b' ? 'B' : c;
    if (swapped != written_unit) units.push_back(swapped);
  } else {
    for (const auto unit : usual_units(kind)) units.emplace_back(unit);
  }
  for (const auto& unit : units) {
    const auto candidate = fmt::format("{} {}", number, unit);
    const auto parsed = parse_quantity(candidate, kind);
    if (const auto* value = std::get_if<double>(&parsed); value && in_range(*value, p.usual))
      return fmt::format(": did you mean \"{}\"?", candidate);
  }
  return {};
}

}  // namespace

double Reader::plausible_quantity(std::string_view key, QuantityKind kind, const Plausibility& p,
                                  std::vector<std::string>& warnings) {
  // read over every value the kind can take, then judge it
  const auto errors = diagnostics_->items().size();
  const double value = quantity(key, kind, {0, 1e30});
  const auto* v = lookup(key);
  if (v == nullptr || diagnostics_->items().size() != errors) return value;
  const auto shown = v->is_string() ? v->get<std::string>() : fmt::format("{} {}", v->dump(), base_unit(kind));
  if (!in_range(value, p.possible)) {
    // a what-if study may ask for any positive figure (an ideal network, a device twice as fast)
    if (diagnostics_->what_if && value > 0) {
      warnings.push_back(fmt::format("{}: {} is outside what {} can be ({}): kept, the file is a what-if study "
                                     "(\"what_if\": true)",
                                     pointer_join(pointer_, key), shown, p.what, p.possible_text));
      return value;
    }
    auto hint = slip_hint(*v, kind, p);
    if (hint.empty() && value > p.possible.max)
      hint = "; a what-if study beyond today's hardware says so with \"what_if\": true at the top of the file";
    error_at(key, fmt::format("{} is outside what {} can be ({}){}", shown, p.what, p.possible_text, hint));
    return std::clamp(value, p.possible.min, p.possible.max);  // reported; keeps what follows in range
  } else if (!in_range(value, p.usual)) {
    warnings.push_back(fmt::format("{}: {} is unusual for {} (usually {}){}", pointer_join(pointer_, key), shown,
                                   p.what, p.usual_text, slip_hint(*v, kind, p)));
  }
  return value;
}

double Reader::quantity(std::string_view key, QuantityKind kind, NumberRange range) {
  if (!has(key)) {
    error_at(key, fmt::format("missing; expected {} such as \"{}\"", quantity_name(kind), quantity_example(kind)));
    return range.min_exclusive ? range.max : range.min;
  }
  return optional_quantity(key, kind, range).value_or(range.min_exclusive ? range.max : range.min);
}

Bytes Reader::bytes(std::string_view key, NumberRange range) {
  return Bytes::from_double(quantity(key, QuantityKind::Bytes, range));
}
Bandwidth Reader::bandwidth(std::string_view key, NumberRange range) {
  return {quantity(key, QuantityKind::Bandwidth, range)};
}
Duration Reader::duration(std::string_view key, NumberRange range) {
  return Duration::from_seconds(quantity(key, QuantityKind::Duration, range));
}
FlopRate Reader::flop_rate(std::string_view key, NumberRange range) {
  return {quantity(key, QuantityKind::FlopRate, range)};
}

std::vector<std::string> Reader::keys() {
  std::vector<std::string> out;
  if (!is_object_) return out;
  for (const auto& [k, v] : node_->items()) {
    known_.insert(k);
    out.push_back(k);
  }
  return out;
}

void Reader::sources() {
  const auto* v = lookup("sources");
  if (!v) return;
  if (!v->is_object()) {
    error_at("sources", fmt::format("expected an object mapping JSON pointers to citations, got {}", describe(*v)));
    return;
  }
  for (const auto& [k, citation] : v->items())
    if (!citation.is_string())
      diagnostics_->add(pointer_join(pointer_join(pointer_, "sources"), k),
                        fmt::format("expected a citation string, got {}", describe(citation)));
}

std::vector<std::string> Reader::unread() const {
  std::vector<std::string> out;
  if (!is_object_) return out;
  for (const auto& [k, v] : node_->items())
    if (!known_.contains(k)) out.push_back(k);
  return out;
}

void Reader::finish() {
  if (!is_object_) return;
  const std::vector<std::string> known(known_.begin(), known_.end());
  for (const auto& [k, v] : node_->items()) {
    if (known_.contains(k)) continue;
    const std::string hint = closest_match(k, known);
    const std::string shown = k.size() > 40 ? k.substr(0, 37) + "..." : k;
    // no key close to it: say which there are
    std::string valid;
    for (const auto& key : known) valid += (valid.empty() ? "" : ", ") + key;
    error_at(k, hint.empty() ? fmt::format("unknown key \"{}\"; valid keys: {}", shown, valid)
                             : fmt::format("unknown key \"{}\" (did you mean \"{}\"?)", shown, hint));
  }
}

}  // namespace trainsim::spec
