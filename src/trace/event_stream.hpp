#pragma once
// Streaming a Chrome-trace JSON document through nlohmann's SAX parser: the top level is an
// object; each element of its event list is built as a small JSON value and handed over, then
// dropped, so memory follows what the sink keeps, not the text. Private to trace/.
//
// A Sink has: top_key(key) (a key of the top-level object), in_events() (the current top key
// names the event list), events_seen(), wants_top() (whether the current top key's value is
// kept: the others are skipped unbuilt), keep_top(value) (a kept top-level value other than the list),
// event(value, times) (times: the event's "ts" and "dur" read exactly from their decimal text).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/json_fields.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {

using nlohmann::json;

// An event's start and duration in nanoseconds, read from the digits of a fractional "ts" or
// "dur" rather than through a double (which holds an epoch time in microseconds to 0.25 us only).
struct ExactTimes {
  std::optional<std::int64_t> ts_ns;
  std::optional<std::int64_t> dur_ns;
};

// Builds one JSON value from SAX callbacks.
class ValueBuilder {
 public:
  bool active() const { return !stack_.empty(); }
  bool done() const { return done_; }
  json take() {
    done_ = false;
    return std::move(root_);
  }
  void key(std::string k) { key_ = std::move(k); }
  // Whether the next value is a field of the outermost object (an event's own field).
  bool at_top_field(std::string_view key) const {
    return stack_.size() == 1 && stack_.back()->is_object() && key_ == key;
  }
  void value(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      done_ = true;
      return;
    }
    auto& top = *stack_.back();
    if (top.is_array())
      top.push_back(std::move(v));
    else
      top[key_] = std::move(v);
  }
  void open(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      stack_.push_back(&root_);
      return;
    }
    auto& top = *stack_.back();
    json* child = nullptr;
    if (top.is_array()) {
      top.push_back(std::move(v));
      child = &top.back();
    } else {
      child = &(top[key_] = std::move(v));
    }
    stack_.push_back(child);
  }
  void close() {
    stack_.pop_back();
    if (stack_.empty()) done_ = true;
  }

 private:
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  bool done_ = false;
};

// nlohmann's SAX interface, routed to the sink.
template <class Sink>
class EventStream : public nlohmann::json_sax<json> {
 public:
  EventStream(Sink& reader, const std::string& path) : reader_(reader), path_(path) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t& text) override {
    if (in_event_list_ && builder_.at_top_field("ts")) times_.ts_ns = decimal_microseconds_as_ns(text);
    if (in_event_list_ && builder_.at_top_field("dur")) times_.dur_ns = decimal_microseconds_as_ns(text);
    return value(v);
  }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t& v) override { return value(json::binary(std::move(v))); }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (depth_ == 1) {
      reader_.top_key(k);
      skip_top_ = !reader_.in_events() && !reader_.wants_top();
      return true;
    }
    if (skip_top_) return true;
    builder_.key(std::move(k));
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const json::exception& e) override {
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1, column 2: "
    std::string what = e.what();
    if (const auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    throw SpecError(path_, "", fmt::format("invalid JSON near byte {}: {}", position, what));
  }

 private:
  bool value(json v) {
    if (depth_ == 0) throw SpecError(path_, "", "expected a JSON object with traceEvents, got a single value");
    if (depth_ == 1) {
      if (reader_.in_events()) throw SpecError(path_, "/traceEvents", "expected a list of trace events");
      if (!skip_top_) reader_.keep_top(std::move(v));
      return true;
    }
    if (skip_top_) return true;
    builder_.value(std::move(v));
    deliver();
    return true;
  }
  bool open(json v) {
    ++depth_;
    if (depth_ > kMaxDepth) throw SpecError(path_, "", fmt::format("nested deeper than {} levels", kMaxDepth));
    if (depth_ == 1) {
      if (!v.is_object()) throw SpecError(path_, "", "expected a JSON object with traceEvents, got a list");
      return true;
    }
    if (depth_ == 2 && reader_.in_events()) {
      if (!v.is_array()) throw SpecError(path_, "/traceEvents", "expected a list of trace events");
      reader_.events_seen();
      in_event_list_ = true;
      return true;
    }
    if (skip_top_) return true;
    builder_.open(std::move(v));
    return true;
  }
  bool close() {
    if (depth_ == 2 && in_event_list_) {
      in_event_list_ = false;
    } else if (depth_ >= 2 && !skip_top_) {
      builder_.close();
      deliver();
    }
    --depth_;
    return true;
  }
  void deliver() {
    if (!builder_.done()) return;
    if (in_event_list_) {
      reader_.event(builder_.take(), times_);
      times_ = {};
    } else
      reader_.keep_top(builder_.take());
  }

  static constexpr int kMaxDepth = 64;
  Sink& reader_;
  const std::string& path_;
  ValueBuilder builder_;
  ExactTimes times_;
  int depth_ = 0;
  bool in_event_list_ = false;
  bool skip_top_ = false;  // the current top-level value is one the sink does not keep
};

}  // namespace trainsim::trace
