#pragma once
// Training time under failures (docs/goodput.md): failures arrive as a Poisson process whose rate is
// the sum over causes of (units of the job) × (rate per unit); work is saved every τ seconds of
// training at a cost of δ; a failure loses the work since the last save and costs a restart of R
// (during which failures may strike again). Closed forms after Young (1974) and Daly (2006), and a
// seeded Monte Carlo over the whole run that adds what the closed forms leave out: spare nodes
// running out while failed ones are repaired, and the spread of the outcome.
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::model {

// Young's first-order optimum: τ = √(2δM).
double young_interval(double checkpoint_s, double mtbf_s);
// Daly's higher-order optimum (Daly 2006, eq. 37): τ = √(2δM)·[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ for
// δ < 2M, else M.
double daly_interval(double checkpoint_s, double mtbf_s);
// Daly 2006 eq. 20: the expected wall time to finish `work_s` of failure-free training,
// M·e^{R/M}·(e^{(τ+δ)/M} − 1)·work/τ.
double expected_wall_time(double work_s, double interval_s, double checkpoint_s, double restart_s, double mtbf_s);

struct FailureClass {
  std::string cause;
  double rate_per_s = 0;  // of the whole job
  bool replaces_node = true;
};

struct GoodputModel {
  std::vector<FailureClass> classes;
  double interval_s = 0;    // τ: training between saves
  double checkpoint_s = 0;  // δ: what a save stalls training for
  double restart_s = 0;     // R: detection, rescheduling, initialization, loading the checkpoint
  std::int64_t spare_nodes = 0;
  double repair_s = 0;      // a failed node's time out of the pool (0: replaced at once)
  // The spare-tray policy (spec::ReliabilitySpec::spare_trays_per_domain): a failed host is
  // replaced from its own domain's spare trays (the domain drawn uniformly among the job's), then
  // by a whole spare domain, else the job waits for that domain's first tray back. 0: the pool of
  // spare_nodes instead.
  int spare_trays_per_domain = 0;
  std::int64_t domains = 1;
  std::int64_t spare_domains = 0;
  double rate_per_s() const;
  double mtbf_s() const { return 1 / rate_per_s(); }
};

// One simulated run.
struct RunOutcome {
  double wall_s = 0;
  double work_s = 0;           // training done and saved
  double checkpoint_s = 0;     // stalled in saves
  double lost_s = 0;           // training lost to failures
  double restart_s = 0;        // restarting, including restarts interrupted by failures
  double waiting_s = 0;        // waiting for a repaired node when no spare was left
  std::int64_t interruptions = 0;
  std::vector<std::int64_t> by_class;  // interruptions per FailureClass
};

// Simulates until `work_s` of training is saved or `horizon_s` of wall time has passed. The random
// numbers come from a 64-bit Mersenne twister with its own uniform and exponential transforms, so a
// seed gives the same outcome with any standard library.
RunOutcome simulate_run(const GoodputModel& model, double work_s, double horizon_s, std::uint64_t seed);

}  // namespace trainsim::model
