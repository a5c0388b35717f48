#pragma once
// Subcommands of the trainsim CLI. Each registers its options on the app and returns the action
// to run once parsing succeeded; actions return the process exit code.
#include <functional>

#include <CLI/CLI.hpp>

#include "cli/app.hpp"

#include "trainsim/report/format.hpp"
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::cli {

using Action = std::function<int()>;

void add_run_command(CLI::App& app, Action& action);
void add_collective_command(CLI::App& app, Action& action);
void add_regress_command(CLI::App& app, Action& action);
void add_tunables_command(CLI::App& app, Action& action);
void add_goodput_command(CLI::App& app, Action& action);
void add_sweep_command(CLI::App& app, Action& action);
// trace summary, replay, calibrate
void add_trace_commands(CLI::App& app, Action& action);

// --seq-len, --global-batch, --dtype, --optimizer: training settings that complete a Hugging Face
// config or override a workload file's (spec::TrainingOverrides).
struct TrainingFlags {
  std::int64_t seq_len = 0;
  std::int64_t global_batch = 0;
  std::string dtype;
  std::string optimizer;
  spec::TrainingOverrides overrides() const;
};
void add_training_options(CLI::App& command, TrainingFlags& flags);

// --format table|json|csv, shared by every command that prints a report.
void add_format_option(CLI::App& command, std::string& format);
report::Format parse_format(const std::string& format);
// A report on stdout; in table and CSV modes its warnings follow on stderr (so `> report.txt`
// keeps the table clean), in JSON they are part of the report.
void print_report(const std::string& text, const std::vector<std::string>& warnings, report::Format format);

}  // namespace trainsim::cli
