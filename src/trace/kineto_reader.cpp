// Streaming reader of Kineto Chrome-trace JSON (plain or gzip): zlib decompresses into a stream
// buffer, nlohmann's SAX parser walks the text, and each trace event is built as a small JSON
// value, converted and dropped.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <istream>
#include <limits>
#include <map>
#include <optional>
#include <streambuf>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/trace/trace.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {

std::uint32_t Names::intern(std::string_view name) {
  if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(std::string(name), id);
  return id;
}

namespace {

using nlohmann::json;

// zlib reads gzip and, transparently, plain files.
class GzipBuffer : public std::streambuf {
 public:
  explicit GzipBuffer(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ != nullptr) gzbuffer(file_, 1 << 17);
  }
  ~GzipBuffer() override {
    if (file_ != nullptr) gzclose(file_);
  }
  GzipBuffer(const GzipBuffer&) = delete;
  GzipBuffer& operator=(const GzipBuffer&) = delete;
  bool is_open() const { return file_ != nullptr; }
  // A zlib error (a truncated or corrupt gzip stream), or "" when the stream ended cleanly.
  const std::string& error() const { return error_; }
  std::int64_t consumed() const { return consumed_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n < 0) {
      int code = 0;
      set_error(gzerror(file_, &code));
      return traits_type::eof();
    }
    if (n == 0) {
      // gzread reports a stream cut short only through gzerror
      int code = 0;
      const char* message = gzerror(file_, &code);
      if (code != Z_OK && code != Z_STREAM_END) set_error(message);
      return traits_type::eof();
    }
    consumed_ += n;
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  // zlib's messages start with the path, which the error names already
  void set_error(std::string_view message) {
    if (message.starts_with(path_ + ": ")) message.remove_prefix(path_.size() + 2);
    error_ = message;
  }

  std::string path_;
  gzFile file_;
  std::array<char, 1 << 16> buffer_{};
  std::string error_;
  std::int64_t consumed_ = 0;
};

// Builds one JSON value from SAX callbacks.
class Builder {
 public:
  bool active() const { return !stack_.empty(); }
  bool done() const { return done_; }
  json take() {
    done_ = false;
    return std::move(root_);
  }
  void key(std::string k) { key_ = std::move(k); }
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

// A field that should be a string; anything else reads as "".
std::string string_of(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A field that should be an integer (numbers, or strings of digits); the fallback otherwise or
// when it does not fit an int64.
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

constexpr int kMaxRank = 1 << 24;
constexpr std::int64_t kMaxSpanNs = 86'400'000'000'000;  // a day

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

std::string op_from_collective_name(std::string_view name) {
  // PyTorch's names ("allreduce", "_allgather_base", "all_to_all", "reduce_scatter_tensor_coalesced")
  std::string lower;
  for (const char c : name)
    if (c != '_') lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("allreduce") != std::string::npos) return "all_reduce";
  if (lower.find("allgather") != std::string::npos) return "all_gather";
  if (lower.find("reducescatter") != std::string::npos) return "reduce_scatter";
  if (lower.find("alltoall") != std::string::npos) return "all_to_all";
  if (lower.find("broadcast") != std::string::npos) return "broadcast";
  if (lower.find("reduce") != std::string::npos) return "reduce";
  if (lower.find("send") != std::string::npos || lower.find("recv") != std::string::npos) return "send_recv";
  return std::string(name);
}

// Collective metadata in an event's args (PyTorch ≥ 2.1 kernels, record_param_comms ops).
void read_collective_args(const json& args, Collective& c) {
  if (const auto it = args.find("Collective name"); it != args.end() && it->is_string())
    c.op = op_from_collective_name(it->get<std::string>());
  if (const auto it = args.find("In msg nelems"); it != args.end()) c.in_elements = as_int(*it, -1);
  if (const auto it = args.find("Out msg nelems"); it != args.end()) c.out_elements = as_int(*it, -1);
  if (const auto it = args.find("Group size"); it != args.end())
    c.group_size = static_cast<int>(std::clamp<std::int64_t>(as_int(*it, 0), 0, kMaxRank));
  if (const auto it = args.find("dtype"); it != args.end() && it->is_string()) c.dtype = it->get<std::string>();
  if (const auto it = args.find("Process Group Ranks"); it != args.end()) c.ranks = parse_rank_list(*it);
  if (const auto it = args.find("Process Group Name"); it != args.end() && it->is_string())
    c.group_name = it->get<std::string>();
  if (c.group_size == 0 && !c.ranks.empty()) c.group_size = static_cast<int>(c.ranks.size());
}

class TraceReader {
 public:
  explicit TraceReader(std::string path) { out_.path = std::move(path); }

