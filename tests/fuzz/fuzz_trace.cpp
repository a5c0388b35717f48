// Profiler traces: any bytes as a trace file (plain or gzip: zlib tells them apart), then the
// summary, the replay and the calibration of what was read.
#include <unistd.h>

#include <string>

#include "fuzz/fuzz.hpp"
#include "trainsim/trace/analysis.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  static const std::string path = "/tmp/trainsim-fuzz-trace-" + std::to_string(getpid()) + ".json";
  if (!fuzz::write_input(path, data, size)) return 0;
  fuzz::expect_clean([&] {
    const auto t = trace::read_trace(path);
    (void)trace::summarize({t});
    // replays stay cheap per input
    if (t.gpu.size() + t.runtime.size() <= 2'000) {
      (void)trace::replay({t}, {});
      (void)trace::replay({t}, {.compute_scale = 3, .network_scale = 0.5});
      (void)trace::calibrate({t}, std::nullopt);
    }
  });
  return 0;
}
