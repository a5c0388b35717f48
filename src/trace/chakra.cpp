// Reading Chakra execution traces and replaying them on the engine (trace/chakra.hpp).
#include "trainsim/trace/chakra.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <queue>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/delimited_message_util.h>

#include "et_def.pb.h"
#include "trainsim/cost/cost_model.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

namespace pb = ChakraProtoMsg;
using Kind = ChakraNode::Kind;

constexpr std::int64_t kPsPerMicro = 1'000'000;
// A Duration holds 106 days; a node longer than a day is not a training step's.
constexpr std::uint64_t kMaxMicros = 86'400ull * 1'000'000ull;

// Chakra's CollectiveCommType as trainsim's collective names; "" for those the cost model lacks.
std::string collective_op(std::int64_t type) {
  switch (type) {
    case pb::ALL_REDUCE:
      return "all_reduce";
    case pb::REDUCE:
      return "reduce";
    case pb::ALL_GATHER:
      return "all_gather";
    case pb::BROADCAST:
      return "broadcast";
    case pb::ALL_TO_ALL:
      return "all_to_all";
    case pb::REDUCE_SCATTER:
    case pb::REDUCE_SCATTER_BLOCK:
      return "reduce_scatter";
    default:
      return "";  // gather, scatter, barrier: kept at their recorded time
  }
}

struct Attributes {
  std::map<std::string, const pb::AttributeProto*> by_name;
  explicit Attributes(const pb::Node& n) {
    for (const auto& a : n.attr()) by_name.emplace(a.name(), &a);
  }
  const pb::AttributeProto* find(const char* name) const {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }
  // An integer attribute in any of Chakra's integer encodings.
  std::optional<std::int64_t> integer(const char* name) const {
    const auto* a = find(name);
    if (a == nullptr) return std::nullopt;
    switch (a->value_case()) {
      case pb::AttributeProto::kInt64Val:
        return a->int64_val();
      case pb::AttributeProto::kInt32Val:
        return a->int32_val();
      case pb::AttributeProto::kUint64Val:
        return static_cast<std::int64_t>(std::min<std::uint64_t>(a->uint64_val(), INT64_MAX));
      case pb::AttributeProto::kUint32Val:
        return a->uint32_val();
      case pb::AttributeProto::kSint64Val:
        return a->sint64_val();
      case pb::AttributeProto::kSint32Val:
        return a->sint32_val();
      default:
        return std::nullopt;
    }
  }
  bool flag(const char* name) const {
    const auto* a = find(name);
    return a != nullptr && a->value_case() == pb::AttributeProto::kBoolVal && a->bool_val();
  }
  std::string text(const char* name) const {
    const auto* a = find(name);
    return a != nullptr && a->value_case() == pb::AttributeProto::kStringVal ? a->string_val() : std::string();
  }
};

