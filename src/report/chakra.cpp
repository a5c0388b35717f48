// Writing a simulated step as Chakra execution traces. Each task becomes one node in the file of
// every simulated rank whose stream it occupies: compute kernels and the host's launches as
// COMP_NODEs (is_cpu_op tells them apart), collectives as COMM_COLL_NODEs of their group, pipeline
// transfers as a COMM_SEND_NODE on the sender and a COMM_RECV_NODE on the receiver. The task
// graph's dependencies within a rank are data_deps; a stream's order (CUDA's FIFO) is a ctrl_dep on
// the task before on the same stream. Durations are what the tasks took in the simulated step (with
// the slowdowns of shared links and lent SMs), in whole microseconds as Chakra stores them and
// exactly in picoseconds in `trainsim_duration_ps`: replayed as recorded, the files give the step
// back to the picosecond.
#include "trainsim/report/chakra.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <nlohmann/json.hpp>

#include "et_def.pb.h"
#include "trainsim/cost/collective.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::report {
namespace {

namespace pb = ChakraProtoMsg;
using lower::StreamKind;

pb::CollectiveCommType comm_type(cost::CollectiveKind kind) {
  switch (kind) {
    case cost::CollectiveKind::AllReduce:
      return pb::ALL_REDUCE;
    case cost::CollectiveKind::ReduceScatter:
      return pb::REDUCE_SCATTER;
    case cost::CollectiveKind::AllGather:
      return pb::ALL_GATHER;
    case cost::CollectiveKind::Broadcast:
      return pb::BROADCAST;
    case cost::CollectiveKind::Reduce:
      return pb::REDUCE;
    case cost::CollectiveKind::AllToAll:
      return pb::ALL_TO_ALL;
    case cost::CollectiveKind::SendRecv:
      break;
  }
  SIM_ASSERT(false, "a transfer is not a collective");
  return pb::ALL_REDUCE;
}

template <class T>
void attr(pb::Node& node, const char* name, T value) {
  auto* a = node.add_attr();
  a->set_name(name);
  if constexpr (std::is_same_v<T, bool>)
    a->set_bool_val(value);
  else if constexpr (std::is_same_v<T, std::string>)
    a->set_string_val(value);
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    a->set_uint64_val(value);
  else
    a->set_int64_val(value);
}

std::uint64_t micros(Duration d) {
  return static_cast<std::uint64_t>(std::llround(static_cast<double>(d.ps) * 1e-6));
}

struct StreamOwner {
  int rank_index = -1;
  StreamKind kind = StreamKind::Compute;
  int tid = 0;  // the stream's position on its rank: its kind, the second lane's after every kind
};

class Writer {
 public:
  Writer(const spec::Job& job, const lower::Lowered& lowered, const sim::Timeline& timeline)
      : job_(job), lowered_(lowered), graph_(lowered.graph), timeline_(timeline) {
    owners_.resize(graph_.num_streams());
    for (std::size_t r = 0; r < lowered.ranks.size(); ++r) {
      int position = 0;
      lower::for_each_stream(lowered.ranks[r], [&](StreamKind kind, sim::StreamId stream) {
        owners_[stream.index()] = {static_cast<int>(r), kind, position++};
      });
    }
    tasks_of_.resize(lowered.ranks.size());
    for (std::uint32_t t = 0; t < graph_.num_tasks(); ++t)
      for (const auto s : graph_.streams(sim::TaskId{t}))
        if (owners_[s.index()].rank_index >= 0)
          tasks_of_[static_cast<std::size_t>(owners_[s.index()].rank_index)].push_back({sim::TaskId{t}, s});
  }

  void write(std::size_t r, const std::string& path, ChakraExport& out, std::set<std::int32_t>& groups) {
    std::ofstream file(path, std::ios::binary);
    if (!file) throw IoError(fmt::format("{}: cannot write", path));
    const auto& sr = lowered_.ranks[r];
    pb::GlobalMetadata meta;
    meta.set_version("0.0.4");
    const auto add = [&](const char* name, std::int64_t value) {
      auto* a = meta.add_attr();
      a->set_name(name);
      a->set_int64_val(value);
    };
    auto* schema = meta.add_attr();
    schema->set_name("schema");
    schema->set_string_val(fmt::format("trainsim {}", TRAINSIM_VERSION));
    add("rank", sr.rank);
    add("world_size", job_.gpus);
    add("pipeline_stage", sr.stage);
    add("stands_for", sr.stands_for);
    bool ok = google::protobuf::util::SerializeDelimitedToOstream(meta, &file);
    for (const auto& [task, stream] : tasks_of_[r]) {
      auto node = node_of(task, stream, static_cast<int>(r), out);
      const auto& w = work(task);
      if (w.group >= 0 && w.op != static_cast<std::int16_t>(cost::CollectiveKind::SendRecv)) groups.insert(w.group);
      ok = ok && google::protobuf::util::SerializeDelimitedToOstream(node, &file);
    }
    file.flush();
    if (!ok || !file) throw IoError(fmt::format("{}: cannot write", path));
    ++out.files;
  }

