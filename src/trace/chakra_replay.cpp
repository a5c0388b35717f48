// Replaying Chakra traces on the engine (trace/chakra.hpp): every rank's nodes in a dependency
// order, issued in lockstep so that an operation spanning ranks (a collective, a send with its
// receive) is one task on all of their streams, as trainsim's own lowering issues them.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <queue>

#include <fmt/format.h>

#include "trainsim/cost/cost_model.hpp"
#include "trainsim/sim/engine.hpp"
#include "trainsim/topo/topology.hpp"
#include "trainsim/trace/chakra.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::trace {
namespace {

using Kind = ChakraNode::Kind;
using sim::TaskId;

constexpr std::size_t kNone = ~std::size_t{0};

// An operation spanning ranks: (rank index, node index) of each member.
struct Shared {
  std::vector<std::pair<std::size_t, std::size_t>> members;
  std::string what;        // for errors: "collective #3 of group \"0\""
  std::vector<int> group;  // the group's ranks (all of them, present or not), for costing
  bool transfer = false;
};

struct Rank {
  const ChakraTrace* trace = nullptr;
  std::vector<std::size_t> order;   // node indices in issue order
  std::vector<TaskId> task;         // by node index
  std::vector<std::size_t> shared;  // by node index: its Shared, or kNone
  std::map<std::pair<int, std::int64_t>, sim::StreamId> streams;
  std::map<std::uint64_t, std::size_t> index;  // node id -> node index
  std::size_t cursor = 0;
};

class ChakraReplayer {
 public:
  ChakraReplayer(const ChakraJob& job, const ReplayOptions& options, const ComputeCosting& compute)
      : job_(job), options_(options), compute_(compute) {
    for (const auto& t : job.ranks) ranks_.push_back(Rank{.trace = &t});
    for (std::size_t r = 0; r < ranks_.size(); ++r) index_of_rank_[job.ranks[r].rank] = r;
  }

  sim::TaskGraph build(ChakraReport& report) {
    for (auto& r : ranks_) order(r);
    match(report);
    issue();
    return std::move(graph_);
  }

  const std::vector<Rank>& ranks() const { return ranks_; }
  bool costs_compute(const ChakraNode& n) const { return costed_compute(n).has_value(); }

