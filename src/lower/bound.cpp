#include "trainsim/lower/bound.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "lower/context.hpp"
#include "lower/data_parallel.hpp"
#include "lower/passes.hpp"
#include "trainsim/lower/schedule.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/kernel_model.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::lower {

namespace {

// One micro-batch's passes over a stage's units: compute, and the collectives they wait for.
struct StageWork {
  Duration forward, forward_comm, backward, backward_comm, weight;
};

// What a micro-batch's passes take at least. One after the other, all of it. Under combined 1F1B
// a forward and a backward run together, each on its lane, and whatever either lane runs waits
// for both lanes' earlier work: every block of the step (a pair, or a pass alone) lasts at least
// its forward's compute and collectives, at least its backward's, and at least both computes on
// the shared device; summed over the blocks, the step takes at least each of the three sums.
Duration per_microbatch(const StageWork& w, bool combined, bool split) {
  const Duration weights = split ? w.weight : Duration::zero();
  if (!combined) return w.forward + w.forward_comm + w.backward + w.backward_comm + w.weight;
  return std::max({w.forward + w.backward + w.weight, w.forward + w.forward_comm + weights,
                   w.backward + w.backward_comm + w.weight});
}

// What must follow each stage's last pass, and what its data-parallel stream carries at least
// (DataParallel's bounds: over every simulated group, whichever rank the passes are costed on).
struct StageTail {
  Duration tail, stream;
};

// A stage's chunk's passes of one micro-batch at least: forward, backward (with the full
// recomputation's forward, and the weight gradients unless W is a pass of its own), W.
struct ChunkPasses {
  Duration forward, backward, weight;
};

// The step's critical path through the passes: each stage runs its passes in the schedule's order,
// each after the one before it on the stage and after the pass it takes its input from (the
// previous virtual stage's forward of the micro-batch, the next one's backward), each lasting at
// least its uncontended time; then what must follow the stage's last pass. The pipeline's
// bubbles, as the schedule makes them, are in it (the flow-shop terms below count the first
// forward and the last backward only). Not under combined 1F1B, whose paired passes share the
// device.
Duration critical_path(const spec::Job& job, const std::vector<std::vector<ChunkPasses>>& chunks,
                       const std::vector<StageTail>& tails) {
  const auto& st = job.strategy;
  const auto pp = static_cast<std::size_t>(st.pp);
  const auto vpp = static_cast<std::size_t>(st.vpp);
  const auto m = static_cast<std::size_t>(job.micro_batches);
  const auto schedules = make_schedule(st.schedule, st.pp, st.vpp, job.micro_batches);
  const auto at = [&](int stage, int chunk, int microbatch) {
    return (static_cast<std::size_t>(stage) * vpp + static_cast<std::size_t>(chunk)) * m +
           static_cast<std::size_t>(microbatch);
  };
  // per stage and chunk, where its forward's input comes from and its backward's (none: the ends)
  std::vector<std::optional<std::size_t>> forward_from(pp * vpp), backward_from(pp * vpp);
  for (int stage = 0; stage < st.pp; ++stage)
    for (int chunk = 0; chunk < st.vpp; ++chunk) {
      const auto own = static_cast<std::size_t>(stage) * vpp + static_cast<std::size_t>(chunk);
      if (const auto prev = previous_virtual(st.schedule, stage, chunk, st.pp))
        forward_from[own] = at(prev->stage, prev->chunk, 0);
      if (const auto nxt = next_virtual(st.schedule, stage, chunk, st.pp, st.vpp))
        backward_from[own] = at(nxt->stage, nxt->chunk, 0);
    }
  std::vector<std::optional<Duration>> forward_done(pp * vpp * m);
  std::vector<std::optional<Duration>> backward_done(pp * vpp * m);
  std::vector<std::size_t> next(pp, 0);
  std::vector<Duration> free(pp, Duration::zero());  // when each stage's last pass so far ends
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t s = 0; s < pp; ++s) {
      const int stage = static_cast<int>(s);
      for (; next[s] < schedules[s].size(); ++next[s]) {
        const auto& a = schedules[s][next[s]];
        std::optional<Duration> input = Duration::zero();
        const auto own = s * vpp + static_cast<std::size_t>(a.chunk);
        const auto& times = chunks[s][static_cast<std::size_t>(a.chunk)];
        const auto microbatch = static_cast<std::size_t>(a.microbatch);
        Duration length = times.weight;
        if (a.kind == PassKind::Forward) {
          length = times.forward;
          if (const auto from = forward_from[own]) input = forward_done[*from + microbatch];
        } else if (a.kind == PassKind::Backward) {
          length = times.backward;
          if (const auto from = backward_from[own]) input = backward_done[*from + microbatch];
        }
        if (!input) break;  // its input is not computed yet: another stage first
        free[s] = std::max(free[s], *input) + length;
        if (a.kind == PassKind::Forward) forward_done[at(stage, a.chunk, a.microbatch)] = free[s];
        if (a.kind == PassKind::Backward) backward_done[at(stage, a.chunk, a.microbatch)] = free[s];
        progress = true;
      }
    }
  }
  Duration bound = Duration::zero();
  for (std::size_t s = 0; s < pp; ++s) {
    SIM_ASSERT(next[s] == schedules[s].size(), "pipeline schedule of stage {} cannot proceed", s);
    bound = std::max(bound, free[s] + tails[s].tail);
  }
  return bound;
}

