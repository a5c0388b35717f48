#include "trainsim/util/error.hpp"

#include <algorithm>
#include <tuple>

namespace trainsim {
namespace {

std::string join_lines(const std::string& source, const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) out += '\n';
    out += d.source.empty() ? source : d.source;
    if (!d.pointer.empty()) out += ": " + d.pointer;
    out += ": " + d.message;
  }
  return out;
}

std::vector<Diagnostic> sorted(std::vector<Diagnostic> diagnostics) {
  std::stable_sort(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.source, a.pointer) < std::tie(b.source, b.pointer);
  });
  diagnostics.erase(std::unique(diagnostics.begin(), diagnostics.end()), diagnostics.end());
  return diagnostics;
}

}  // namespace

SpecError::SpecError(std::string source, std::vector<Diagnostic> diagnostics)
    : Error(join_lines(source, sorted(diagnostics))), source_(std::move(source)), diagnostics_(sorted(diagnostics)) {}

SpecError::SpecError(std::string source, std::string pointer, std::string message)
    : SpecError(std::move(source), std::vector<Diagnostic>{{std::move(pointer), std::move(message)}}) {}

namespace detail {

void assert_fail(const char* file, int line, const char* condition, const std::string& message) {
  throw InternalError(fmt::format("{}:{}: assertion `{}` failed: {}", file, line, condition, message));
}

}  // namespace detail
}  // namespace trainsim
