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

namespace {

// Where the failed hosts of a run are, and what replaces them.
class SparePool {
 public:
  explicit SparePool(const GoodputModel& model)
      : model_(model),
        spares_(model.spare_nodes),
        trays_(static_cast<std::size_t>(model.spare_trays_per_domain > 0 ? model.domains : 0),
               model.spare_trays_per_domain),
        generation_(trays_.size(), 0),
        spare_domains_(model.spare_domains) {}

  // A host fails at `t`: returns when the job has a replacement (t, or later when it must wait).
  double replace(double t, Random& random) {
    return model_.spare_trays_per_domain > 0 ? replace_tray(t, random) : replace_node(t);
  }

 private:
  // the pool of spare_nodes: a spare takes the failed node's place, or the job waits for the first
  // node back (perhaps the failed one itself)
  double replace_node(double t) {
    nodes_back_.push(t + model_.repair_s);
    while (!nodes_back_.empty() && nodes_back_.top() <= t) {
      nodes_back_.pop();
      ++spares_;
    }
    if (spares_ == 0) {
      t = nodes_back_.top();
      nodes_back_.pop();
      ++spares_;
    }
    --spares_;
    return t;
  }

  struct Back {
    double at;
    std::int64_t domain;  // -1: a whole domain back into the pool of spare domains
    std::int64_t generation;
    bool operator>(const Back& o) const { return at > o.at; }
  };

  // Trays and domains back from repair by `t` rejoin their pools (a tray of a domain the job has
  // since left goes back with that domain, not to the job).
  void returns_until(double t) {
    while (!back_.empty() && back_.top().at <= t) {
      const auto b = back_.top();
      back_.pop();
      if (b.domain < 0)
        ++spare_domains_;
      else if (b.generation == generation_[static_cast<std::size_t>(b.domain)])
        ++trays_[static_cast<std::size_t>(b.domain)];
    }
  }

  // A host of one of the job's domains (drawn uniformly) fails: its own domain's spare tray, else a
  // whole spare domain (the left one goes to repair), else the job waits for whichever is back first.
  double replace_tray(double t, Random& random) {
    const auto d = model_.domains > 1
                       ? static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(model_.domains)))
                       : std::int64_t{0};
    const auto i = static_cast<std::size_t>(d);
    back_.push({t + model_.repair_s, d, generation_[i]});  // the failed tray, back to its domain
    for (returns_until(t);; returns_until(t)) {
      if (trays_[i] > 0) {
        --trays_[i];
        return t;
      }
      if (spare_domains_ > 0) {
        --spare_domains_;
        ++generation_[i];
        trays_[i] = model_.spare_trays_per_domain;
        back_.push({t + model_.repair_s, -1, 0});
        return t;
      }
      SIM_ASSERT(!back_.empty(), "a domain without spare trays and nothing under repair");
      t = std::max(t, back_.top().at);
    }
  }

  const GoodputModel& model_;
  std::int64_t spares_;
  std::priority_queue<double, std::vector<double>, std::greater<>> nodes_back_;
  std::vector<int> trays_;                // free spare trays per domain of the job
  std::vector<std::int64_t> generation_;  // bumped when the job leaves a domain for a spare one
  std::int64_t spare_domains_;
  std::priority_queue<Back, std::vector<Back>, std::greater<>> back_;
};

}  // namespace

RunOutcome simulate_run(const GoodputModel& model, double work_s, double horizon_s, std::uint64_t seed) {
  const double rate = model.rate_per_s();
  SIM_ASSERT(rate > 0 && model.interval_s > 0, "a goodput model needs failures and a checkpoint interval");
  Random random(seed);
  RunOutcome out;
  out.by_class.assign(model.classes.size(), 0);
  SparePool pool(model);
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
      const double ready = pool.replace(t, random);
      out.waiting_s += ready - t;
      t = ready;
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
