#include "trainsim/topo/placement.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "trainsim/util/error.hpp"

namespace trainsim::topo {

using spec::ParallelDim;

Placement::Placement(std::vector<std::pair<ParallelDim, int>> dims) {
  for (const auto& [dim, size] : dims) {
    SIM_ASSERT(size >= 1, "dimension of size {}", size);
    SIM_ASSERT(find(dim) == nullptr, "dimension {} given twice", spec::parallel_dim_name(dim));
    dims_.push_back({dim, size, world_});
    world_ *= size;
  }
}

Placement Placement::from_strategy(const spec::StrategySpec& s, std::int64_t dp) {
  auto order = s.order;
  // Expert-parallel ranks are consecutive data-parallel ranks unless the order says otherwise.
  // (folded over tp, only the ranks beyond the tensor-parallel group: spec::ep_outer)
  const int ep = spec::ep_outer(s);
  if (ep > 1 && std::find(order.begin(), order.end(), ParallelDim::Ep) == order.end())
    order.insert(std::find(order.begin(), order.end(), ParallelDim::Dp), ParallelDim::Ep);
  const bool ep_dim = std::find(order.begin(), order.end(), ParallelDim::Ep) != order.end();
  std::vector<std::pair<ParallelDim, int>> dims;
  for (const auto d : order) {
    switch (d) {
      case ParallelDim::Tp:
        dims.emplace_back(d, s.tp);
        break;
      case ParallelDim::Cp:
        dims.emplace_back(d, s.cp);
        break;
      case ParallelDim::Pp:
        dims.emplace_back(d, s.pp);
        break;
      case ParallelDim::Ep:
        dims.emplace_back(d, ep);
        break;
      case ParallelDim::Dp:
        dims.emplace_back(d, static_cast<int>(ep_dim ? dp / ep : dp));
        break;
    }
  }
  return Placement(std::move(dims));
}

const Placement::Dim* Placement::find(ParallelDim dim) const {
  for (const auto& d : dims_)
    if (d.dim == dim) return &d;
  return nullptr;
}

int Placement::size(ParallelDim dim) const {
  const auto* d = find(dim);
  return d ? d->size : 1;
}

int Placement::coordinate(int rank, ParallelDim dim) const {
  const auto* d = find(dim);
  return d ? rank / d->stride % d->size : 0;
}

int Placement::stride(ParallelDim dim) const {
  const auto* d = find(dim);
  return d ? d->stride : 1;
}

std::vector<DeviceId> Placement::group(std::span<const ParallelDim> dims, int rank) const {
  SIM_ASSERT(rank >= 0 && rank < world_, "rank {} outside a world of {}", rank, world_);
  // Start from the rank with the group's coordinates zeroed, then enumerate them.
  int base = rank;
  std::vector<const Dim*> members;
  for (const auto dim : dims) {
    const auto* d = find(dim);
    if (!d) continue;
    base -= coordinate(rank, dim) * d->stride;
    members.push_back(d);
  }
  std::vector<DeviceId> out{device(base)};
  for (const auto* d : members) {
    const std::size_t n = out.size();
    for (int i = 1; i < d->size; ++i)
      for (std::size_t j = 0; j < n; ++j)
        out.push_back(DeviceId{out[j].value + static_cast<std::uint32_t>(i * d->stride)});
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<DeviceId> parse_device_list(std::string_view text, std::int64_t num_devices, const std::string& source) {
  std::vector<DeviceId> out;
  const auto number = [&](std::string_view s) -> std::int64_t {
    std::int64_t v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v >= num_devices)
      throw SpecError(source, "", fmt::format("\"{}\" is not a device index in [0, {}]", s, num_devices - 1));
    return v;
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    const std::size_t dash = item.find('-');
    const std::int64_t lo = number(item.substr(0, dash));
    const std::int64_t hi = dash == std::string_view::npos ? lo : number(item.substr(dash + 1));
    if (hi < lo) throw SpecError(source, "", fmt::format("range \"{}\" runs backwards", item));
    for (std::int64_t d = lo; d <= hi; ++d) out.push_back(DeviceId{static_cast<std::uint32_t>(d)});
    start = end + 1;
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw SpecError(source, "", "a device appears twice in the group");
  return out;
}

std::vector<std::size_t> domain_runs(std::span<const DeviceId> sorted_group, std::uint32_t domain_devices) {
  std::vector<std::size_t> runs;
  for (std::size_t i = 0; i < sorted_group.size(); ++i) {
    if (i == 0 || sorted_group[i].value / domain_devices != sorted_group[i - 1].value / domain_devices)
      runs.push_back(0);
    ++runs.back();
  }
  return runs;
}

}  // namespace trainsim::topo
