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

std::optional<std::int64_t> event_nanoseconds(json::const_iterator it, json::const_iterator end, double limit_us) {
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
  return std::llround(v * 1000.0);
}

}  // namespace trainsim::trace