  RankTrace finish() {
    if (!saw_events_)
      throw SpecError(out_.path, "/traceEvents", "missing; expected the profiler's list of trace events");
    read_metadata();
    attach_record_param_comms();
    normalise_times();
    for (const auto& [category, count] : ignored_)
      out_.warnings.push_back(fmt::format("ignored {} event(s) of category \"{}\"", count, category));
    if (skipped_ > 0)
      out_.warnings.push_back(fmt::format("skipped {} complete event(s) without a usable ts or dur", skipped_));
    if (out_.steps.empty()) out_.warnings.push_back("no ProfilerStep annotations: the trace has no steps to compare");
    std::int64_t unsized = 0;
    for (const auto& g : out_.gpu)
      if (g.collective && !g.collective->sized()) ++unsized;
    if (unsized > 0)
      out_.warnings.push_back(fmt::format(
          "{} NCCL kernel(s) without size metadata (PyTorch before 2.1 records none): counted, not sized", unsized));
    return std::move(out_);
  }

  // SAX side: the top level is an object; traceEvents' elements are events, other keys are kept.
  void top_key(const std::string& key) { top_key_ = key; }
  bool in_events() const { return top_key_ == "traceEvents"; }
  void events_seen() { saw_events_ = true; }
  void keep_top(json value) { top_[top_key_] = std::move(value); }

  // Kineto writes microseconds since the epoch (about 1.7e15 today), as integers or with a
  // fractional part. Times up to 4e15 us (the year 2096) and durations up to 1e12 us (11 days)
  // keep start + duration in nanoseconds well inside an int64.
  static std::optional<std::int64_t> nanoseconds(json::const_iterator it, json::const_iterator end,
                                                 double limit_us = 4e15) {
    const double kLimitUs = limit_us;
    if (it == end || !it->is_number()) return std::nullopt;
    if (it->is_number_unsigned()) {
      const auto v = it->get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(kLimitUs)) return std::nullopt;
      return static_cast<std::int64_t>(v) * 1000;
    }
    if (it->is_number_integer()) {
      const auto v = it->get<std::int64_t>();
      if (v > kLimitUs || v < -kLimitUs) return std::nullopt;
      return v * 1000;
    }
    const auto v = it->get<double>();
    if (!std::isfinite(v) || std::abs(v) > kLimitUs) return std::nullopt;
    return std::llround(v * 1000.0);
  }

