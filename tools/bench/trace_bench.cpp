// Reading profiler traces: throughput (MB/s of JSON text) and peak memory, on the reference traces
// and on a synthetic trace of about 1 GB (written to the temporary directory, then removed), each
// in a child process so that its peak resident memory is its own. Then one replay of the largest
// reference trace.
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/benchmarks.hpp"
#include "trainsim/trace/analysis.hpp"

namespace trainsim::bench {
namespace {

// Bytes of JSON text in a file, gzip or plain.
std::int64_t text_bytes(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return -1;
  std::int64_t total = 0;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) total += n;
  gzclose(f);
  return total;
}

void read_one(const std::string& path, const std::string& label) {
  in_child([&] {
    const auto text = text_bytes(path);
    const auto on_disk = std::filesystem::file_size(path);
    const auto start = std::chrono::steady_clock::now();
    const auto t = trace::read_trace(path);
    const double wall = seconds_since(start);
    fmt::print("{:<44} {:>9.1f} {:>9.1f} {:>10} {:>8.2f} {:>8.0f} {:>9.0f}\n", label, on_disk / 1e6, text / 1e6,
               t.events, wall, text / 1e6 / wall, resident_kib("VmHWM:") / 1024.0);
  });
}

// A PyTorch-profiler-shaped trace: per iteration a CPU op, its launch, the kernel, the flow event.
std::string write_synthetic(std::int64_t target_bytes) {
  const auto path = (std::filesystem::temp_directory_path() / "trainsim-bench-trace.json").string();
  std::ofstream out(path);
  out << R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8}, )"
      << R"("deviceProperties": [{"id": 0, "name": "Synthetic GPU", "totalGlobalMem": 85899345920}], )"
      << "\"traceEvents\": [\n";
  std::int64_t written = 0;
  double ts = 1.7e15;
  for (std::int64_t i = 0; written < target_bytes; ++i) {
    if (i % 20000 == 0)
      out << fmt::format(
                 R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 1, "tid": 1, "ts": {:.3f}, "dur": 200000}},)",
                 i / 20000, ts)
          << '\n';
    const auto text = fmt::format(
        R"({{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": {0:.3f}, "dur": 8, "args": {{"External id": {1}, "Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {2:.3f}, "dur": 5, "args": {{"External id": {1}, "cbid": 211, "correlation": {1}}}}},
{{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", "pid": 0, "tid": 7, "ts": {3:.3f}, "dur": 9.5, "args": {{"External id": {1}, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {1}, "registers per thread": 168, "shared memory": 213248, "blocks per SM": 1, "warps per SM": 12, "grid": [132, 1, 1], "block": [384, 1, 1]}}}},
{{"ph": "f", "id": {1}, "pid": 0, "tid": 7, "ts": {3:.3f}, "cat": "ac2g", "name": "ac2g", "bp": "e"}},
)",
        ts, i + 1, ts + 1, ts + 10);
    out << text;
    written += static_cast<std::int64_t>(text.size());
    ts += 10;
  }
  out << R"x({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1.7e15, "dur": 1}]})x"
      << '\n';
  return path;
}

}  // namespace

void traces() {
  fmt::print("## trace read (streaming SAX over zlib), one process per file\n");
  fmt::print("{:<44} {:>9} {:>9} {:>10} {:>8} {:>8} {:>9}\n", "file", "disk MB", "JSON MB", "events", "wall (s)",
             "MB/s", "peak MiB");
  const std::string dir = "tests/reference/traces/hta/";
  std::string largest;
  std::uintmax_t largest_size = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gz") continue;
    read_one(entry.path().string(), entry.path().filename().string());
    if (entry.file_size() > largest_size) {
      largest_size = entry.file_size();
      largest = entry.path().string();
    }
  }
  const auto synthetic = write_synthetic(std::int64_t{1} << 30);
  read_one(synthetic, "synthetic (plain JSON, 1 GiB)");
  std::filesystem::remove(synthetic);

  if (largest.empty()) return;
  in_child([&] {
    const auto t = trace::read_trace(largest);
    const auto start = std::chrono::steady_clock::now();
    const auto r = trace::replay({t}, {});
    fmt::print("replay of {}: {} GPU ops, {} steps in {:.2f} s, peak {:.0f} MiB\n",
               std::filesystem::path(largest).filename().string(), t.gpu.size(), r.steps.size(), seconds_since(start),
               resident_kib("VmHWM:") / 1024.0);
  });
}

}  // namespace trainsim::bench