 private:
  // Kahn's order, the recorded start times (then file order) choosing among ready nodes.
  static void order(Rank& r) {
    const auto& nodes = r.trace->nodes;
    auto& index = r.index;
    for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i].id, i);
    std::vector<int> waiting(nodes.size());
    std::vector<std::vector<std::size_t>> users(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i)
      for (const auto d : nodes[i].deps) {
        ++waiting[i];
        users[index.at(d)].push_back(i);
      }
    using Ready = std::pair<std::int64_t, std::size_t>;
    std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (waiting[i] == 0) ready.emplace(nodes[i].start_us, i);
    while (!ready.empty()) {
      const auto i = ready.top().second;
      ready.pop();
      r.order.push_back(i);
      for (const auto u : users[i])
        if (--waiting[u] == 0) ready.emplace(nodes[u].start_us, u);
    }
    r.task.assign(nodes.size(), TaskId{0});
    r.shared.assign(nodes.size(), kNone);
  }

  std::vector<int> group_ranks(const std::string& group, const ChakraNode& n, const std::string& path) const {
    if (group.empty() || job_.groups.empty()) {
      std::vector<int> all;
      for (const auto& t : job_.ranks) all.push_back(t.rank);
      return all;
    }
    const auto it = job_.groups.find(group);
    if (it == job_.groups.end())
      throw SpecError(path, "",
                      fmt::format("node {} (\"{}\"): a collective of process group \"{}\", which comm_group.json "
                                  "does not define",
                                  n.id, n.name, group));
    return it->second;
  }

  // The k-th collective of a group on each of its ranks is one collective; the k-th send from a
  // to b with a tag and the k-th receive at b from a with that tag are one transfer.
  void match(ChakraReport& report) {
    std::map<std::pair<std::string, std::int64_t>, std::size_t> collectives;
    std::map<std::tuple<int, int, std::int64_t, std::int64_t>, std::size_t> transfers;
    for (std::size_t ri = 0; ri < ranks_.size(); ++ri) {
      auto& r = ranks_[ri];
      std::map<std::string, std::int64_t> seen;
      std::map<std::tuple<int, int, std::int64_t>, std::int64_t> sent, received;
      for (const auto i : r.order) {
        const auto& n = r.trace->nodes[i];
        if (n.kind == Kind::Collective) {
          const auto key = std::pair{n.group, seen[n.group]++};
          auto [it, fresh] = collectives.try_emplace(key, shared_.size());
          if (fresh) {
            shared_.push_back({.what = fmt::format("collective #{} of group \"{}\"", key.second + 1, n.group),
                               .group = group_ranks(n.group, n, r.trace->path)});
          }
          shared_[it->second].members.emplace_back(ri, i);
          r.shared[i] = it->second;
        } else if (n.kind == Kind::Send || n.kind == Kind::Recv) {
          const bool send = n.kind == Kind::Send;
          const int src = send ? r.trace->rank : n.peer;
          const int dst = send ? n.peer : r.trace->rank;
          auto& count = (send ? sent : received)[{src, dst, n.tag}];
          const auto key = std::tuple{src, dst, n.tag, count++};
          auto [it, fresh] = transfers.try_emplace(key, shared_.size());
          if (fresh)
            shared_.push_back({.what = fmt::format("transfer #{} from rank {} to rank {} (tag {})",
                                                   std::get<3>(key) + 1, src, dst, n.tag),
                               .group = {src, dst},
                               .transfer = true});
          shared_[it->second].members.emplace_back(ri, i);
          r.shared[i] = it->second;
        }
      }
    }
    // every present member of a group must hold each of its collectives
    for (const auto& s : shared_) {
      if (s.transfer) continue;
      ++report.collectives;
      std::size_t present = 0;
      for (const int rank : s.group) present += index_of_rank_.contains(rank) ? 1 : 0;
      if (s.members.size() != present) {
        std::vector<int> have;
        for (const auto& [ri, i] : s.members) have.push_back(ranks_[ri].trace->rank);
        throw SpecError(job_.dir, "",
                        fmt::format("{} is on ranks {} but the group's ranks with a trace here are {}: the ranks "
                                    "disagree on their collectives",
                                    s.what, fmt::join(have, ","), present));
      }
    }
  }

  sim::StreamId stream_of(std::size_t ri, const ChakraNode& n) {
    auto& r = ranks_[ri];
    const auto key = std::pair{static_cast<int>(n.kind), n.stream};
    if (const auto it = r.streams.find(key); it != r.streams.end()) return it->second;
    static constexpr const char* kNames[] = {"gpu", "cpu", "collective", "send", "recv", "other"};
    const auto id = graph_.add_stream({.name = fmt::format("{} {}", kNames[static_cast<int>(n.kind)], n.stream),
                                       .process = static_cast<std::uint32_t>(ri),
                                       .kind = static_cast<std::uint16_t>(n.kind),
                                       .device = false});
    r.streams.emplace(key, id);
    return id;
  }

  // A device kernel on the costing device: its FLOPs and bytes on a roofline.
  std::optional<Duration> costed_compute(const ChakraNode& n) const {
    if (compute_.device == nullptr || n.kind != Kind::Compute || (n.flops <= 0 && n.tensor_bytes <= 0))
      return std::nullopt;
    const auto& d = *compute_.device;
    const auto peak = d.peak_flops.find(spec::Dtype::Bf16);
    if (peak == d.peak_flops.end() || peak->second.flop_per_s <= 0 || d.memory_bandwidth.bytes_per_s <= 0)
      return std::nullopt;
    const auto& k = compute_.kernels;
    const double math = n.flops / (peak->second.flop_per_s * k.gemm_ceiling * k.sustained_fraction);
    const double memory = n.tensor_bytes / (d.memory_bandwidth.bytes_per_s * k.hbm_efficiency);
    // the p-norm of the two, as the kernel model joins them (large p: the longer one)
    const double longer = std::max(math, memory);
    const double shorter = std::min(math, memory);
    const double p = k.roofline_sharpness;
    const double seconds = longer * std::pow(1.0 + std::pow(shorter / longer, p), 1.0 / p);
    return Duration::from_seconds(seconds / options_.compute_scale);
  }

  Duration own(const ChakraNode& n) const {
    if (const auto costed = costed_compute(n)) return *costed;
    const bool device = n.kind != Kind::Host && n.kind != Kind::Other;
    if (!device || (n.kind == Kind::Compute ? options_.compute_scale : options_.network_scale) == 1.0)
      return Duration{n.duration_ps};
    const double ps = static_cast<double>(n.duration_ps);
    switch (n.kind) {
      case Kind::Compute:
        return Duration::from_seconds(ps * 1e-12 / options_.compute_scale);
      case Kind::Collective:
      case Kind::Send:
      case Kind::Recv:
        return Duration::from_seconds(ps * 1e-12 / options_.network_scale);
      default:
        return Duration{n.duration_ps};
    }
  }

  // An operation across ranks: costed by the model when there is one and it knows the operation,
  // else the shortest recorded instance (the others include waiting for their peers).
  Duration shared_duration(const Shared& s) {
    Duration recorded = Duration::max();
    for (const auto& [ri, i] : s.members) recorded = std::min(recorded, own(ranks_[ri].trace->nodes[i]));
    const auto& n = ranks_[s.members.front().first].trace->nodes[s.members.front().second];
    if (options_.costs == nullptr || n.bytes < 0 || (!s.transfer && (n.op.empty() || s.group.size() < 2)))
      return recorded;
    const auto devices = options_.costs->topology().num_devices();
    for (const int rank : s.group)
      if (rank >= devices) return recorded;
    ++costed_;
    if (s.transfer)
      return options_.costs
          ->p2p(topo::DeviceId{static_cast<std::uint32_t>(s.group[0])},
                topo::DeviceId{static_cast<std::uint32_t>(s.group[1])}, Bytes{n.bytes})
          .time;
    cost::Group group;
    for (const int rank : s.group) group.devices.push_back(topo::DeviceId{static_cast<std::uint32_t>(rank)});
    std::sort(group.devices.begin(), group.devices.end());
    return options_.costs->cost(cost::make_collective(cost::collective_kind_from_name(n.op), Bytes{n.bytes}), group)
        .time;
  }

  std::vector<TaskId> deps_of(std::size_t ri, std::size_t i) const {
    const auto& r = ranks_[ri];
    std::vector<TaskId> deps;
    const auto& nodes = r.trace->nodes;
    for (const auto d : nodes[i].deps) deps.push_back(r.task[r.index.at(d)]);
    return deps;
  }

  bool at(const Shared& s) const {
    for (const auto& [ri, i] : s.members) {
      const auto& r = ranks_[ri];
      if (r.cursor >= r.order.size() || r.order[r.cursor] != i) return false;
    }
    return true;
  }

  // Issues every rank's nodes in order; an operation across ranks once all of them reach it.
  void issue() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (std::size_t ri = 0; ri < ranks_.size(); ++ri) {
        auto& r = ranks_[ri];
        while (r.cursor < r.order.size()) {
          const auto i = r.order[r.cursor];
          const auto& n = r.trace->nodes[i];
          if (r.shared[i] == kNone) {
            const auto deps = deps_of(ri, i);
            r.task[i] = graph_.add_task(std::string_view(n.name), stream_of(ri, n), sim::ComputeWork{own(n)}, deps,
                                        static_cast<std::uint16_t>(n.kind));
            ++r.cursor;
            progress = true;
            continue;
          }
          const auto& s = shared_[r.shared[i]];
          if (!at(s)) break;
          std::vector<TaskId> deps;
          std::vector<sim::StreamId> streams;
          for (const auto& [mi, mn] : s.members) {
            const auto d = deps_of(mi, mn);
            deps.insert(deps.end(), d.begin(), d.end());
            streams.push_back(stream_of(mi, ranks_[mi].trace->nodes[mn]));
          }
          std::sort(deps.begin(), deps.end());
          deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
          const auto task = graph_.add_task(std::string_view(n.name), streams, sim::ComputeWork{shared_duration(s)},
                                            deps, static_cast<std::uint16_t>(n.kind));
          for (const auto& [mi, mn] : s.members) {
            ranks_[mi].task[mn] = task;
            ++ranks_[mi].cursor;
          }
          progress = true;
        }
      }
    }
    for (const auto& r : ranks_) {
      if (r.cursor == r.order.size()) continue;
      const auto& n = r.trace->nodes[r.order[r.cursor]];
      throw SpecError(r.trace->path, "",
                      fmt::format("node {} (\"{}\"): {} never gathers all its ranks (the ranks issue their "
                                  "collectives or transfers in different orders)",
                                  n.id, n.name, shared_[r.shared[r.order[r.cursor]]].what));
    }
  }

 public:
  std::int64_t costed_ = 0;

 private:
  const ChakraJob& job_;
  const ReplayOptions& options_;
  const ComputeCosting& compute_;
  std::vector<Rank> ranks_;
  std::map<int, std::size_t> index_of_rank_;
  std::vector<Shared> shared_;
  sim::TaskGraph graph_;
};

}  // namespace