  void event(const json& e) {
    ++out_.events;
    if (!e.is_object()) {
      ++ignored_["(not an object)"];
      return;
    }
    const auto ph = string_of(e, "ph");
    const auto cat = string_of(e, "cat");
    if (ph != "X") {
      if (ph != "M" && ph != "f" && ph != "s" && ph != "i" && ph != "I" && ph != "t") ++ignored_["ph " + ph];
      return;
    }
    const auto ts = e.find("ts");
    const auto dur = e.find("dur");
    const auto start_ns = nanoseconds(ts, e.end());
    const auto dur_ns = nanoseconds(dur, e.end(), 1e12);
    if (!start_ns || !dur_ns || *dur_ns < 0) {
      ++skipped_;
      return;
    }
    const std::int64_t start = *start_ns;
    const std::int64_t length = *dur_ns;
    const auto name = string_of(e, "name");
    static const json kEmpty = json::object();
    const auto args_it = e.find("args");
    const json& args = args_it != e.end() && args_it->is_object() ? *args_it : kEmpty;
    const auto thread = e.contains("tid") ? as_int(e.at("tid"), 0) : 0;
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      GpuOp g;
      g.kind = cat == "kernel" ? GpuKind::Kernel : cat == "gpu_memcpy" ? GpuKind::Memcpy : GpuKind::Memset;
      g.name = out_.names.intern(name);
      g.stream = args.contains("stream") ? as_int(args.at("stream"), thread) : thread;
      g.start_ns = start;
      g.dur_ns = length;
      g.correlation = args.contains("correlation") ? as_int(args.at("correlation"), -1) : -1;
      g.bytes = args.contains("bytes") ? as_int(args.at("bytes"), 0) : 0;
      if (g.kind == GpuKind::Kernel) {
        g.collective = collective_from_kernel_name(name);
        if (g.collective) read_collective_args(args, *g.collective);
      }
      out_.gpu.push_back(std::move(g));
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      out_.runtime.push_back({out_.names.intern(name), thread, start, length,
                              args.contains("correlation") ? as_int(args.at("correlation"), -1) : -1});
    } else if (cat == "user_annotation" && name.rfind("ProfilerStep#", 0) == 0) {
      int number = 0;
      const auto digits = std::string_view(name).substr(13);
      std::from_chars(digits.data(), digits.data() + digits.size(), number);
      out_.steps.push_back({number, thread, start, length});
    } else if (cat == "cpu_op") {
      if (name == "record_param_comms" || name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" ||
          name == "aten::baddbmm") {
        CpuOp op{out_.names.intern(name), thread, start, length, {}, std::nullopt};
        if (const auto dims = args.find("Input Dims"); dims != args.end() && dims->is_array()) {
          for (const auto& d : *dims) {
            std::vector<std::int64_t> shape;
            if (d.is_array())
              for (const auto& x : d)
                if (x.is_number_integer()) shape.push_back(x.get<std::int64_t>());
            op.input_dims.push_back(std::move(shape));
          }
        }
        if (name == "record_param_comms" && args.contains("Collective name")) {
          Collective c;
          read_collective_args(args, c);
          op.collective = std::move(c);
        }
        out_.cpu_ops.push_back(std::move(op));
      }
    } else if (cat != "user_annotation" && cat != "gpu_user_annotation" && cat != "python_function" && cat != "Trace" &&
               cat != "cpu_instant_event" && cat != "overhead") {
      ++ignored_[cat.empty() ? "(none)" : cat];
    }
  }

 private:
  void read_metadata() {
    if (const auto it = top_.find("distributedInfo"); it != top_.end() && it->is_object()) {
      out_.rank = static_cast<int>(as_int(it->value("rank", json(-1)), -1));
      out_.world_size = static_cast<int>(as_int(it->value("world_size", json(-1)), -1));
      out_.backend = string_of(*it, "backend");
      out_.nccl_version = string_of(*it, "nccl_version");
    } else {
      out_.warnings.push_back("no distributedInfo: rank and world size unknown");
    }
    if (const auto it = top_.find("deviceProperties");
        it != top_.end() && it->is_array() && !it->empty() && it->front().is_object()) {
      out_.device = string_of(it->front(), "name");
      out_.device_memory = as_int(it->front().value("totalGlobalMem", json(0)), 0);
    }
  }

  // Older traces keep the collective's sizes on the record_param_comms op around the launch.
  void attach_record_param_comms() {
    std::map<std::int64_t, const RuntimeCall*> launch_of;
    for (const auto& r : out_.runtime)
      if (r.correlation >= 0) launch_of.emplace(r.correlation, &r);
    std::vector<const CpuOp*> comms;
    for (const auto& op : out_.cpu_ops)
      if (op.collective) comms.push_back(&op);
    std::sort(comms.begin(), comms.end(), [](const CpuOp* a, const CpuOp* b) { return a->start_ns < b->start_ns; });
    for (auto& g : out_.gpu) {
      if (!g.collective || g.collective->sized()) continue;
      const auto launch = launch_of.find(g.correlation);
      if (launch == launch_of.end()) continue;
      const auto* l = launch->second;
      // the innermost record_param_comms on the launching thread that contains the launch
      const CpuOp* best = nullptr;
      for (const auto* op : comms) {
        if (op->start_ns > l->start_ns) break;
        if (op->thread == l->thread && op->end_ns() >= l->end_ns()) best = op;
      }
      if (best == nullptr) continue;
      const auto name_algorithm = g.collective->algorithm;
      const auto name_protocol = g.collective->protocol;
      const auto kernel_op = g.collective->op;
      *g.collective = *best->collective;
      g.collective->algorithm = name_algorithm;
      g.collective->protocol = name_protocol;
      if (g.collective->op.empty()) g.collective->op = kernel_op;
    }
  }

  void normalise_times() {
    std::int64_t base = std::numeric_limits<std::int64_t>::max();
    for (const auto& g : out_.gpu) base = std::min(base, g.start_ns);
    for (const auto& r : out_.runtime) base = std::min(base, r.start_ns);
    for (const auto& s : out_.steps) base = std::min(base, s.start_ns);
    for (const auto& c : out_.cpu_ops) base = std::min(base, c.start_ns);
    if (base == std::numeric_limits<std::int64_t>::max()) base = 0;
    std::int64_t last = base;
    for (const auto& g : out_.gpu) last = std::max(last, g.end_ns());
    for (const auto& r : out_.runtime) last = std::max(last, r.end_ns());
    for (const auto& st : out_.steps) last = std::max(last, st.end_ns());
    for (const auto& c : out_.cpu_ops) last = std::max(last, c.end_ns());
    // one profiling session lasts seconds to hours; replayed times must stay far from overflow
    if (last - base > kMaxSpanNs)
      throw SpecError(out_.path, "/traceEvents",
                      fmt::format("events span {:.1f} days; one profiling session spans at most a day "
                                  "(a corrupt timestamp?)",
                                  static_cast<double>(last - base) / 86400e9));
    out_.base_ns = base;
    for (auto& g : out_.gpu) g.start_ns -= base;
    for (auto& r : out_.runtime) r.start_ns -= base;
    for (auto& s : out_.steps) s.start_ns -= base;
    for (auto& c : out_.cpu_ops) c.start_ns -= base;
    const auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    std::stable_sort(out_.gpu.begin(), out_.gpu.end(), by_start);
    std::stable_sort(out_.runtime.begin(), out_.runtime.end(), by_start);
    std::stable_sort(out_.steps.begin(), out_.steps.end(), by_start);
    std::stable_sort(out_.cpu_ops.begin(), out_.cpu_ops.end(), by_start);
  }

  RankTrace out_;
  std::string top_key_;
  json top_ = json::object();
  bool saw_events_ = false;
  std::map<std::string, std::int64_t> ignored_;
  std::int64_t skipped_ = 0;
};

