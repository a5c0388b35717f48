#pragma once
// Collective operations (NCCL semantics) and the groups of devices they run on.
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trainsim/topo/topology.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::cost {

// Sizes follow nccl-tests: the per-rank buffer for all-reduce, broadcast and reduce; the whole
// output of all-gather and input of reduce-scatter; each rank's send buffer for all-to-all.
struct AllReduce {
  Bytes bytes;
};
struct ReduceScatter {
  Bytes bytes;
};
struct AllGather {
  Bytes bytes;
};
struct Broadcast {
  Bytes bytes;
};
struct Reduce {
  Bytes bytes;
};
struct AllToAll {
  Bytes bytes;
};
struct SendRecv {
  Bytes bytes;
};
using Collective = std::variant<AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv>;

enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv };
inline constexpr std::size_t kCollectiveKinds = std::variant_size_v<Collective>;
static_assert(static_cast<std::size_t>(CollectiveKind::SendRecv) + 1 == kCollectiveKinds,
              "every collective kind has an operation type");

CollectiveKind kind_of(const Collective& c);
Bytes bytes_of(const Collective& c);
Collective make_collective(CollectiveKind kind, Bytes bytes);
std::string_view collective_name(CollectiveKind kind);  // "all_reduce", ...
// All names, for CLI choices and error messages.
const std::vector<std::string>& collective_names();
CollectiveKind collective_kind_from_name(std::string_view name);  // SIM_ASSERTs a valid name

// nccl-tests' bus-bandwidth factor: busbw = algbw × factor (2(n−1)/n for all-reduce, (n−1)/n for
// all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and send/recv).
double bus_factor(CollectiveKind kind, int ranks);

// A process group: distinct devices in ascending order.
struct Group {
  std::vector<topo::DeviceId> devices;
  int size() const { return static_cast<int>(devices.size()); }
  friend bool operator==(const Group&, const Group&) = default;
  friend auto operator<=>(const Group&, const Group&) = default;
};

}  // namespace trainsim::cost
