#pragma once
// The sweep's candidates in the order of their full lower bounds (ties by position), computing a
// full bound only when needed: each candidate comes with a cheaper bound that its full bound never
// falls below (lower::kernel_lower_bound under lower::step_time_lower_bound), and the full bound
// is computed only once the cheap one is the smallest left and within the limit asked for. The
// order is exactly that of computing every full bound first and sorting; which full bounds are
// computed depends on the batch size (the thread count), the order does not.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "trainsim/util/error.hpp"

namespace trainsim::search {

class BoundOrder {
 public:
  // The full bounds of the given positions, in their order.
  using FullBounds = std::function<std::vector<double>(std::span<const std::size_t>)>;

  // `cheap[p]` for each of `positions` (indices into `cheap`); full bounds computed `batch` at a time.
  BoundOrder(std::span<const std::size_t> positions, std::span<const double> cheap, FullBounds full_bounds,
             std::size_t batch)
      : full_bounds_(std::move(full_bounds)), batch_(std::max<std::size_t>(1, batch)) {
    heap_.reserve(positions.size());
    for (const auto p : positions) heap_.push_back({cheap[p], false, p});
    std::make_heap(heap_.begin(), heap_.end(), later);
  }

  std::size_t size() const { return heap_.size(); }
  std::size_t full_bounds_computed() const { return computed_; }

  // The next position and its full bound, or none when none is left whose full bound is at most
  // `limit` (then every one left has a full bound above it, so none needs computing).
  std::optional<std::pair<std::size_t, double>> peek(double limit) {
    while (!heap_.empty() && !heap_.front().full) {
      if (heap_.front().key > limit) return std::nullopt;  // its full bound is larger still
      // the smallest cheap bounds within the limit: their full bounds, a batch at once
      std::vector<std::size_t> batch;
      while (!heap_.empty() && !heap_.front().full && heap_.front().key <= limit && batch.size() < batch_) {
        batch.push_back(heap_.front().position);
        std::pop_heap(heap_.begin(), heap_.end(), later);
        heap_.pop_back();
      }
      const auto full = full_bounds_(batch);
      SIM_ASSERT(full.size() == batch.size(), "{} full bounds for {} candidates", full.size(), batch.size());
      computed_ += batch.size();
      for (std::size_t i = 0; i < batch.size(); ++i) {
        heap_.push_back({full[i], true, batch[i]});
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
    if (heap_.empty() || heap_.front().key > limit) return std::nullopt;
    return std::pair{heap_.front().position, heap_.front().key};
  }

  // Takes the position peek returned.
  void pop() {
    SIM_ASSERT(!heap_.empty() && heap_.front().full, "pop before a peek found a full bound");
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }

 private:
  struct Entry {
    double key;  // the cheap bound, or the full bound once computed
    bool full;
    std::size_t position;
  };
  // Smallest key first; at equal keys a cheap bound before a full one (its full bound may equal the
  // key at a smaller position), then by position.
  static bool later(const Entry& a, const Entry& b) {
    return std::tie(a.key, a.full, a.position) > std::tie(b.key, b.full, b.position);
  }

  FullBounds full_bounds_;
  std::size_t batch_;
  std::size_t computed_ = 0;
  std::vector<Entry> heap_;
};

}  // namespace trainsim::search
