// The only place that catches: every failure becomes one message on stderr and an exit code
// (docs/cli.md: 2 bad input, 3 internal error).
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cli/app.hpp"
#include "trainsim/util/allocator.hpp"
#include "trainsim/util/error.hpp"

int main(int argc, char** argv) {
  using trainsim::cli::ExitCode;
  trainsim::keep_freed_memory_for_reuse();
  try {
    return trainsim::cli::run_app(argc, argv);
  } catch (const trainsim::SpecError& e) {
    const std::string text = e.what();
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
      fmt::print(stderr, "error: {}\n", text.substr(start, end - start));
      start = end + 1;
    }
    return ExitCode::kBadInput;
  } catch (const trainsim::IoError& e) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "error: {}\n", e.what());
    return ExitCode::kBadInput;
  } catch (const trainsim::InternalError& e) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "internal error (a bug in trainsim, please report it): {}\n", e.what());
    return ExitCode::kInternalError;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "error: out of memory\n");
    return ExitCode::kInternalError;
  } catch (const std::exception& e) {
    std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
    fmt::print(stderr, "internal error (a bug in trainsim, please report it): {}\n", e.what());
    return ExitCode::kInternalError;
  }
}