// nlohmann's SAX interface, routed to the reader.
class Sax : public nlohmann::json_sax<json> {
 public:
  Sax(TraceReader& reader, const std::string& path) : reader_(reader), path_(path) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t& v) override { return value(json::binary(std::move(v))); }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (depth_ == 1) {
      reader_.top_key(k);
      return true;
    }
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
      reader_.keep_top(std::move(v));
      return true;
    }
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
    builder_.open(std::move(v));
    return true;
  }
  bool close() {
    if (depth_ == 2 && in_event_list_) {
      in_event_list_ = false;
    } else if (depth_ >= 2) {
      builder_.close();
      deliver();
    }
    --depth_;
    return true;
  }
  void deliver() {
    if (!builder_.done()) return;
    if (in_event_list_)
      reader_.event(builder_.take());
    else
      reader_.keep_top(builder_.take());
  }

  static constexpr int kMaxDepth = 64;
  TraceReader& reader_;
  const std::string& path_;
  Builder builder_;
  int depth_ = 0;
  bool in_event_list_ = false;
};

}  // namespace

int dtype_bytes(std::string_view dtype) {
  std::string d;
  for (const char c : dtype) d += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d == "double" || d == "long" || d == "int64" || d == "float64") return 8;
  if (d == "float" || d == "float32" || d == "int" || d == "int32") return 4;
  if (d == "half" || d == "bfloat16" || d == "float16" || d == "short" || d == "int16") return 2;
  if (d == "byte" || d == "char" || d == "bool" || d == "int8" || d == "uint8" || d.find("float8") == 0) return 1;
  return 0;
}

std::int64_t Collective::bytes() const {
  const int size = dtype_bytes(dtype);
  const auto elements = op == "all_gather" ? std::max(in_elements, out_elements) : in_elements;
  // an element count whose bytes overflow is as unknown as a missing one
  if (size == 0 || in_elements < 0 || elements > std::numeric_limits<std::int64_t>::max() / size) return -1;
  return elements * size;
}

std::optional<Collective> collective_from_kernel_name(std::string_view name) {
  const auto paren = name.find('(');
  const auto base = name.substr(0, paren);
  std::string_view rest;
  if (base.rfind("ncclKernel_", 0) == 0)
    rest = base.substr(11);
  else if (base.rfind("ncclDevKernel_", 0) == 0)
    rest = base.substr(14);
  else
    return std::nullopt;
  // <Coll>_<ALGO>_<PROTO>_<Op>_<type>; newer ones may stop after <Coll>
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= rest.size()) {
    const auto end = std::min(rest.find('_', start), rest.size());
    parts.push_back(rest.substr(start, end - start));
    start = end + 1;
  }
  Collective c;
  c.op = op_from_collective_name(parts.front());
  if (parts.size() >= 3) {
    c.algorithm = std::string(parts[1]);
    c.protocol = std::string(parts[2]);
  }
  return c;
}

RankTrace read_trace(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw IoError(fmt::format("{}: cannot open: No such file or directory", path));
  if (!std::filesystem::is_regular_file(path, ec))
    throw IoError(fmt::format("{}: cannot read: not a regular file", path));
  GzipBuffer buffer(path);
  if (!buffer.is_open()) throw IoError(fmt::format("{}: cannot open", path));
  std::istream in(&buffer);
  TraceReader reader(path);
  Sax sax(reader, path);
  try {
    json::sax_parse(in, &sax);
  } catch (const SpecError& e) {
    if (!buffer.error().empty())
      throw SpecError(path, "",
                      fmt::format("corrupt or truncated gzip stream ({}) after {} decompressed bytes", buffer.error(),
                                  buffer.consumed()));
    throw;
  }
  if (!buffer.error().empty())
    throw SpecError(path, "",
                    fmt::format("corrupt or truncated gzip stream ({}) after {} decompressed bytes", buffer.error(),
                                buffer.consumed()));
  return reader.finish();
}

}  // namespace trainsim::trace
