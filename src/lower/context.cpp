#include "lower/context.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <optional>

#include <fmt/format.h>
#include <boost/container_hash/hash.hpp>

#include "trainsim/model/flops.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::lower {
namespace {

using spec::ParallelDim;

constexpr ParallelDim kFoldedDims[] = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp};

// Ranks simulated, each with the number of ranks it stands for: all of them (each for itself), or
// per pipeline stage the ranks whose coordinates along tp, cp, ep and dp are each either one of
// the distinct ranks' coordinates or the first coordinate that is none of them. A rank stands for
// every rank that shares its distinct coordinates and has any other coordinate elsewhere: those
// run the same tasks at the same times, as identical data-parallel replicas and tensor-parallel
// peers do (docs/performance.md "What is simulated and what is folded"). Without distinct ranks:
// the first rank of every stage (tp = cp = ep = dp = 0), standing for gpus / pp ranks.
std::vector<std::pair<int, std::int64_t>> simulated_ranks(const topo::Placement& p, bool full,
                                                          const std::vector<int>& distinct,
                                                          const std::vector<DistinctGroup>& groups) {
  std::vector<std::pair<int, std::int64_t>> out;
  if (full) {
    for (int r = 0; r < p.world_size(); ++r) out.emplace_back(r, 1);
    return out;
  }
  if (distinct.empty() && groups.empty()) {  // the first rank of each stage stands for its stage
    std::int64_t stands_for = 1;
    for (const auto d : kFoldedDims) stands_for *= p.size(d);
    for (int stage = 0; stage < p.size(ParallelDim::Pp); ++stage)
      out.emplace_back(stage * p.stride(ParallelDim::Pp), stands_for);
    return out;
  }
  constexpr std::size_t kDims = std::size(kFoldedDims);
  std::array<std::vector<int>, kDims> special;  // per dim: the distinct ranks' coordinates
  std::array<int, kDims> generic{};             // per dim: the first coordinate that is none of them
  for (std::size_t d = 0; d < kDims; ++d) {
    for (const int r : distinct) special[d].push_back(p.coordinate(r, kFoldedDims[d]));
    // a group's members run alike: its own dimension is not split (its first rank has coordinate 0)
    for (const auto& g : groups)
      if (g.dim != kFoldedDims[d]) special[d].push_back(p.coordinate(g.rank, kFoldedDims[d]));
    std::sort(special[d].begin(), special[d].end());
    special[d].erase(std::unique(special[d].begin(), special[d].end()), special[d].end());
    generic[d] = 0;
    while (std::binary_search(special[d].begin(), special[d].end(), generic[d])) ++generic[d];
  }
  for (int r = 0; r < p.world_size(); ++r) {
    std::int64_t stands_for = 1;
    bool simulated = true;
    for (std::size_t d = 0; d < kDims && simulated; ++d) {
      const int c = p.coordinate(r, kFoldedDims[d]);
      if (std::binary_search(special[d].begin(), special[d].end(), c)) continue;
      simulated = c == generic[d];
      stands_for *= p.size(kFoldedDims[d]) - static_cast<std::int64_t>(special[d].size());
    }
    if (simulated) out.emplace_back(r, stands_for);
  }
  return out;
}

}  // namespace