 private:
  lower::TaskWork work(sim::TaskId t) const {
    return t.index() < lowered_.work.size() ? lowered_.work[t.index()] : lower::TaskWork{};
  }

  pb::Node node_of(sim::TaskId t, sim::StreamId stream, int rank_index, ChakraExport& out) const {
    pb::Node node;
    node.set_id(t.value);
    node.set_name(graph_.name(t));
    const auto owner = owners_[stream.index()];
    const auto w = work(t);
    const auto span = timeline_.tasks[t.index()];
    node.set_start_time_micros(micros(span.start));
    // what the task took in the simulated step: slowed by lent SMs, shared links and peers
    const Duration own = span.end - span.start;
    node.set_duration_micros(micros(own));
    if (!graph_.is_transfer(t)) {
      node.set_type(pb::COMP_NODE);
      attr(node, "is_cpu_op", owner.kind == StreamKind::Host);
      attr(node, "num_ops", static_cast<std::int64_t>(std::llround(w.flops)));
      attr(node, "tensor_size", static_cast<std::uint64_t>(std::llround(w.bytes)));
    } else {
      const auto bytes = std::get<sim::CommWork>(graph_.work(t)).bytes;
      SIM_ASSERT(w.group >= 0, "communication task {} without its group (record_work off?)", graph_.name(t));
      const auto kind = static_cast<cost::CollectiveKind>(w.op);
      attr(node, "is_cpu_op", false);
      if (kind == cost::CollectiveKind::SendRecv) {
        const auto& pair = lowered_.groups[static_cast<std::size_t>(w.group)];
        const bool sends = owner.kind == StreamKind::PpSendNext || owner.kind == StreamKind::PpSendPrev;
        node.set_type(sends ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE);
        attr(node, "comm_src", static_cast<std::int64_t>(pair[0]));
        attr(node, "comm_dst", static_cast<std::int64_t>(pair[1]));
        attr(node, "comm_tag", static_cast<std::int64_t>(t.value));
      } else {
        node.set_type(pb::COMM_COLL_NODE);
        attr(node, "comm_type", static_cast<std::int64_t>(comm_type(kind)));
        attr(node, "pg_name", fmt::format("{}", w.group));
      }
      attr(node, "comm_size", bytes);
      out.comm_bytes += bytes;
    }
    attr(node, "tid", static_cast<std::int64_t>(owner.tid));
    attr(node, "trainsim_duration_ps", own.ps);
    graph_.for_each_dependency(t, [&](sim::TaskId d) {
      if (on_rank(d, rank_index)) {
        node.add_data_deps(d.value);
        ++out.data_deps;
      }
    });
    // the task before it on this rank's stream (a stream's tasks are in issue order, ids rising)
    const auto& order = graph_.stream_tasks(stream);
    if (const auto at = std::lower_bound(order.begin(), order.end(), t); at != order.begin()) {
      node.add_ctrl_deps(std::prev(at)->value);
      ++out.ctrl_deps;
    }
    ++out.nodes;
    return node;
  }

  bool on_rank(sim::TaskId t, int rank_index) const {
    for (const auto s : graph_.streams(t))
      if (owners_[s.index()].rank_index == rank_index) return true;
    return false;
  }

  const spec::Job& job_;
  const lower::Lowered& lowered_;
  const sim::TaskGraph& graph_;
  const sim::Timeline& timeline_;
  std::vector<StreamOwner> owners_;
  std::vector<std::vector<std::pair<sim::TaskId, sim::StreamId>>> tasks_of_;  // per simulated rank
};

}  // namespace

ChakraExport write_chakra(const spec::Job& job, const lower::Lowered& lowered, const sim::Timeline& timeline,
                          const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create the folder: {}", dir, ec.message()));
  Writer writer(job, lowered, timeline);
  ChakraExport out;
  std::set<std::int32_t> groups;
  for (std::size_t r = 0; r < lowered.ranks.size(); ++r)
    writer.write(r, (std::filesystem::path(dir) / fmt::format("trainsim.{}.et", lowered.ranks[r].rank)).string(), out,
                 groups);
  nlohmann::ordered_json members = nlohmann::ordered_json::object();
  for (const auto g : groups) members[fmt::format("{}", g)] = lowered.groups[static_cast<std::size_t>(g)];
  const auto path = (std::filesystem::path(dir) / "comm_group.json").string();
  std::ofstream file(path);
  file << json_text(members) << "\n";
  if (!file) throw IoError(fmt::format("{}: cannot write", path));
  return out;
}

}  // namespace trainsim::report