// The bound of the stages' passes costed on the groups of each stage's rank at `position` (a
// folded run's first rank, or the rank of a straddling group beside it).
// `chained`: each stage's rank at `position` takes its input from the one before (one rank per
// stage), so the passes' critical path bounds the step too.
Duration bound_at(const spec::Job& job, const std::vector<StageTail>& tails, Passes& passes, std::size_t position,
                  bool chained) {
  passes.measure_at(position);
  const bool split = splits_weight_grad(job.strategy.schedule);
  const bool combined = job.strategy.overlap_moe_comm;
  Duration chain = Duration::zero();  // the first forward through the stages before
  Duration back = Duration::zero();   // the last backward back through them
  Duration bound = Duration::zero();
  std::vector<std::vector<ChunkPasses>> chunks(static_cast<std::size_t>(job.strategy.pp),
                                               std::vector<ChunkPasses>(static_cast<std::size_t>(job.strategy.vpp)));
  for (int s = 0; s < job.strategy.pp; ++s) {
    // per layer kind: the passes with their collectives, and without them
    std::map<int, std::pair<Passes::UnitTimes, Passes::UnitTimes>> times;
    StageWork work;
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
        if (it == times.end()) {
          const auto t = passes.unit_times(s, unit);
          // without combined 1F1B the split is not needed: the same times, no collectives apart
          it = times.emplace(kind, std::pair{t, combined ? passes.unit_times(s, unit, false) : t}).first;
        }
        const auto& [t, c] = it->second;
        auto& passes_of_chunk = chunks[static_cast<std::size_t>(s)][static_cast<std::size_t>(chunk)];
        passes_of_chunk.forward += t.forward;
        passes_of_chunk.backward +=
            t.backward_data + (recomputed ? t.forward : Duration::zero()) + (split ? Duration::zero() : t.weight);
        passes_of_chunk.weight += split ? t.weight : Duration::zero();
        work.forward += c.forward;
        work.forward_comm += t.forward - c.forward;
        work.backward += c.backward_data;
        work.backward_comm += t.backward_data - c.backward_data;
        work.weight += t.weight;
        if (split) weights += t.weight;
        if (recomputed) work.backward += t.forward;  // (never under combined 1F1B)
        if (chunk == 0) {
          first_forward += t.forward;
          first_backward += t.backward_data;
        }
      }
    }
    // all of the stage's work; and (the stage's own W aside, which may come last) its passes up to
    // the last backward, which the stages before it must then carry back
    const Duration own = chain + per_microbatch(work, combined, split) * job.micro_batches;
    const auto& tail = tails[static_cast<std::size_t>(s)];
    bound = std::max({bound, own + tail.tail, own - weights * job.micro_batches + back, tail.stream});
    chain += first_forward;
    back += first_backward;
  }
  return combined || !chained ? bound : std::max(bound, critical_path(job, chunks, tails));
}

