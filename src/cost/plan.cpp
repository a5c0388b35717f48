#include "trainsim/cost/plan.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "trainsim/util/error.hpp"

namespace trainsim::cost {

std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::LL:
      return "LL";
    case Protocol::LL128:
      return "LL128";
    case Protocol::Simple:
      return "Simple";
  }
  return "?";
}

std::vector<LinkLoad> CollectivePlan::total_loads() const {
  std::map<std::uint32_t, double> merged;
  for (const auto& phase : phases)
    for (const auto& l : phase.loads) merged[l.link.value] += l.bytes_per_byte;
  std::vector<LinkLoad> out;
  out.reserve(merged.size());
  for (const auto& [link, load] : merged) out.push_back({topo::LinkId{link}, load});
  return out;
}

double bottleneck_seconds_per_byte(const std::vector<LinkLoad>& loads, const topo::Topology& topo, double efficiency) {
  double worst = 0;
  for (const auto& l : loads) {
    const auto& link = topo.link(l.link);
    const double usable = link.bandwidth.bytes_per_s * (efficiency > 0 ? efficiency : link.efficiency);
    worst = std::max(worst, l.bytes_per_byte / usable);
  }
  return worst;
}

namespace {

// Seconds one phase takes for `bytes` of payload under protocol `p`; `latency` gets its latency part.
double phase_seconds(const Phase& ph, double bytes, int channels, const CollectiveTuning& t, Protocol p,
                     double& latency) {
  const auto& proto = protocol_tuning(t, p);
  const double step_latency =
      ph.latency.seconds() * proto.latency_factor + ph.net_steps * proto.net_step_overhead.seconds();
  latency += step_latency;
  double seconds = step_latency;
  double transfer = bytes * ph.seconds_per_byte / proto.bandwidth_factor;
  if (p == Protocol::LL128 && ph.bus_bytes_per_byte > 0)
    transfer = std::max(transfer, bytes * ph.bus_bytes_per_byte / (channels * t.ll128_channel_cap.bytes_per_s));
  seconds += transfer;
  if (ph.seconds_per_byte > 0 && ph.bus_bytes_per_byte > 0) {
    // Chunks enter the pipeline one step apart: the last leaves (steps − 1) chunk-times after it
    // would in a perfect stream. A channel's rate is the rank's bus rate over the channels. LL and
    // LL128 hand lines over as they arrive, but a network step still moves whole chunks.
    const double chunk = std::min(t.simple_chunk.as_double(), bytes / ph.chunk_divisor);
    const double channel_rate = ph.bus_bytes_per_byte / ph.seconds_per_byte / channels;
    if (p == Protocol::Simple && ph.pipeline_steps > 1)
      seconds +=
          static_cast<double>(std::min<std::int64_t>(ph.pipeline_steps, t.max_fill_chunks) - 1) * chunk / channel_rate;
    else if (p != Protocol::Simple && ph.chunked_network)
      seconds += ph.net_steps * chunk / channel_rate;
  }
  return seconds;
}

bool allowed(const CollectivePlan& plan, Protocol p) {
  return p == Protocol::Simple ||
         std::none_of(plan.phases.begin(), plan.phases.end(), [](const Phase& ph) { return ph.simple_only; });
}

}  // namespace

CollectiveCost evaluate(const CollectivePlan& plan, Bytes bytes, const CollectiveTuning& tuning, Protocol protocol) {
  CollectiveCost c{.algorithm = plan.algorithm, .protocol = protocol, .plan = &plan};
  if (plan.phases.empty() || bytes.count <= 0) return c;
  double seconds = tuning.launch.seconds();
  double latency = seconds;
  for (const auto& ph : plan.phases)
    seconds += phase_seconds(ph, bytes.as_double(), plan.channels, tuning, protocol, latency);
  c.time = Duration::from_seconds(seconds);
  c.latency = std::min(c.time, Duration::from_seconds(latency));
  c.algbw_Bps = bytes.as_double() / seconds;
  c.busbw_Bps = c.algbw_Bps * bus_factor(plan.kind, plan.ranks);
  return c;
}

CollectiveCost evaluate(const CollectivePlan& plan, Bytes bytes, const CollectiveTuning& tuning) {
  CollectiveCost best;
  bool found = false;
  for (const auto p : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    if (!allowed(plan, p)) continue;
    const auto c = evaluate(plan, bytes, tuning, p);
    if (!found || c.time < best.time) {
      best = c;
      found = true;
    }
  }
  SIM_ASSERT(found, "no protocol for plan {}", plan.algorithm);
  return best;
}

}  // namespace trainsim::cost
