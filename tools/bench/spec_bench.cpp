// Reading JSON specs: throughput (MB/s) of the spec loader (structure check, then the DOM parse)
// on synthetic files of 1 to 16 MB, each made of many small objects, the shape that once made
// every JSON reader quadratic (1 MB took 25 s). Flat MB/s across sizes means linear time.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/spec/reader.hpp"

namespace trainsim::bench {
namespace {

// {"tp": 8, "x0": {"a": 0, "b": [0, 1]}, "x1": ...} of about `target` bytes
std::string write_spec(std::int64_t target) {
  const auto path = (std::filesystem::temp_directory_path() / "trainsim-bench-spec.json").string();
  std::ofstream out(path);
  out << "{\"tp\": 8";
  std::int64_t written = 9;
  for (std::int64_t i = 0; written < target; ++i) {
    const auto item = fmt::format(", \"x{}\": {{\"a\": {}, \"b\": [{}, 1]}}", i, i, i);
    out << item;
    written += static_cast<std::int64_t>(item.size());
  }
  out << "}\n";
  return path;
}

}  // namespace

void specs() {
  fmt::print("\nJSON specs: load_json_file (structure check + parse) on many small objects\n");
  fmt::print("{:>10} {:>10} {:>10}\n", "MB", "seconds", "MB/s");
  for (const std::int64_t mb : {1, 4, 16}) {
    const auto path = write_spec(mb << 20);
    const auto bytes = static_cast<double>(std::filesystem::file_size(path));
    const auto start = std::chrono::steady_clock::now();
    const auto json = spec::load_json_file(path);
    const double wall = seconds_since(start);
    fmt::print("{:>10.1f} {:>10.3f} {:>10.1f}\n", bytes / 1e6, wall, bytes / 1e6 / wall);
    std::filesystem::remove(path);
  }
}

}  // namespace trainsim::bench
