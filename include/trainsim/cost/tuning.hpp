#pragma once
// The collective model's tunables (spec/tunables.hpp declares them, with their sources) and the
// NCCL protocols they describe.
#include <string_view>

#include "trainsim/spec/tunables.hpp"

namespace trainsim::cost {

using spec::CollectiveFit;
using spec::CollectiveTuning;
using spec::ProtocolTuning;

enum class Protocol { LL, LL128, Simple };
std::string_view protocol_name(Protocol p);

inline const ProtocolTuning& protocol_tuning(const CollectiveTuning& t, Protocol p) {
  return p == Protocol::LL ? t.ll : p == Protocol::LL128 ? t.ll128 : t.simple;
}

}  // namespace trainsim::cost