// One node, checked; `where` names it in errors.
ChakraNode read_node(const pb::Node& n, const std::string& path) {
  const auto fail = [&](const std::string& what) {
    throw SpecError(path, "", fmt::format("node {} (\"{}\"): {}", n.id(), n.name(), what));
  };
  if (!pb::NodeType_IsValid(n.type()) || n.type() == pb::INVALID_NODE)
    fail(fmt::format("unknown node type {}", static_cast<int>(n.type())));
  // a duration within a day; a start within 2^62 µs (any epoch-based clock), so that start + duration
  // cannot overflow
  if (n.duration_micros() > kMaxMicros || n.start_time_micros() > (std::uint64_t{1} << 62))
    fail(fmt::format("a time out of range ({} µs from {} µs)", n.duration_micros(), n.start_time_micros()));
  const Attributes a(n);
  ChakraNode node{.id = n.id(), .name = n.name()};
  node.start_us = static_cast<std::int64_t>(n.start_time_micros());
  // trainsim's own exports keep the exact time beside Chakra's whole microseconds
  const auto exact = a.integer("trainsim_duration_ps");
  node.duration_ps = exact && *exact >= 0 && *exact <= static_cast<std::int64_t>(kMaxMicros) * kPsPerMicro
                         ? *exact
                         : static_cast<std::int64_t>(n.duration_micros()) * kPsPerMicro;
  node.stream = a.integer("tid").value_or(0);
  node.flops = static_cast<double>(std::max<std::int64_t>(a.integer("num_ops").value_or(0), 0));
  node.tensor_bytes = static_cast<double>(std::max<std::int64_t>(a.integer("tensor_size").value_or(0), 0));
  const bool cpu = a.flag("is_cpu_op");
  switch (n.type()) {
    case pb::COMP_NODE:
      node.kind = cpu ? Kind::Host : Kind::Compute;
      break;
    case pb::COMM_COLL_NODE: {
      if (cpu) {  // the CPU operator around a collective (c10d::allreduce_): host time
        node.kind = Kind::Host;
        break;
      }
      node.kind = Kind::Collective;
      const auto type = a.integer("comm_type");
      if (!type) fail("a collective without comm_type");
      if (!pb::CollectiveCommType_IsValid(static_cast<int>(*type))) fail(fmt::format("unknown comm_type {}", *type));
      node.op = collective_op(*type);
      node.bytes = a.integer("comm_size").value_or(-1);
      if (node.bytes < -1) fail(fmt::format("comm_size {} is negative", node.bytes));
      node.group = a.text("pg_name");
      break;
    }
    case pb::COMM_SEND_NODE:
    case pb::COMM_RECV_NODE: {
      const bool send = n.type() == pb::COMM_SEND_NODE;
      node.kind = send ? Kind::Send : Kind::Recv;
      const auto peer = a.integer(send ? "comm_dst" : "comm_src");
      if (!peer || *peer < 0 || *peer > (1 << 24))
        fail(fmt::format("a {} without its peer ({})", send ? "send" : "receive", send ? "comm_dst" : "comm_src"));
      node.peer = static_cast<int>(*peer);
      node.tag = a.integer("comm_tag").value_or(0);
      node.bytes = a.integer("comm_size").value_or(-1);
      break;
    }
    default:
      node.kind = Kind::Other;
      break;
  }
  // data_deps order execution; ctrl_deps do not (Chakra's feeder resolves data_deps only: its
  // PyTorch converter's ctrl_deps point at enclosing operators, and may point both ways)
  node.deps.assign(n.data_deps().begin(), n.data_deps().end());
  node.ctrl_deps.assign(n.ctrl_deps().begin(), n.ctrl_deps().end());
  std::sort(node.deps.begin(), node.deps.end());
  node.deps.erase(std::unique(node.deps.begin(), node.deps.end()), node.deps.end());
  return node;
}

// Drops dependencies on absent nodes (Chakra's converters leave them; its feeder skips them too)
// and refuses a cycle, naming a node on it.
void check_graph(ChakraTrace& t) {
  std::map<std::uint64_t, std::size_t> index;
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    if (!index.emplace(t.nodes[i].id, i).second)
      throw SpecError(t.path, "",
                      fmt::format("node {} (\"{}\"): a second node with this id", t.nodes[i].id, t.nodes[i].name));
  std::set<std::uint64_t> missing;
  for (auto& n : t.nodes)
    for (auto* deps : {&n.deps, &n.ctrl_deps}) {
      const auto before = deps->size();
      std::erase_if(*deps, [&](std::uint64_t d) { return !index.contains(d) && (missing.insert(d), true); });
      t.missing_deps += static_cast<std::int64_t>(before - deps->size());
      std::erase(*deps, n.id);  // a node waiting on itself waits on nothing
    }
  t.missing_nodes = static_cast<std::int64_t>(missing.size());
  // Kahn: what is left unordered lies on or behind a cycle
  std::vector<int> waiting(t.nodes.size());
  std::vector<std::vector<std::size_t>> users(t.nodes.size());
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    for (const auto d : t.nodes[i].deps) {
      ++waiting[i];
      users[index.at(d)].push_back(i);
    }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    if (waiting[i] == 0) ready.push_back(i);
  std::size_t done = 0;
  while (!ready.empty()) {
    const auto i = ready.back();
    ready.pop_back();
    ++done;
    for (const auto u : users[i])
      if (--waiting[u] == 0) ready.push_back(u);
  }
  if (done == t.nodes.size()) return;
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    if (waiting[i] > 0)
      throw SpecError(t.path, "",
                      fmt::format("node {} (\"{}\"): its dependencies form a cycle", t.nodes[i].id, t.nodes[i].name));
}

}  // namespace

