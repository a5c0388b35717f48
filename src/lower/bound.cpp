#include "trainsim/lower/bound.hpp"

#include <algorithm>
#include <map>

#include "lower/context.hpp"
#include "lower/data_parallel.hpp"
#include "lower/passes.hpp"
#include "trainsim/lower/schedule.hpp"
#include "trainsim/model/params.hpp"

namespace trainsim::lower {

Duration step_time_lower_bound(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options) {
  Lowered scratch;  // holds the representative ranks; no task is issued
  Context ctx(job, costs, options, scratch);
  DataParallel dp(ctx);
  Passes passes(ctx, dp);

  const bool split = splits_weight_grad(job.strategy.schedule);
  Duration chain = Duration::zero();  // the first forward through the stages before
  Duration back = Duration::zero();   // the last backward back through them
  Duration bound = Duration::zero();
  for (int s = 0; s < job.strategy.pp; ++s) {
    std::map<int, Passes::UnitTimes> times;
    Duration per_microbatch = Duration::zero();
    Duration weights = Duration::zero();  // per micro-batch, when W is a pass of its own
    Duration first_forward = Duration::zero();
    Duration first_backward = Duration::zero();
    for (int chunk = 0; chunk < job.strategy.vpp; ++chunk) {
      int layer = 0;  // index of the layer in its chunk
      for (const int unit : chunk_units(job, s, chunk)) {
        const bool recomputed = unit >= 0 && spec::recomputes_layer(job.strategy, layer++);
        // every dense (or MoE) layer of a stage costs the same
        const int kind = unit_kind(job.workload.model, unit);
        auto it = times.find(kind);
        if (it == times.end()) it = times.emplace(kind, passes.unit_times(s, unit)).first;
        const auto& t = it->second;
        per_microbatch += t.forward + t.backward_data + t.weight;
        if (split) weights += t.weight;
        if (recomputed) per_microbatch += t.forward;
        if (chunk == 0) {
          first_forward += t.forward;
          first_backward += t.backward_data;
        }
      }
    }
    // all of the stage's work; and (the stage's own W aside, which may come last) its passes up to
    // the last backward, which the stages before it must then carry back
    const Duration own = chain + per_microbatch * job.micro_batches;
    bound = std::max(
        {bound, own + dp.tail_lower_bound(s), own - weights * job.micro_batches + back, dp.stream_lower_bound(s)});
    chain += first_forward;
    back += first_backward;
  }
  return bound;
}

}  // namespace trainsim::lower
