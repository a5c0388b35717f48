#pragma once
// Reading fields of trace events by type: real traces carry numbers as strings, ranks as lists or
// text, and the odd absurd value; each reads as a fallback (counted as missing) rather than an
// error. Private to trace/.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainsim::trace {

inline constexpr int kMaxRank = 1 << 24;

// A field that should be a string; anything else reads as "".
std::string string_of(const nlohmann::json& object, const char* key);
// A field that should be an integer (numbers, or strings of digits); the fallback otherwise or
// when it does not fit an int64.
std::int64_t as_int(const nlohmann::json& v, std::int64_t fallback);
// "[0, 1]" or [0, 1]; ranks outside [0, kMaxRank] are dropped (lists) or kept absurd (text).
std::vector<int> parse_rank_list(const nlohmann::json& v);
// Kineto writes microseconds since the epoch (about 1.7e15 today), as integers or with a
// fractional part. Times up to 4e15 us (the year 2096) and durations up to 1e12 us (11 days)
// keep start + duration in nanoseconds well inside an int64.
std::optional<std::int64_t> event_nanoseconds(nlohmann::json::const_iterator it, nlohmann::json::const_iterator end,
                                              double limit_us = 4e15);

}  // namespace trainsim::trace