Context::Context(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options, Lowered& out)
    : job_(&job),
      costs_(&costs),
      options_(&options),
      out_(&out),
      placement_(topo::Placement::from_strategy(job.strategy, job.dp)),
      kernels_(model::kernel_context(job, options.kernel)),
      shape_(model::gpu_layer_shape(job)) {
  stage_ranks_.resize(static_cast<std::size_t>(job.strategy.pp));
  stage_position_.assign(static_cast<std::size_t>(placement_.world_size()), kNotSimulated);
  std::optional<model::MemoryEstimate> estimated;  // when the caller has none
  const auto& memory = options.memory_estimate != nullptr
                           ? *options.memory_estimate
                           : estimated.emplace(model::estimate_memory(job, options.memory, options.nccl_channels));
  const auto runtime = model::runtime_memory(job, options.memory, options.nccl_channels);
  for (const auto& [r, stands_for] :
       simulated_ranks(placement_, options.full, options.distinct_ranks, options.distinct_groups)) {
    SimulatedRank sr;
    sr.rank = r;
    sr.stands_for = stands_for;
    sr.stage = placement_.coordinate(r, ParallelDim::Pp);
    const bool lanes = job.strategy.overlap_moe_comm;
    for (int k = 0; k < kStreamKinds; ++k) {
      const auto kind = static_cast<StreamKind>(k);
      sr.streams[static_cast<std::size_t>(k)] = out.graph.add_stream(
          {std::string(stream_kind_name(kind)), static_cast<std::uint32_t>(r), static_cast<std::uint16_t>(k),
           kind < StreamKind::Host, lanes && kind == StreamKind::Compute});
    }
    if (lanes)
      for (const auto kind : kLanedKinds)
        sr.second.push_back(
            out.graph.add_stream({fmt::format("{} 2", stream_kind_name(kind)), static_cast<std::uint32_t>(r),
                                  static_cast<std::uint16_t>(kind), true, kind == StreamKind::Compute}));
    const auto& stage_memory = memory.stages.at(static_cast<std::size_t>(sr.stage));
    sr.static_memory = stage_memory;
    const auto& b = stage_memory.bytes;
    // Weights, gradients, optimizer state, the runtime reserve and FP8 weight copies are held all
    // step; activations and communication buffers come and go with the tasks.
    const std::int64_t baseline = (b.params + b.grads + b.optimizer + runtime + stage_memory.held_buffers).count;
    sr.pool = out.graph.add_pool({static_cast<std::uint32_t>(r), baseline});
    rank_index_[r] = out.ranks.size();
    stage_position_[static_cast<std::size_t>(r)] = stage_ranks_[static_cast<std::size_t>(sr.stage)].size();
    stage_ranks_[static_cast<std::size_t>(sr.stage)].push_back(out.ranks.size());
    out.ranks.push_back(sr);
  }
  pending_.resize(out.ranks.size());
  last_compute_.assign(out.ranks.size(), {kNoTask, kNoTask});
  out.fold = placement_.world_size() / static_cast<std::int64_t>(out.ranks.size());
}

int Context::second_lane(StreamKind kind) const {
  return lane_ == 1 ? laned_index(kind) : -1;
}

std::size_t Context::slot(StreamKind kind) const {
  const int laned = second_lane(kind);
  return laned < 0 ? static_cast<std::size_t>(kind) : static_cast<std::size_t>(kStreamKinds + laned);
}

sim::StreamId Context::stream_of(std::size_t rank_index, StreamKind kind) const {
  const auto& r = out_->ranks[rank_index];
  const int laned = second_lane(kind);
  return laned < 0 ? r.streams[static_cast<std::size_t>(kind)] : r.second.at(static_cast<std::size_t>(laned));
}

std::size_t Context::index_of_rank(int rank) const {
  const auto it = rank_index_.find(rank);
  SIM_ASSERT(it != rank_index_.end(), "rank {} is not simulated", rank);
  return it->second;
}

