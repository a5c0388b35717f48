#include "trainsim/lower/lowering.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "lower/context.hpp"
#include "lower/data_parallel.hpp"
#include "lower/passes.hpp"
#include "trainsim/lower/schedule.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::lower {
namespace {

class Driver {
 public:
  Driver(Context& ctx, DataParallel& dp, Passes& passes) : ctx_(ctx), dp_(dp), passes_(passes) {
    const auto& s = ctx.job().strategy;
    schedules_ = make_schedule(s.schedule, s.pp, s.vpp, ctx.job().micro_batches);
    const auto& shape = ctx.shape();
    // Megatron sends 1/tp of the activations per tp rank (already sharded under SP; with the
    // scatter-gather optimisation otherwise, all-gathered over NVLink on arrival).
    const double act = model::hidden_state_bytes(ctx.job().workload.model, shape);
    boundary_ = Bytes::from_double(act / shape.tp);
    gather_after_recv_ = shape.tp > 1 && !shape.sp;
    combined_ = s.overlap_moe_comm;
    full_activation_ = Bytes::from_double(act);
    const auto all_passes = static_cast<std::size_t>(s.pp) * static_cast<std::size_t>(s.vpp) *
                            static_cast<std::size_t>(ctx.job().micro_batches);
    forward_out_.resize(all_passes);
    backward_out_.resize(all_passes);
  }

  void run() {
    for (int s = 0; s < ctx_.stages(); ++s) passes_.plan_host(s, schedules_[static_cast<std::size_t>(s)]);
    dp_.start_of_step();
    const int pp = ctx_.stages();
    std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
    std::vector<TaskList> last(static_cast<std::size_t>(pp));
    bool progress = true;
    while (progress) {
      progress = false;
      for (int s = 0; s < pp; ++s) {
        auto& i = next[static_cast<std::size_t>(s)];
        const auto& schedule = schedules_[static_cast<std::size_t>(s)];
        if (i >= schedule.size() || !ready(s, schedule[i])) continue;
        if (combined_ && i + 1 < schedule.size() && pairs(schedule[i], schedule[i + 1]) && ready(s, schedule[i + 1])) {
          last[static_cast<std::size_t>(s)] = emit_pair(s, schedule[i], schedule[i + 1]);
          i += 2;
        } else {
          last[static_cast<std::size_t>(s)] = emit_alone(s, schedule[i]);
          ++i;
        }
        progress = true;
      }
    }
    for (int s = 0; s < pp; ++s)
      SIM_ASSERT(next[static_cast<std::size_t>(s)] == schedules_[static_cast<std::size_t>(s)].size(),
                 "pipeline schedule of stage {} cannot proceed", s);
    if (combined_)  // what ends the step (the optimizer) follows both lanes
      for (int s = 0; s < pp; ++s) ctx_.wait(s, StreamKind::Compute, ctx_.last_compute(s, 1));
    dp_.end_of_step(last);
  }

 private:
  // The position of a stage's chunk's micro-batch in forward_out_ and backward_out_.
  std::size_t key(int stage, int chunk, int microbatch) const {
    const auto& job = ctx_.job();
    SIM_ASSERT(stage >= 0 && stage < job.strategy.pp && chunk >= 0 && chunk < job.strategy.vpp && microbatch >= 0 &&
                   microbatch < job.micro_batches,
               "pass of stage {} chunk {} micro-batch {} outside the schedule", stage, chunk, microbatch);
    return (static_cast<std::size_t>(stage) * static_cast<std::size_t>(job.strategy.vpp) +
            static_cast<std::size_t>(chunk)) *
               static_cast<std::size_t>(job.micro_batches) +
           static_cast<std::size_t>(microbatch);
  }

  spec::Schedule schedule() const { return ctx_.job().strategy.schedule; }

  bool ready(int stage, const Action& a) const {
    const int pp = ctx_.stages();
    if (a.kind == PassKind::Forward) {
      const auto prev = previous_virtual(schedule(), stage, a.chunk, pp);
      return !prev || forward_out_[key(prev->stage, prev->chunk, a.microbatch)].has_value();
    }
    if (a.kind == PassKind::Backward) {
      const auto nxt = next_virtual(schedule(), stage, a.chunk, pp, ctx_.job().strategy.vpp);
      return !nxt || backward_out_[key(nxt->stage, nxt->chunk, a.microbatch)].has_value();
    }
    return backward_out_[key(stage, a.chunk, a.microbatch)].has_value();
  }

  // Combined 1F1B pairs a forward and a backward pass that do not feed each other.
  static bool pairs(const Action& a, const Action& b) {
    const bool forward_backward = (a.kind == PassKind::Forward && b.kind == PassKind::Backward) ||
                                  (a.kind == PassKind::Backward && b.kind == PassKind::Forward);
    return forward_backward && (a.microbatch != b.microbatch || a.chunk != b.chunk);
  }

  // A pass of its own: on the first lane, after whatever the second lane ran last.
  TaskList emit_alone(int stage, const Action& a) {
    if (combined_) ctx_.wait(stage, StreamKind::Compute, ctx_.last_compute(stage, 1));
    return emit(stage, a);
  }

