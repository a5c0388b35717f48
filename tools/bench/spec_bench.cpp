// Reading specs: throughput (MB/s) of the JSON spec loader (structure check, then the DOM parse)
// on synthetic files of 1 to 16 MB, each made of many small objects, the shape that once made
// every JSON reader quadratic (1 MB took 25 s); of the TorchTitan TOML reader (the nesting check,
// toml11, then the keys) on many small tables; of the Megatron-LM launch-script reader on long
// scripts of bash arrays and variables. Flat MB/s across sizes means linear time.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/spec/launch_config.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"

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

// [parallelism] tensor_parallel_degree = 8, then [extra0] a = 0 / b = [0, 1] ... of about `target`
// bytes (tables TorchTitan does not have: the reader names them, as it must)
std::string toml_text(std::int64_t target) {
  std::string out = "[parallelism]\ntensor_parallel_degree = 8\n";
  for (std::int64_t i = 0; static_cast<std::int64_t>(out.size()) < target; ++i)
    out += fmt::format("[extra{}]\na = {}\nb = [{}, 1]\n", i, i, i);
  return out;
}

// A launch script: a bash array of the model's arguments grown with variables, then the command
std::string script_text(std::int64_t target) {
  std::string out = "#!/bin/bash\nTP=${TP:-8}\nARGS=(\n";
  for (std::int64_t i = 0; static_cast<std::int64_t>(out.size()) < target; ++i)
    out += fmt::format("    --log-interval {}\n", i % 100 + 1);
  out += ")\ntorchrun pretrain_gpt.py --tensor-model-parallel-size $TP \"${ARGS[@]}\"\n";
  return out;
}

template <class Read>
void throughput(std::string_view what, Read read, std::string (*make)(std::int64_t)) {
  fmt::print("\n{}\n", what);
  fmt::print("{:>10} {:>10} {:>10}\n", "MB", "seconds", "MB/s");
  for (const std::int64_t mb : {1, 4, 16}) {
    const auto text = make(mb << 20);
    const auto start = std::chrono::steady_clock::now();
    try {
      read(text);
    } catch (const SpecError&) {
      // a refusal that read the whole input counts: the figure is the reading
    }
    const double wall = seconds_since(start);
    const double bytes = static_cast<double>(text.size());
    fmt::print("{:>10.1f} {:>10.3f} {:>10.1f}\n", bytes / 1e6, wall, bytes / 1e6 / wall);
  }
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
  throughput(
      "TorchTitan TOML: read_torchtitan_toml on many small tables",
      [](const std::string& text) { (void)spec::read_torchtitan_toml(text, "bench.toml"); }, toml_text);
  throughput(
      "Megatron-LM launch scripts: read_megatron_args on a long bash array",
      [](const std::string& text) { (void)spec::read_megatron_args(text, "bench.sh"); }, script_text);
}

}  // namespace trainsim::bench
