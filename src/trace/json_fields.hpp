#pragma once
// Reading fields of trace events by type: real traces carry numbers as strings, ranks as lists or
// text, and the odd absurd value; each reads as a fallback (counted as missing) rather than an
// error. Private to trace/.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
// `exact_ns`, where given, is the number's own decimal text read exactly (EventStream's
// ExactTimes), used in place of the double within the same limit.
constexpr double kMaxEventStartUs = 4e15;
constexpr double kMaxEventDurationUs = 1e12;
std::optional<std::int64_t> event_nanoseconds(nlohmann::json::const_iterator it, nlohmann::json::const_iterator end,
                                              double limit_us, std::optional<std::int64_t> exact_ns = std::nullopt);
// A JSON number's text in microseconds ("1682725898236567.123", "1.5e3") as exact nanoseconds,
// rounded half away from zero below a nanosecond; nullopt where its significant digits pass a
// uint64 or its magnitude 9.2e15 us (the caller falls back to the double).
std::optional<std::int64_t> decimal_microseconds_as_ns(std::string_view text);

}  // namespace trainsim::trace
