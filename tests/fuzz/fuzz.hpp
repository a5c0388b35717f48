#pragma once
// What every fuzz target accepts: bad input is a SpecError or an IoError (exit code 2 in the CLI);
// anything else escaping, an InternalError (a broken invariant), a crash, a leak, undefined
// behaviour or a hang is a finding. libFuzzer aborts on an uncaught exception.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "trainsim/util/error.hpp"

namespace trainsim::fuzz {

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input as a file, for the readers that take a path; false when it cannot be written.
inline bool write_input(const std::string& path, const std::uint8_t* data, std::size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return true;
}

template <class F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const SpecError&) {
  } catch (const IoError&) {
  }
}

}  // namespace trainsim::fuzz
