#pragma once
// The three kinds of failure (docs/architecture.md "Conventions"): bad input (SpecError, IoError) maps to exit code 2,
// impossible states (InternalError, raised by SIM_ASSERT) to exit code 3. Only the CLI catches.
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace trainsim {

// One problem in one input: the JSON pointer of the offending value and what was expected.
// `source` overrides the error's source for diagnostics that belong to another input (a rule that
// spans the workload and the strategy names the file whose value it rejects).
struct Diagnostic {
  std::string pointer;
  std::string message;
  std::string source = {};
  friend bool operator==(const Diagnostic&, const Diagnostic&) = default;
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input. `source` names the input (a file path, or how an inline value was given); what()
// holds one "source: /pointer: message" line per diagnostic, sorted by pointer.
class SpecError : public Error {
 public:
  SpecError(std::string source, std::vector<Diagnostic> diagnostics);
  SpecError(std::string source, std::string pointer, std::string message);
  const std::string& source() const { return source_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::string source_;
  std::vector<Diagnostic> diagnostics_;
};

// The environment failed us: a file that cannot be opened, read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

// A bug: an invariant did not hold.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void assert_fail(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace trainsim

// Always on, also in release builds: a wrong answer costs more than a crash.
#define SIM_ASSERT(cond, ...)                                                                          \
  do {                                                                                                 \
    if (!(cond)) ::trainsim::detail::assert_fail(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (false)