ChakraTrace read_chakra(const std::string& path, int rank) {
  // protobuf logs what it rejects (invalid UTF-8 in a string field) to stderr; the SpecError below
  // says it once, naming the file
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  std::ifstream file(path, std::ios::binary);
  if (!file) throw IoError(fmt::format("{}: cannot open", path));
  google::protobuf::io::IstreamInputStream raw(&file);
  ChakraTrace t{.path = path, .rank = rank};
  pb::GlobalMetadata meta;
  bool clean_eof = false;
  if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&meta, &raw, &clean_eof))
    throw SpecError(path, "",
                    clean_eof ? "empty: a Chakra trace starts with its global metadata"
                              : "not a Chakra trace: the global metadata does not parse (corrupt or truncated)");
  for (;;) {
    pb::Node n;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&n, &raw, &clean_eof)) {
      if (clean_eof) break;
      throw SpecError(
          path, "",
          fmt::format(
              "corrupt or truncated protobuf after {} nodes{}", t.nodes.size(),
              t.nodes.empty() ? std::string() : fmt::format(" (the last whole one is node {})", t.nodes.back().id)));
    }
    t.nodes.push_back(read_node(n, path));
  }
  if (t.nodes.empty()) throw SpecError(path, "", "no nodes: nothing to replay");
  check_graph(t);
  return t;
}

ChakraJob read_chakra_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError(fmt::format("{}: not a folder of Chakra traces", dir));
  ChakraJob job{.dir = dir};
  std::map<int, std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (e.path().extension() != ".et") continue;
    // <prefix>.<rank>.et
    const auto stem = e.path().stem().string();
    const auto dot = stem.rfind('.');
    const auto digits = std::string_view(stem).substr(dot == std::string::npos ? 0 : dot + 1);
    int rank = -1;
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (err != std::errc() || end != digits.data() + digits.size() || rank < 0)
      throw SpecError(e.path().string(), "", "a Chakra trace is named <prefix>.<rank>.et (chakra.0.et)");
    if (!files.emplace(rank, e.path().string()).second)
      throw SpecError(e.path().string(), "", fmt::format("a second trace of rank {} (also {})", rank, files.at(rank)));
  }
  if (files.empty()) throw SpecError(dir, "", "no Chakra traces (<prefix>.<rank>.et) in the folder");
  for (const auto& [rank, path] : files) job.ranks.push_back(read_chakra(path, rank));
  const auto groups = fs::path(dir) / "comm_group.json";
  if (fs::exists(groups, ec)) {
    const auto json = spec::load_json_file(groups.string());
    if (!json.is_object()) throw SpecError(groups.string(), "", "expected an object {\"GROUP\": [RANK, ...], ...}");
    for (const auto& item : json.items()) {
      const std::string name = item.key();  // (clang 14 cannot capture structured bindings)
      const auto& ranks = item.value();
      std::vector<int> members;
      const auto fail = [&] {
        throw SpecError(groups.string(), "/" + name, "expected a list of distinct ranks (integers ≥ 0)");
      };
      if (!ranks.is_array() || ranks.empty()) fail();
      for (const auto& r : ranks) {
        if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() > (1 << 24)) fail();
        members.push_back(r.get<int>());
      }
      std::sort(members.begin(), members.end());
      if (std::adjacent_find(members.begin(), members.end()) != members.end()) fail();
      job.groups.emplace(name, std::move(members));
    }
  }
  for (const auto& t : job.ranks)
    if (t.missing_deps > 0)
      job.warnings.push_back(
          fmt::format("{}: {} dependencies on {} nodes the file does not hold were dropped (as "
                      "Chakra's feeder does)",
                      t.path, t.missing_deps, t.missing_nodes));
  return job;
}

}  // namespace trainsim::trace
