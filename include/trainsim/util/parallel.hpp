#pragma once
// Runs independent work items on a few threads. Each item writes only its own slot of the
// caller's output, so results never depend on the thread count or on which thread ran what.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace trainsim {

// `threads` 0 means one per hardware thread. Calls fn(i) once for every i in [0, n); rethrows the
// first (lowest-index) exception after every thread has stopped.
template <typename Fn>
void parallel_for(std::size_t n, unsigned threads, Fn&& fn) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t workers = std::min<std::size_t>(threads, n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(workers);
    for (std::size_t t = 0; t < workers; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace trainsim
