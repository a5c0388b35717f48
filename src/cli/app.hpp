#pragma once
// The CLI's entry point and exit codes, without CLI11 (main.cpp needs only these).
namespace trainsim::cli {

enum ExitCode : int { kOk = 0, kDoesNotFit = 1, kBadInput = 2, kInternalError = 3 };

// Parses argv and runs the chosen subcommand. Errors propagate as exceptions to main().
int run_app(int argc, char** argv);

}  // namespace trainsim::cli
