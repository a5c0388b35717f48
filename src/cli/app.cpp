#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::cli {

void add_format_option(CLI::App& command, std::string& format) {
  command.add_option("--format", format, "output format: table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}));
}

report::Format parse_format(const std::string& format) {
  if (format == "json") return report::Format::Json;
  if (format == "csv") return report::Format::Csv;
  return report::Format::Table;
}

void add_training_options(CLI::App& command, TrainingFlags& flags) {
  command.add_option("--seq-len", flags.seq_len, "sequence length (completes a Hugging Face config)");
  command.add_option("--global-batch", flags.global_batch, "sequences per optimizer step");
  command.add_option("--dtype", flags.dtype, "training dtype: bf16, fp16, fp32, fp8 (default bf16 for a config)");
  command.add_option("--optimizer", flags.optimizer, "adam, adamw or sgd (default adamw for a config)");
}

spec::TrainingOverrides TrainingFlags::overrides() const {
  spec::TrainingOverrides o;
  if (seq_len != 0) o.seq_len = seq_len;
  if (global_batch != 0) o.global_batch = global_batch;
  if (!dtype.empty()) o.dtype = dtype;
  if (!optimizer.empty()) o.optimizer = optimizer;
  return o;
}

void print_report(const std::string& text, const std::vector<std::string>& warnings, report::Format format) {
  fmt::print("{}", text);
  if (format == report::Format::Json || warnings.empty()) return;
  std::fflush(stdout);  // what stdout holds goes first: 2>&1 never splits a row
  for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
}

int run_app(int argc, char** argv) {
  CLI::App app{"trainsim: a discrete-event cluster simulator for parallel LLM training"};
  app.set_version_flag("--version", std::string("trainsim ") + TRAINSIM_VERSION);
  app.footer(
      "Example: trainsim run -t topologies/dgx-a100-superpod.json -w workloads/gpt3-175b.json "
      "-s tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3\n"
      "Each command's --help shows an example of its own.");
  app.require_subcommand(1);
  Action action;
  add_run_command(app, action);
  add_collective_command(app, action);
  add_sweep_command(app, action);
  add_trace_commands(app, action);
  add_regress_command(app, action);
  add_tunables_command(app, action);
  add_goodput_command(app, action);
  // A first word that names no command deserves better than CLI11's "a subcommand is required".
  if (argc > 1 && argv[1][0] != '-' &&
      app.get_subcommands([&](const CLI::App* c) { return c->get_name() == argv[1]; }).empty()) {
    std::string names;
    for (const auto* c : app.get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + c->get_name();
    throw SpecError("command line", "", fmt::format("unknown command \"{}\"; expected one of: {}", argv[1], names));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own messages are already sentences about the command line.
    throw SpecError("command line", "", e.what());
  }
  return action();
}

}  // namespace trainsim::cli
