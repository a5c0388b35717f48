#pragma once
// A lower bound on a job's step time that needs no simulation (the sweep uses it to skip
// configurations that cannot reach its top K; the ranking stays exact).
//
// A flow-shop bound: pipeline stage s cannot start before the first micro-batch's forward has
// crossed stages 0..s−1, must then run all of its passes, and its last backward must still cross
// stages s−1..0. A pass counts its kernels and the tensor-, context- and expert-parallel
// collectives its compute stream waits for, each at its uncontended duration (the lowering's own
// passes, measured rather than issued). After a stage's last pass come, one after another, the
// gradient reductions that wait for the end of the backward (ZeRO 0-1 without overlap_grad_reduce)
// and the optimizer step. Under ZeRO-3 the rank's data-parallel stream carries every parameter
// gather and gradient reduce-scatter of its layers, one after another: the step is no shorter
// than their sum. Pipeline transfers, other overlapped data-parallel traffic and
// recomputation on the backward path are left out, and link sharing only slows collectives down,
// so the simulated step is never shorter than this.
#include "trainsim/cost/cost_model.hpp"
#include "trainsim/lower/lowering.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::lower {

Duration step_time_lower_bound(const spec::Job& job, cost::CostModel& costs, const LoweringOptions& options);

// A weaker bound that lowers nothing and costs no collective: every stage runs, for each of its
// micro-batches, its layers' GEMMs (and, without context parallelism, their attention) forward,
// backward and — under full recomputation — forward again, one after another at their kernel
// durations. Never above step_time_lower_bound (each of those kernels is inside the passes whose
// sum that bound takes), and a thousandth of its cost: the sweep computes the full bound only for
// candidates this one does not already rule out.
Duration kernel_lower_bound(const spec::Job& job, const LoweringOptions& options);

}  // namespace trainsim::lower
