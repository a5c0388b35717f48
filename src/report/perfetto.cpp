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
    for (int k = 0; k < lower::kStreamKinds; ++k) {
      const auto stream = rank.streams[static_cast<std::size_t>(k)];
      const auto& tasks = g.stream_tasks(stream);
      if (tasks.empty()) continue;
      emit(fmt::format(R"j({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})j", rank.rank, k,
                       lower::stream_kind_name(static_cast<lower::StreamKind>(k))));
      for (const auto t : tasks) {
        const auto& span = timeline.tasks[t.index()];
        emit(fmt::format(R"j({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f}}})j",
                         escaped(g.name(t)), lower::category_name(static_cast<lower::Category>(g.category(t))),
                         rank.rank, k, span.start.ps * 1e-6, (span.end - span.start).ps * 1e-6));
      }
    }
  }
  out << "\n]}\n";
  if (!out) throw IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
}

}  // namespace trainsim::report
