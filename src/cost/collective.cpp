#include "trainsim/cost/collective.hpp"

#include <array>

#include "trainsim/util/error.hpp"

namespace trainsim::cost {
namespace {

constexpr std::array<std::pair<std::string_view, CollectiveKind>, 7> kNames{{
    {"all_reduce", CollectiveKind::AllReduce},
    {"reduce_scatter", CollectiveKind::ReduceScatter},
    {"all_gather", CollectiveKind::AllGather},
    {"broadcast", CollectiveKind::Broadcast},
    {"reduce", CollectiveKind::Reduce},
    {"all_to_all", CollectiveKind::AllToAll},
    {"send_recv", CollectiveKind::SendRecv},
}};

}  // namespace

CollectiveKind kind_of(const Collective& c) {
  return static_cast<CollectiveKind>(c.index());
}

Bytes bytes_of(const Collective& c) {
  return std::visit([](const auto& op) { return op.bytes; }, c);
}

Collective make_collective(CollectiveKind kind, Bytes bytes) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return AllReduce{bytes};
    case CollectiveKind::ReduceScatter:
      return ReduceScatter{bytes};
    case CollectiveKind::AllGather:
      return AllGather{bytes};
    case CollectiveKind::Broadcast:
      return Broadcast{bytes};
    case CollectiveKind::Reduce:
      return Reduce{bytes};
    case CollectiveKind::AllToAll:
      return AllToAll{bytes};
    case CollectiveKind::SendRecv:
      return SendRecv{bytes};
  }
  SIM_ASSERT(false, "unhandled collective kind");
}

std::string_view collective_name(CollectiveKind kind) {
  for (const auto& [name, k] : kNames)
    if (k == kind) return name;
  return "?";
}

const std::vector<std::string>& collective_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, kind] : kNames) out.emplace_back(name);
    return out;
  }();
  return names;
}

CollectiveKind collective_kind_from_name(std::string_view name) {
  for (const auto& [n, k] : kNames)
    if (n == name) return k;
  SIM_ASSERT(false, "unknown collective {}", name);
}

double bus_factor(CollectiveKind kind, int ranks) {
  const double n = ranks;
  switch (kind) {
    case CollectiveKind::AllReduce:
      return ranks > 1 ? 2 * (n - 1) / n : 0;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll:
      return ranks > 1 ? (n - 1) / n : 0;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
    case CollectiveKind::SendRecv:
      return 1;
  }
  return 1;
}

}  // namespace trainsim::cost
