// trainsim benchmarks: wall time and memory figures for docs/performance.md. Not a
// test: figures vary with the machine; run `build/trainsim_bench` and read them.
#include <chrono>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/util/allocator.hpp"

namespace trainsim::bench {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::int64_t resident_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size()));
  return -1;
}

}  // namespace trainsim::bench

int main(int argc, char** argv) {
  trainsim::keep_freed_memory_for_reuse();
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which == "all" || which == "collectives") trainsim::bench::collectives();
  if (which == "all" || which == "engine") trainsim::bench::engine();
  if (which == "all" || which == "scale") trainsim::bench::scale();
  if (which == "all" || which == "sweep") trainsim::bench::sweep();
  if (which == "all" || which == "traces") trainsim::bench::traces();
  if (which == "all" || which == "specs") trainsim::bench::specs();
  return 0;
}
