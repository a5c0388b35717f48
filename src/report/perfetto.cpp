// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one process per
// simulated rank, one thread per stream, one complete ("X") event per task and stream.
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "trainsim/report/perfetto.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

std::string escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

}  // namespace

void write_perfetto(const lower::Lowered& lowered, const sim::Timeline& timeline, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  const auto& g = lowered.graph;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  const auto emit = [&](const std::string& event) {
    if (!first) out << ",\n";
    out << event;
    first = false;
  };
  for (const auto& rank : lowered.ranks) {
    emit(fmt::format(R"j({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {} (stage {})"}}}})j",
                     rank.rank, rank.rank, rank.stage));
    emit(fmt::format(R"j({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})j", rank.rank,
                     rank.rank));
    int k = 0;  // the thread: the stream's position (the second lane's after the first's kinds)
    lower::for_each_stream(rank, [&](lower::StreamKind kind, sim::StreamId stream) {
      const bool second = k >= lower::kStreamKinds;
      const int tid = k++;
      const auto& tasks = g.stream_tasks(stream);
      if (tasks.empty()) return;
      emit(fmt::format(R"j({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})j", rank.rank,
                       tid, second ? g.stream(stream).name : std::string(lower::stream_kind_name(kind))));
      for (const auto t : tasks) {
        const auto& span = timeline.tasks[t.index()];
        emit(fmt::format(R"j({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f}}})j",
                         escaped(g.name(t)), lower::category_name(static_cast<lower::Category>(g.category(t))),
                         rank.rank, tid, span.start.ps * 1e-6, (span.end - span.start).ps * 1e-6));
      }
    });
  }
  out << "\n]}\n";
  if (!out) throw IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
}

}  // namespace trainsim::report