  // Two passes that run together, one on each lane (their compute streams share the device), both
  // after everything either lane ran before.
  TaskList emit_pair(int stage, const Action& a, const Action& b) {
    const auto before_first = ctx_.last_compute(stage, 0);
    const auto before_second = ctx_.last_compute(stage, 1);
    ctx_.wait(stage, StreamKind::Compute, before_second);
    auto first = emit(stage, a);
    ctx_.set_lane(1);
    ctx_.wait(stage, StreamKind::Compute, before_first);
    auto second = emit(stage, b);
    ctx_.set_lane(0);
    return a.kind == PassKind::Backward ? first : second;  // what the step's end waits for
  }

  void receive(int from, int to, const TaskList& produced, bool forward, int microbatch) {
    if (from == to) {  // DualPipeV's turn: the last stage's chunk 0 feeds its chunk 1 in place
      ctx_.wait(to, StreamKind::Compute, produced);
      return;
    }
    ctx_.wait(from, forward ? StreamKind::PpSendNext : StreamKind::PpSendPrev, produced);
    const auto t = ctx_.transfer(from, to, {forward ? "activations #" : "gradients #", microbatch}, boundary_, forward);
    if (!gather_after_recv_) {
      ctx_.wait(to, StreamKind::Compute, t);
      return;
    }
    ctx_.wait(to, StreamKind::TpComm, t);
    const auto g = ctx_.collective(to, "pp tp all-gather", cost::CollectiveKind::AllGather, full_activation_, kTp,
                                   StreamKind::TpComm, Category::TpComm);
    ctx_.wait(to, StreamKind::Compute, g);
  }

  TaskList emit(int stage, const Action& a) {
    const int pp = ctx_.stages();
    const auto at = key(stage, a.chunk, a.microbatch);
    switch (a.kind) {
      case PassKind::Forward: {
        if (const auto prev = previous_virtual(schedule(), stage, a.chunk, pp))
          receive(prev->stage, stage, forward_out_[key(prev->stage, prev->chunk, a.microbatch)].value(), true,
                  a.microbatch);
        return *(forward_out_[at] = passes_.forward(stage, a.chunk, a.microbatch));
      }
      case PassKind::Backward: {
        if (const auto nxt = next_virtual(schedule(), stage, a.chunk, pp, ctx_.job().strategy.vpp))
          receive(nxt->stage, stage, backward_out_[key(nxt->stage, nxt->chunk, a.microbatch)].value(), false,
                  a.microbatch);
        return *(backward_out_[at] = passes_.backward(stage, a.chunk, a.microbatch));
      }
      case PassKind::WeightGrad:
        return passes_.weight_grad(stage, a.chunk, a.microbatch);
    }
    SIM_ASSERT(false, "unhandled pass kind");
  }

  Context& ctx_;
  DataParallel& dp_;
  Passes& passes_;
  std::vector<StageSchedule> schedules_;
  Bytes boundary_;
  Bytes full_activation_;
  bool gather_after_recv_ = false;
  bool combined_ = false;  // combined 1F1B: pairs of passes on two lanes
  // each pass's last compute tasks, once emitted (at key(stage, chunk, micro-batch))
  std::vector<std::optional<TaskList>> forward_out_;
  std::vector<std::optional<TaskList>> backward_out_;
};

}  // namespace

std::string_view stream_kind_name(StreamKind kind) {
  switch (kind) {
    case StreamKind::Compute:
      return "compute";
    case StreamKind::TpComm:
      return "tp-comm";
    case StreamKind::CpComm:
      return "cp-comm";
    case StreamKind::EpComm:
      return "ep-comm";
    case StreamKind::DpComm:
      return "dp-comm";
    case StreamKind::PpSendNext:
      return "pp-send-next";
    case StreamKind::PpRecvPrev:
      return "pp-recv-prev";
    case StreamKind::PpSendPrev:
      return "pp-send-prev";
    case StreamKind::PpRecvNext:
      return "pp-recv-next";
    case StreamKind::Host:
      return "host";
    case StreamKind::OffloadOut:
      return "offload-d2h";
    case StreamKind::OffloadIn:
      return "offload-h2d";
  }
  return "?";
}

std::string_view category_name(Category c) {
  switch (c) {
    case Category::Compute:
      return "compute";
    case Category::Recompute:
      return "recompute";
    case Category::Optimizer:
      return "optimizer";
    case Category::TpComm:
      return "tp";
    case Category::CpComm:
      return "cp";
    case Category::EpComm:
      return "ep";
    case Category::DpComm:
      return "dp";
    case Category::PpComm:
      return "pp";
    case Category::Host:
      return "host";
    case Category::Offload:
      return "offload";
  }
  return "?";
}

Lowered lower(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options) {
  Lowered out;
  Context ctx(job, costs, options, out);
  DataParallel dp(ctx);
  Passes passes(ctx, dp);
  Driver(ctx, dp, passes).run();
  std::sort(out.collectives.begin(), out.collectives.end());
  return out;
}

}  // namespace trainsim::lower
