#pragma once
// Strategies, training settings and models from the launch configurations users already have
// (docs/cli.md "Launch configurations"): the arguments of a Megatron-LM pretrain_gpt.py launch
// line, or a TorchTitan training TOML. Every argument that changes cost and is understood maps to
// a strategy key; what changes cost and is not understood is listed in a warning.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::spec {

struct LaunchConfig {
  std::string source;  // names the configuration in errors: "--megatron-args FILE", "--torchtitan FILE"
  nlohmann::json strategy = nlohmann::json::object();  // strategy keys, as an inline list reads
  TrainingOverrides training;
  std::optional<ModelSpec> model;  // the model's dimensions, when the configuration gives them
  std::string model_name = "launch-model";
  // Megatron's --num-layers-per-virtual-pipeline-stage: vpp follows from the model's layers
  std::optional<std::int64_t> layers_per_virtual_stage;
  // Megatron's --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split:
  // the embedding and the loss each take a layer's slot of the even split, in the first and the
  // last virtual stage (resolve_launch writes the split as a pipeline_layout)
  bool embedding_in_split = false;
  bool loss_in_split = false;
  // TorchTitan: each data-parallel rank's batch (the global batch follows from the degree)
  std::optional<std::int64_t> local_batch;
  // How the configuration names its sequence length and batch, for messages ("--seq-length",
  // "/training/seq_len"); the batch's name is empty when the configuration states no batch (a
  // TorchTitan TOML without local_batch_size: job_config.py's default of 8 per rank applies).
  std::string seq_len_key = "--seq-length";
  std::string batch_key = "--global-batch-size";
  std::vector<std::string> warnings;
};

// Words of a shell command line: quotes, backslash escapes and backslash-newline continuations;
// `#` comments to the end of a line.
std::vector<std::string> split_command_line(std::string_view text, const std::string& source);

// The launch command of a launch script, expanded as bash expands it: scalar and array
// assignments (NAME=..., NAME=( ... ), NAME+=( ... ), export), $NAME, ${NAME}, ${NAME:-default},
// ${NAME-default}, ${NAME:=default}, "${ARRAY[@]}" and ${ARRAY[@]} (split at blanks), $(( ))
// arithmetic, quotes, backslash continuations, comments, if/elif/else/fi on [[ ]] and [ ] tests;
// commands that cannot change it (mkdir, echo, set, ...) skipped; positional parameters unset.
// The launch is the one command that runs torchrun, python (-m torch.distributed.run) or a *.py
// script, or that starts with an --argument (argument lines after it continue it). Any other
// construct (loops, command substitution, pipes, other commands) is an error naming it and its line.
std::vector<std::string> launch_script_words(std::string_view text, const std::string& source);

// The arguments of a Megatron-LM launch (a whole torchrun line is fine: its --nnodes and
// --nproc_per_node give the world size, the arguments after the script are Megatron's).
LaunchConfig read_megatron_args(std::string_view text, const std::string& source);
LaunchConfig load_megatron_args(const std::string& path);

// A TorchTitan training TOML: [parallelism], [training], [activation_checkpoint], [float8],
// [compile], [model].
LaunchConfig read_torchtitan_toml(std::string_view text, const std::string& source);
LaunchConfig load_torchtitan_toml(const std::string& path);

struct LaunchedJob {
  WorkloadSpec workload;
  StrategySpec strategy;
};

// The training settings of a launch on a cluster of `devices` with the command line's `flags`
// (--seq-len, --global-batch, --dtype, --optimizer): the launch's sequence length and global batch
// (its own, or TorchTitan's local batch × the data-parallel degree), a flag filling what the launch
// leaves out. A flag that contradicts a sequence length or batch the launch states is an error
// naming both values; --dtype and --optimizer win over the launch's.
TrainingOverrides launch_training(const LaunchConfig& launch, const nlohmann::json& extra,
                                  const TrainingOverrides& flags, std::int64_t devices);

// The workload and strategy of a launch on a cluster of `devices`: `workload` (a file's, or null
// when none was given: the launch's own model and training settings then make it) with the
// launch's training settings (launch_training, with `flags`) over it; the launch's strategy keys
// with `extra` (an inline list's) over them.
LaunchedJob resolve_launch(const LaunchConfig& launch, const nlohmann::json& extra,
                           const std::optional<WorkloadSpec>& workload, std::int64_t devices,
                           const TrainingOverrides& flags = {});

}  // namespace trainsim::spec