ChakraReport replay_chakra(const ChakraJob& job, const ReplayOptions& options, const ComputeCosting& compute) {
  for (const auto& [name, scale] :
       {std::pair{"--compute-scale", options.compute_scale}, std::pair{"--network-scale", options.network_scale}})
    if (!(scale >= 0.01 && scale <= 1e6))
      throw SpecError(name, "", fmt::format("{} is not a factor in [0.01, 1e6]", scale));
  ChakraReport report{.dir = job.dir, .warnings = job.warnings};
  ChakraReplayer replayer(job, options, compute);
  const auto graph = replayer.build(report);
  const auto timeline = sim::run(graph);
  report.costed = replayer.costed_;
  for (const auto& r : replayer.ranks()) {
    const auto& t = *r.trace;
    ChakraRankFigures f{.path = t.path, .rank = t.rank, .missing_deps = t.missing_deps};
    std::int64_t first = INT64_MAX;
    std::int64_t last = 0;
    std::int64_t recorded_first = INT64_MAX;
    std::int64_t recorded_last = 0;
    bool timed = false;
    for (std::size_t i = 0; i < t.nodes.size(); ++i) {
      const auto& n = t.nodes[i];
      ++f.nodes;
      f.compute += n.kind == Kind::Compute;
      report.costed_compute += replayer.costs_compute(n) ? 1 : 0;
      f.host += n.kind == Kind::Host;
      f.collectives += n.kind == Kind::Collective;
      f.p2p += n.kind == Kind::Send || n.kind == Kind::Recv;
      const auto& span = timeline.tasks[r.task[i].index()];
      first = std::min(first, span.start.ps);
      last = std::max(last, span.end.ps);
      recorded_first = std::min(recorded_first, n.start_us);
      recorded_last = std::max(recorded_last, n.start_us + n.duration_ps / 1'000'000);
      timed = timed || n.start_us > 0;
    }
    f.replayed_s = static_cast<double>(last - first) * 1e-12;
    // traces without start times (all zero) have no recorded span
    f.recorded_s = timed ? static_cast<double>(recorded_last - recorded_first) * 1e-6 : 0.0;
    report.step_time_s = std::max(report.step_time_s, static_cast<double>(last) * 1e-12);
    report.ranks.push_back(f);
  }
  if (compute.device != nullptr)
    report.notes.push_back(
        fmt::format("{} device kernels costed on {} from their FLOPs (num_ops) and bytes "
                    "(tensor_size) on a roofline; the rest keep their recorded time",
                    report.costed_compute, compute.device->name));
  if (options.costs != nullptr)
    report.notes.push_back(
        fmt::format("{} collectives and transfers costed by the collective model on the topology "
                    "(ranks are its devices); the rest keep their recorded time",
                    report.costed));
  return report;
}

}  // namespace trainsim::trace
