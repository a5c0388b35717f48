#include "trainsim/model/goodput.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "trainsim/util/error.hpp"
#include "trainsim/util/random.hpp"

namespace trainsim::model {

double young_interval(double checkpoint_s, double mtbf_s) {
  return std::sqrt(2 * checkpoint_s * mtbf_s);
}

double daly_interval(double checkpoint_s, double mtbf_s) {
  if (checkpoint_s >= 2 * mtbf_s) return mtbf_s;
  const double x = checkpoint_s / (2 * mtbf_s);
  return std::sqrt(2 * checkpoint_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - checkpoint_s;
}

double expected_wall_time(double work_s, double interval_s, double checkpoint_s, double restart_s, double mtbf_s) {
  return mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((interval_s + checkpoint_s) / mtbf_s) * work_s / interval_s;
}

double GoodputModel::rate_per_s() const {
  double r = 0;
  for (const auto& c : classes) r += c.rate_per_s;
  return r;
}

RunOutcome simulate_run(const GoodputModel& model, double work_s, double horizon_s, std::uint64_t seed) {
  const double rate = model.rate_per_s();
  SIM_ASSERT(rate > 0 && model.interval_s > 0, "a goodput model needs failures and a checkpoint interval");
  Random random(seed);
  RunOutcome out;
  out.by_class.assign(model.classes.size(), 0);
  // nodes under repair, by the time they return to the spare pool
  std::priority_queue<double, std::vector<double>, std::greater<>> repairs;
  std::int64_t spares = model.spare_nodes;
  double t = 0;
  const auto fail = [&] {
    // which cause, in proportion to its rate
    double pick = random.uniform() * rate;
    std::size_t c = 0;
    while (c + 1 < model.classes.size() && pick > model.classes[c].rate_per_s) pick -= model.classes[c++].rate_per_s;
    ++out.interruptions;
    ++out.by_class[c];
    return c;
  };
  const auto restart = [&](std::size_t cause) {
    if (model.classes[cause].replaces_node && model.repair_s > 0) {
      // the failed node goes to repair; a spare takes its place, or the job waits for the first
      // node back (perhaps the failed one itself)
      repairs.push(t + model.repair_s);
      while (!repairs.empty() && repairs.top() <= t) {
        repairs.pop();
        ++spares;
      }
      if (spares == 0) {
        const double back = repairs.top();
        repairs.pop();
        out.waiting_s += back - t;
        t = back;
        ++spares;
      }
      --spares;
    }
    // the restart itself may be interrupted, and starts over (until the horizon)
    while (t < horizon_s) {
      const double next = random.exponential(rate);
      if (next >= model.restart_s) {
        t += model.restart_s;
        out.restart_s += model.restart_s;
        return;
      }
      t += next;
      out.restart_s += next;
      fail();
    }
  };
  while (out.work_s < work_s && t < horizon_s) {
    const double segment = std::min(model.interval_s, work_s - out.work_s);
    const double need = segment + model.checkpoint_s;
    const double next = random.exponential(rate);
    if (next >= need) {
      t += need;
      out.work_s += segment;
      out.checkpoint_s += model.checkpoint_s;
      continue;
    }
    t += next;
    out.lost_s += next;
    restart(fail());
  }
  out.wall_s = t;
  return out;
}

}  // namespace trainsim::model
