// Chakra execution traces: any bytes as rank 0's file of a folder, then the replay of what was read
// (alone and with the what-ifs).
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fuzz/fuzz.hpp"
#include "trainsim/trace/chakra.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  static const std::string dir = "/tmp/trainsim-fuzz-chakra-" + std::to_string(getpid());
  static const bool made = std::filesystem::create_directories(dir) || std::filesystem::is_directory(dir);
  if (!made) return 0;
  const auto path = dir + "/fuzz.0.et";
  if (!fuzz::write_input(path, data, size)) return 0;
  fuzz::expect_clean([&] {
    const auto job = trace::read_chakra_dir(dir);
    (void)trace::replay_chakra(job, {});
    (void)trace::replay_chakra(job, {.compute_scale = 3, .network_scale = 0.5});
  });
  return 0;
}
