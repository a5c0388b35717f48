// Reading Kineto (PyTorch profiler) Chrome-trace files into RankTraces: each event is classified
// as it streams past (GPU kernels, copies and sets; CUDA runtime calls; profiler steps; the CPU
// ops whose shapes or collective arguments matter), then the metadata, the collective sizes of
// older traces and the time base are settled. Decompression (gzip_stream), the streaming parse
// (event_stream), field coercion (json_fields) and NCCL names (nccl_names) live beside it.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <istream>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/event_stream.hpp"
#include "trace/gzip_stream.hpp"
#include "trace/json_fields.hpp"
#include "trace/nccl_names.hpp"
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

constexpr std::int64_t kMaxSpanNs = 86'400'000'000'000;  // one profiling session: a day at most
// A trace of this many launched ops has one that started within this long of its launch.
constexpr std::int64_t kClockCheckOps = 100;
constexpr std::int64_t kMostLeastLaunchDelayNs = 10'000'000;

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
    check_launch_clocks();
    return std::move(out_);
  }

  // The GPU's and the CPU's clocks against each other: an op never starts before the runtime call
  // that launched it began, and in any real trace some op starts within microseconds of its launch
  // (the reference traces: 2–8 us at least). Either broken means the clocks disagree, and what the
  // replay and the critical path take from the launch delays is wrong by as much.
  void check_launch_clocks() {
    std::map<std::int64_t, std::int64_t> launched_at;  // correlation -> call start
    for (const auto& r : out_.runtime)
      if (r.correlation >= 0) launched_at.emplace(r.correlation, r.start_ns);
    std::int64_t launched = 0, early = 0;
    std::int64_t least = std::numeric_limits<std::int64_t>::max(), earliest = 0;
    for (const auto& g : out_.gpu) {
      const auto call = launched_at.find(g.correlation);
      if (g.correlation < 0 || call == launched_at.end()) continue;
      const auto delay = g.start_ns - call->second;
      ++launched;
      least = std::min(least, delay);
      if (delay < 0) ++early, earliest = std::min(earliest, delay);
    }
    if (early > 0)
      out_.warnings.push_back(fmt::format(
          "{} of {} GPU op(s) start before the runtime call that launched them (by up to {:.3f} ms): the GPU's clock "
          "reads behind the CPU's, and launch delays (replay, critical path) are unreliable",
          early, launched, static_cast<double>(-earliest) / 1e6));
    else if (launched >= kClockCheckOps && least > kMostLeastLaunchDelayNs)
      out_.warnings.push_back(fmt::format(
          "none of {} GPU ops starts within {} ms of the call that launched it (the least delay is {:.3f} ms): the "
          "GPU's clock probably reads that much ahead of the CPU's, and launch delays (replay, critical path) are "
          "unreliable",
          launched, kMostLeastLaunchDelayNs / 1'000'000, static_cast<double>(least) / 1e6));
  }

  // SAX side: the top level is an object; traceEvents' elements are events, other keys are kept.
  void top_key(const std::string& key) { top_key_ = key; }
  bool in_events() const { return top_key_ == "traceEvents"; }
  void events_seen() { saw_events_ = true; }
  // the metadata read_metadata uses; other top-level values (Kineto's own, a user's) are skipped
  bool wants_top() const { return top_key_ == "distributedInfo" || top_key_ == "deviceProperties"; }
  void keep_top(json value) { top_[top_key_] = std::move(value); }

  // A `[memory]` instant event: kept when it is a CUDA device's (args "Device Type" 1) and carries
  // the allocator's totals; others (the CPU's, malformed ones) are counted as skipped.
  void memory_event(const json& e, const ExactTimes& times) {
    const auto args = e.find("args");
    const auto ts = event_nanoseconds(e.find("ts"), e.end(), kMaxEventStartUs, times.ts_ns);
    if (args == e.end() || !args->is_object() || !ts) {
      ++skipped_;
      return;
    }
    if (as_int(args->value("Device Type", json(-1)), -1) != 1) return;
    const auto allocated = args->find("Total Allocated");
    const auto reserved = args->find("Total Reserved");
    if (allocated == args->end() || reserved == args->end() || !allocated->is_number() || !reserved->is_number()) {
      ++skipped_;
      return;
    }
    out_.memory.push_back({*ts, as_int(*allocated, 0), as_int(*reserved, 0)});
  }

  void event(const json& e, const ExactTimes& times) {
    ++out_.events;
    if (!e.is_object()) {
      ++ignored_["(not an object)"];
      return;
    }
    const auto ph = string_of(e, "ph");
    const auto cat = string_of(e, "cat");
    if (ph != "X") {
      if ((ph == "i" || ph == "I") && string_of(e, "name") == "[memory]") memory_event(e, times);
      if (ph != "M" && ph != "f" && ph != "s" && ph != "i" && ph != "I" && ph != "t") ++ignored_["ph " + ph];
      return;
    }
    const auto ts = e.find("ts");
    const auto dur = e.find("dur");
    const auto start_ns = event_nanoseconds(ts, e.end(), kMaxEventStartUs, times.ts_ns);
    const auto dur_ns = event_nanoseconds(dur, e.end(), kMaxEventDurationUs, times.dur_ns);
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
        CpuOp op{out_.names.intern(name), thread, start, length, {}, {}, std::nullopt};
        if (const auto dims = args.find("Input Dims"); dims != args.end() && dims->is_array()) {
          for (const auto& d : *dims) {
            std::vector<std::int64_t> shape;
            if (d.is_array())
              for (const auto& x : d)
                if (x.is_number_integer()) shape.push_back(x.get<std::int64_t>());
            op.input_dims.push_back(std::move(shape));
          }
        }
        if (const auto types = args.find("Input type"); types != args.end() && types->is_array())
          for (const auto& type : *types) op.input_types.push_back(type.is_string() ? type.get<std::string>() : "");
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
      // a rank or world size that is not a number (real traces hold "") is unknown, and said so
      for (const auto* key : {"rank", "world_size"})
        if (it->contains(key) && as_int(it->at(key), -1) < 0)
          out_.warnings.push_back(fmt::format("distributedInfo {} is {}, not a rank number: unknown", key,
                                              it->at(key).dump().substr(0, 40)));
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
    for (const auto& m : out_.memory) base = std::min(base, m.ts_ns);
    if (base == std::numeric_limits<std::int64_t>::max()) base = 0;
    std::int64_t last = base;
    for (const auto& g : out_.gpu) last = std::max(last, g.end_ns());
    for (const auto& r : out_.runtime) last = std::max(last, r.end_ns());
    for (const auto& st : out_.steps) last = std::max(last, st.end_ns());
    for (const auto& c : out_.cpu_ops) last = std::max(last, c.end_ns());
    for (const auto& m : out_.memory) last = std::max(last, m.ts_ns);
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
    for (auto& m : out_.memory) m.ts_ns -= base;
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

}  // namespace

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
  EventStream<TraceReader> sax(reader, path);
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