// A layer's GEMMs and attention core at their kernel durations, per pass: the kernels every
// lowering of the layer runs once each (TP overlap stretches its GEMMs; ring attention splits the
// core into blocks, so with context parallelism it is left out).
struct LayerKernels {
  Duration forward, backward_data, weight;
};

LayerKernels layer_kernels(const std::vector<model::Op>& ops, const model::KernelContext& ctx, bool attention) {
  LayerKernels out;
  for (const auto& op : ops) {
    const auto cls = model::op_class(op.shape);
    if (cls == model::OpClass::Elementwise || (cls == model::OpClass::Attention && !attention)) continue;
    out.forward += model::kernel_time(op, model::Pass::Forward, ctx);
    out.backward_data += model::kernel_time(op, model::Pass::BackwardData, ctx);
    out.weight += model::kernel_time(op, model::Pass::BackwardWeight, ctx);
  }
  return out;
}

}  // namespace

Duration kernel_lower_bound(const spec::Job& job, const LoweringOptions& options) {
  const auto ctx = model::kernel_context(job, options.kernel);
  const auto shape = model::gpu_layer_shape(job);
  const auto& model = job.workload.model;
  const bool split = splits_weight_grad(job.strategy.schedule);
  std::optional<LayerKernels> kinds[2];  // a dense layer's, an MoE layer's
  // bound_at's flow-shop terms with each pass cut down to these kernels: the first forward through
  // the stages before, the stage's passes of every micro-batch, the last backward back
  Duration chain = Duration::zero();
  Duration back = Duration::zero();
  Duration bound = Duration::zero();
  for (int s = 0; s < job.strategy.pp; ++s) {
    Duration work = Duration::zero();     // one micro-batch's passes
    Duration weights = Duration::zero();  // of which W, when it is a pass of its own
    Duration first_forward = Duration::zero();
    Duration first_backward = Duration::zero();
    for (int chunk = 0; chunk < job.strategy.vpp; ++chunk) {
      int layer = 0;  // index of the layer in its chunk, as bound_at counts it
      for (const int unit : chunk_units(job, s, chunk)) {
        if (unit < 0) continue;
        const bool recomputed = spec::recomputes_layer(job.strategy, layer++);
        const bool moe = model::is_moe_layer(model, unit);
        auto& k = kinds[moe ? 1 : 0];
        if (!k) k = layer_kernels(model::layer_ops(model, shape, moe), ctx, shape.cp == 1);
        work += k->forward + k->backward_data + k->weight + (recomputed ? k->forward : Duration::zero());
        if (split) weights += k->weight;
        if (chunk == 0) {
          first_forward += k->forward;
          first_backward += k->backward_data;
        }
      }
    }
    const Duration own = chain + work * job.micro_batches;
    bound = std::max({bound, own, own - weights * job.micro_batches + back});
    chain += first_forward;
    back += first_backward;
  }
  return bound;
}

Duration step_time_lower_bound(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options) {
  Lowered scratch;  // holds the representative ranks; no task is issued
  Context ctx(job, costs, options, scratch);
  DataParallel dp(ctx);
  Passes passes(ctx, dp);
  // the step waits for every simulated rank: each one's chain bounds it (every rank simulated: the
  // first's is bound enough)
  std::size_t positions = 1;
  if (!options.full)
    for (int s = 0; s < job.strategy.pp; ++s) positions = std::max(positions, ctx.stage_ranks(s).size());
  std::vector<StageTail> tails;
  for (int s = 0; s < job.strategy.pp; ++s) tails.push_back({dp.tail_lower_bound(s), dp.stream_lower_bound(s)});
  Duration bound = Duration::zero();
  for (std::size_t position = 0; position < positions; ++position)
    bound = std::max(bound, bound_at(job, tails, passes, position, positions == 1));
  return bound;
}

}  // namespace trainsim::lower
