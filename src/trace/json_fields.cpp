#include "trace/json_fields.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace trainsim::trace {

using nlohmann::json;

std::string string_of(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::int64_t as_int(const json& v, std::int64_t fallback) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    return u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? static_cast<std::int64_t>(u)
                                                                                     : fallback;
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && std::abs(d) < 9e18 ? static_cast<std::int64_t>(d) : fallback;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::int64_t out = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size()) return out;
  }
  return fallback;
}

std::vector<int> parse_rank_list(const json& v) {
  std::vector<int> out;
  if (v.is_array()) {
    for (const auto& x : v) {
      const auto r = as_int(x, -1);
      if (r >= 0 && r <= kMaxRank) out.push_back(static_cast<int>(r));
    }
    return out;
  }
  if (!v.is_string()) return out;
  const auto& s = v.get_ref<const std::string&>();  // "[0, 1]"
  int value = 0;
  bool in_number = false;
  for (const char c : s) {
    if (c >= '0' && c <= '9') {
      value = std::min(value * 10 + (c - '0'), kMaxRank + 1);  // an absurd rank stays absurd, not UB
      in_number = true;
    } else if (in_number) {
      out.push_back(value);
      value = 0;
      in_number = false;
    }
  }
  if (in_number) out.push_back(value);
  return out;
}

std::optional<std::int64_t> event_nanoseconds(json::const_iterator it, json::const_iterator end, double limit_us,
                                              std::optional<std::int64_t> exact_ns) {
  if (it == end || !it->is_number()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(limit_us)) return std::nullopt;
    return static_cast<std::int64_t>(v) * 1000;
  }
  if (it->is_number_integer()) {
    const auto v = it->get<std::int64_t>();
    if (v > limit_us || v < -limit_us) return std::nullopt;
    return v * 1000;
  }
  const auto v = it->get<double>();
  if (!std::isfinite(v) || std::abs(v) > limit_us) return std::nullopt;
  if (exact_ns) return exact_ns;
  return std::llround(v * 1000.0);
}

std::optional<std::int64_t> decimal_microseconds_as_ns(std::string_view text) {
  std::size_t p = 0;
  const bool negative = p < text.size() && text[p] == '-';
  if (negative) ++p;
  std::string digits;  // the significant digits, the value being digits x 10^exponent
  std::int64_t exponent = 0;
  bool any = false;
  for (; p < text.size() && text[p] >= '0' && text[p] <= '9'; ++p, any = true)
    if (!digits.empty() || text[p] != '0') digits += text[p];
  if (p < text.size() && text[p] == '.') {
    for (++p; p < text.size() && text[p] >= '0' && text[p] <= '9'; ++p, any = true) {
      if (!digits.empty() || text[p] != '0') digits += text[p];
      --exponent;
    }
  }
  if (!any) return std::nullopt;
  if (p < text.size() && (text[p] == 'e' || text[p] == 'E')) {
    int e = 0;
    const char* first = text.data() + p + 1;
    if (first < text.data() + text.size() && *first == '+') ++first;
    const auto [end, ec] = std::from_chars(first, text.data() + text.size(), e);
    if (ec != std::errc{} || std::abs(e) > 400) return std::nullopt;
    exponent += e;
    p = static_cast<std::size_t>(end - text.data());
  }
  if (p != text.size()) return std::nullopt;
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (digits.empty()) return 0;
  std::uint64_t mantissa = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), mantissa).ec != std::errc{}) return std::nullopt;
  exponent += 3;  // microseconds to nanoseconds
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (exponent >= 0) {
    for (std::int64_t i = 0; i < exponent; ++i) {
      if (mantissa > kMax / 10) return std::nullopt;
      mantissa *= 10;
    }
  } else if (exponent < -19) {
    mantissa = 0;
  } else {
    std::uint64_t scale = 1;
    for (std::int64_t i = 0; i < -exponent; ++i) scale *= 10;
    mantissa = mantissa / scale + (mantissa % scale >= (scale + 1) / 2 ? 1 : 0);
  }
  if (mantissa > kMax) return std::nullopt;
  const auto ns = static_cast<std::int64_t>(mantissa);
  return negative ? -ns : ns;
}

}  // namespace trainsim::trace