void Context::wait(int stage, StreamKind stream, const TaskList& tasks) {
  const auto& ranks = stage_ranks(stage);
  SIM_ASSERT(tasks.size() == ranks.size(), "task list of {} for a stage of {} ranks", tasks.size(), ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (tasks[i] != kNoTask) pending_[ranks[i]][slot(stream)].push_back(tasks[i]);
}

TaskList Context::last_compute(int stage, int lane) const {
  TaskList out;
  for (const auto i : stage_ranks(stage)) out.push_back(last_compute_[i][static_cast<std::size_t>(lane)]);
  return out;
}

void Context::take_pending(std::size_t rank_index, StreamKind kind, std::vector<sim::TaskId>& into) {
  auto& pending = pending_[rank_index][slot(kind)];
  std::sort(pending.begin(), pending.end());
  into.insert(into.end(), pending.begin(), std::unique(pending.begin(), pending.end()));
  pending.clear();  // keeps its capacity for the stream's next waits
}

void Context::note(sim::TaskId task, const TaskWork& work) {
  if (!options_->record_work) return;
  if (out_->work.size() <= task.index()) out_->work.resize(task.index() + 1);
  out_->work[task.index()] = work;
}

std::int32_t Context::work_group(std::vector<int> devices) {
  const auto [it, inserted] = work_groups_.try_emplace(devices, static_cast<std::int32_t>(out_->groups.size()));
  if (inserted) out_->groups.push_back(std::move(devices));
  return it->second;
}

TaskList Context::compute(int stage, sim::TaskName name, Duration duration, Category category, TaskWork work) {
  return kernel(stage, StreamKind::Compute, name, duration, category, work);
}

TaskList Context::kernel(int stage, StreamKind stream, sim::TaskName name, Duration duration, Category category,
                         TaskWork work) {
  TaskList out;
  const auto& factors = options_->compute_factor;
  for (const auto i : stage_ranks(stage)) {
    deps_.clear();
    take_pending(i, stream, deps_);
    const auto r = static_cast<std::size_t>(rank(i).rank);
    const auto d =
        r < factors.size() && factors[r] != 1.0 ? Duration::from_seconds(duration.seconds() * factors[r]) : duration;
    out.push_back(
        graph().add_task(name, stream_of(i, stream), sim::ComputeWork{d}, deps_, static_cast<std::uint16_t>(category)));
    note(out.back(), work);
    if (stream == StreamKind::Compute) last_compute_[i][static_cast<std::size_t>(lane_)] = out.back();
  }
  return out;
}

TaskList Context::launch(int stage, sim::TaskName name, Duration duration) {
  TaskList out;
  for (const auto i : stage_ranks(stage)) {
    deps_.clear();
    take_pending(i, StreamKind::Host, deps_);
    out.push_back(graph().add_task(name, stream_of(i, StreamKind::Host), sim::ComputeWork{duration}, deps_,
                                   static_cast<std::uint16_t>(Category::Host)));
  }
  wait(stage, StreamKind::Compute, out);
  wait(stage, StreamKind::DpComm, out);
  return out;
}

void Context::unissued_launch(int stage, Duration duration) {
  auto& host = out_->unissued_host;
  if (host.size() < stage_ranks_.size()) host.resize(stage_ranks_.size(), Duration::zero());
  host[static_cast<std::size_t>(stage)] += duration;
}

sim::LoadId Context::load_for(const cost::CollectivePlan& plan) {
  if (const auto it = loads_.find(&plan); it != loads_.end()) return it->second;
  const auto& topo = costs_->topology();
  const auto loads = plan.total_loads();
  double worst = 0;
  for (const auto& l : loads) worst = std::max(worst, l.bytes_per_byte / topo.link(l.link).usable().bytes_per_s);
  std::vector<sim::LinkShare> shares;
  for (const auto& l : loads) {
    const double share = l.bytes_per_byte / topo.link(l.link).usable().bytes_per_s / worst;
    if (share > 1e-6) shares.push_back({l.link.value, std::min(share, 1.0)});
  }
  const auto id = graph().add_load(std::move(shares));
  loads_.emplace(&plan, id);
  return id;
}

sim::CommWork Context::comm_work(const cost::CollectiveCost& c, Bytes bytes, bool overlaps_compute) {
  if (!c.plan) return {Duration::zero(), Duration::zero(), graph().add_load({}), bytes.count};
  double share = 0;
  if (overlaps_compute && job_->cluster.device.collectives_take_cores) {
    const auto sms = static_cast<double>(std::max(job_->cluster.device.sms, 1));
    share = std::min(0.5, c.plan->channels * costs_->tuning().channel_sms / sms);
  }
  return {c.latency, c.time - c.latency, load_for(*c.plan), bytes.count, share};
}

namespace {

std::uint32_t dims_mask(std::span<const ParallelDim> dims) {
  std::uint32_t mask = 0;
  for (const auto d : dims) mask |= 1u << static_cast<unsigned>(d);
  return mask;
}

// The members of `group` (in placement order) that `subgroup` keeps for `rank`.
std::vector<topo::DeviceId> narrow(std::vector<topo::DeviceId> group, int rank, Subgroup subgroup) {
  const auto n = group.size();
  const auto size = static_cast<std::size_t>(subgroup.size);
  if (size == 0 || size >= n) return group;
  const auto at = static_cast<std::size_t>(
      std::find(group.begin(), group.end(), topo::DeviceId{static_cast<std::uint32_t>(rank)}) - group.begin());
  SIM_ASSERT(at < n && n % size == 0, "rank {} in a group of {} split by {}", rank, n, size);
  std::vector<topo::DeviceId> out;
  for (std::size_t j = 0; j < n; ++j)
    if (subgroup.across ? j % size == at % size : j / size == at / size) out.push_back(group[j]);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::size_t Context::ChoiceKeyHash::operator()(const ChoiceKey& k) const {
  std::size_t h = 0;
  boost::hash_combine(h, k.algorithm);
  boost::hash_combine(h, k.label);
  boost::hash_combine(h, static_cast<int>(k.kind));
  boost::hash_combine(h, static_cast<int>(k.protocol));
  boost::hash_combine(h, k.bytes);
  boost::hash_combine(h, k.group_size);
  return h;
}

void Context::record(sim::TaskId task, cost::CollectiveKind kind, const CostedGroup& costed) {
  const auto& cost = costed.cost;
  const auto bytes = costed.bytes.count;
  const auto group_size = static_cast<std::int64_t>(costed.group->size);
  if (!choices_.insert({graph().label_id(task), kind, cost.protocol, bytes, group_size, cost.algorithm}).second) return;
  out_->collectives.push_back({.label = std::string(graph().label(task)),
                               .op = std::string(cost::collective_name(kind)),
                               .bytes = bytes,
                               .group_size = group_size,
                               .algorithm = cost.algorithm,
                               .protocol = std::string(cost::protocol_name(cost.protocol))});
}

const std::vector<Context::StageGroup>& Context::groups_of(int stage, std::span<const ParallelDim> dims,
                                                           Subgroup subgroup) {
  auto [it, inserted] = stage_groups_.try_emplace({stage, dims_mask(dims), subgroup.size, subgroup.across});
  if (!inserted) return it->second;
  const auto& ranks = stage_ranks(stage);
  std::vector<bool> grouped(ranks.size(), false);
  // in the order of their first member in the stage
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (grouped[i]) continue;
    const int r = rank(ranks[i]).rank;
    const auto devices = narrow(placement_.group(dims, r), r, subgroup);
    StageGroup g;
    g.size = devices.size();
    // the simulated members of r's group, in the stage's order
    for (const auto d : devices) {
      const auto at = stage_position_[d.index()];
      if (at != kNotSimulated && placement_.coordinate(static_cast<int>(d.value), ParallelDim::Pp) == stage)
        g.members.push_back(at);
    }
    std::sort(g.members.begin(), g.members.end());
    for (const auto j : g.members) grouped[j] = true;
    if (options_->record_work) {
      std::vector<int> members;
      for (const auto d : devices) members.push_back(static_cast<int>(d.value));
      g.work_group = work_group(std::move(members));
    }
    g.group = costs_->intern(cost::Group{devices});
    it->second.push_back(std::move(g));
  }
  return it->second;
}

TaskList Context::collective(int stage, sim::TaskName name, cost::CollectiveKind kind, Bytes bytes,
                             std::span<const ParallelDim> dims, StreamKind stream, Category category, double fraction,
                             std::string_view algorithm, Subgroup subgroup, bool whole_bytes) {
  return issue_collective(stage, name, kind, bytes, dims, stream, category, fraction, algorithm, subgroup, whole_bytes,
                          true);
}

TaskList Context::collective_again(int stage, sim::TaskName name, cost::CollectiveKind kind, Bytes bytes,
                                   std::span<const ParallelDim> dims, StreamKind stream, Category category,
                                   double fraction, std::string_view algorithm, Subgroup subgroup, bool whole_bytes) {
  return issue_collective(stage, name, kind, bytes, dims, stream, category, fraction, algorithm, subgroup, whole_bytes,
                          false);
}

TaskList Context::issue_collective(int stage, sim::TaskName name, cost::CollectiveKind kind, Bytes bytes,
                                   std::span<const ParallelDim> dims, StreamKind stream, Category category,
                                   double fraction, std::string_view algorithm, Subgroup subgroup, bool whole_bytes,
                                   bool record_choices) {
  const auto& ranks = stage_ranks(stage);
  TaskList out(ranks.size(), kNoTask);
  // tensor-parallel collectives block the compute stream (pipelined ones are charged in the GEMM)
  const CallKey key{.stage = stage,
                    .dims = dims_mask(dims),
                    .subgroup = subgroup,
                    .kind = kind,
                    .bytes = bytes.count,
                    .fraction = fraction,
                    .whole_bytes = whole_bytes,
                    .overlaps_compute = stream != StreamKind::TpComm,
                    .algorithm = std::string(algorithm)};
  for (const auto& costed : costed_groups(key, dims, bytes)) {
    const auto& g = *costed.group;
    streams_.clear();
    deps_.clear();
    for (const auto j : g.members) {
      streams_.push_back(stream_of(ranks[j], stream));
      take_pending(ranks[j], stream, deps_);
    }
    std::sort(deps_.begin(), deps_.end());
    const auto work =
        costed.cost.plan != nullptr ? costed.work : comm_work(costed.cost, costed.bytes, key.overlaps_compute);
    const auto task = graph().add_task(name, streams_, work, deps_, static_cast<std::uint16_t>(category));
    if (record_choices) record(task, kind, costed);
    note(task, {.op = static_cast<std::int16_t>(kind), .group = g.work_group});
    for (const auto j : g.members) out[j] = task;
  }
  return out;
}

std::size_t Context::CallKeyHash::operator()(const CallKey& k) const {
  std::size_t h = 0;
  boost::hash_combine(h, k.stage);
  boost::hash_combine(h, k.dims);
  boost::hash_combine(h, k.subgroup.size);
  boost::hash_combine(h, k.subgroup.across);
  boost::hash_combine(h, static_cast<int>(k.kind));
  boost::hash_combine(h, k.bytes);
  boost::hash_combine(h, k.fraction);
  boost::hash_combine(h, k.whole_bytes);
  boost::hash_combine(h, k.overlaps_compute);
  boost::hash_combine(h, k.algorithm);
  return h;
}

const std::vector<Context::CostedGroup>& Context::costed_groups(const CallKey& key, std::span<const ParallelDim> dims,
                                                                Bytes bytes) {
  if (const auto it = costed_.find(key); it != costed_.end()) return it->second;
  std::vector<CostedGroup> out;
  for (const auto& g : groups_of(key.stage, dims, key.subgroup)) {
    auto c = costs_->cost(cost::make_collective(key.kind, bytes), g.group, key.algorithm);
    if (key.fraction != 1.0) {
      c.time = Duration::from_seconds(c.time.seconds() * key.fraction);
      c.latency = Duration::from_seconds(c.latency.seconds() * key.fraction);
    }
    const auto scaled = key.whole_bytes ? bytes : Bytes::from_double(bytes.as_double() * key.fraction);
    CostedGroup costed{.group = &g, .cost = std::move(c), .bytes = scaled, .work = {}};
    if (costed.cost.plan != nullptr) costed.work = comm_work(costed.cost, scaled, key.overlaps_compute);
    out.push_back(std::move(costed));
  }
  return costed_.emplace(key, std::move(out)).first->second;
}

Duration Context::uncontended(int stage, cost::CollectiveKind kind, Bytes bytes, std::span<const ParallelDim> dims,
                              Subgroup subgroup) {
  auto longest = Duration::zero();
  for (const auto& g : groups_of(stage, dims, subgroup))
    longest = std::max(longest, costs_->cost(cost::make_collective(kind, bytes), g.group).time);
  return longest;
}

TaskList Context::collective_between(int stage_a, int stage_b, sim::TaskName name, Bytes bytes, StreamKind stream,
                                     TaskList& on_b) {
  const auto& a = stage_ranks(stage_a);
  TaskList out;
  on_b.assign(stage_ranks(stage_b).size(), kNoTask);
  for (const auto i : a) {
    const int ra = rank(i).rank;
    const int rb = pp_peer(ra, stage_b);
    const auto j = index_of_rank(rb);
    const auto c = costs_->cost(cost::AllReduce{bytes},
                                cost::Group{{topo::DeviceId{static_cast<std::uint32_t>(std::min(ra, rb))},
                                             topo::DeviceId{static_cast<std::uint32_t>(std::max(ra, rb))}}});
    deps_.clear();
    take_pending(i, stream, deps_);
    take_pending(j, stream, deps_);
    std::sort(deps_.begin(), deps_.end());
    const sim::StreamId streams[] = {stream_of(i, stream), stream_of(j, stream)};
    const auto task =
        graph().add_task(name, streams, comm_work(c, bytes, true), deps_, static_cast<std::uint16_t>(Category::DpComm));
    if (options_->record_work)
      note(task, {.op = static_cast<std::int16_t>(cost::CollectiveKind::AllReduce),
                  .group = work_group({std::min(ra, rb), std::max(ra, rb)})});
    out.push_back(task);
    on_b[stage_position_[static_cast<std::size_t>(rb)]] = task;
  }
  return out;
}

int Context::pp_peer(int rank, int stage) {
  auto [it, inserted] = pp_groups_.try_emplace(rank);
  if (inserted)
    for (const auto d : placement_.group(ParallelDim::Pp, rank)) it->second.push_back(static_cast<int>(d.value));
  return it->second.at(static_cast<std::size_t>(stage));
}

TaskList Context::transfer(int from, int to, sim::TaskName name, Bytes bytes, bool forward) {
  const auto send = forward ? StreamKind::PpSendNext : StreamKind::PpSendPrev;
  const auto recv = forward ? StreamKind::PpRecvPrev : StreamKind::PpRecvNext;
  const auto& receivers = stage_ranks(to);
  TaskList out(receivers.size(), kNoTask);
  for (const auto i : stage_ranks(from)) {
    const int src = rank(i).rank;
    const int dst = pp_peer(src, to);
    const auto j = index_of_rank(dst);
    const auto c = costs_->p2p(topo::DeviceId{static_cast<std::uint32_t>(src)},
                               topo::DeviceId{static_cast<std::uint32_t>(dst)}, bytes);
    deps_.clear();
    take_pending(i, send, deps_);
    take_pending(j, recv, deps_);
    std::sort(deps_.begin(), deps_.end());
    const sim::StreamId streams[] = {stream_of(i, send), stream_of(j, recv)};
    const auto task =
        graph().add_task(name, streams, comm_work(c, bytes, true), deps_, static_cast<std::uint16_t>(Category::PpComm));
    if (options_->record_work)
      note(task, {.op = static_cast<std::int16_t>(cost::CollectiveKind::SendRecv), .group = work_group({src, dst})});
    out[stage_position_[static_cast<std::size_t>(dst)]] = task;
  }
  return out;
}

void Context::loss_ran(int stage, const TaskList& tasks) {
  const auto& ranks = stage_ranks(stage);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    auto& first = out_->ranks[ranks[i]].first_loss;
    if (!first && tasks[i] != kNoTask) first = tasks[i];
  }
}

void Context::memory(int stage, const TaskList& tasks, std::int64_t bytes, MemoryKind kind, bool at_end) {
  if (bytes == 0) return;
  const auto& ranks = stage_ranks(stage);
  for (std::size_t i = 0; i < ranks.size(); ++i)
    graph().add_memory(tasks[i], {rank(ranks[i]).pool, bytes, at_end, static_cast<std::uint8_t>(kind)});
}

}  // namespace trainsim::lower
