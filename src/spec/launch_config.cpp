// What launch configurations have in common: shell words, and turning a launch into the workload
// and strategy a run takes.
#include "trainsim/spec/launch_config.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {

std::vector<std::string> split_command_line(std::string_view text, const std::string& source) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        word += text[++i];
      } else {
        word += c;
      }
      continue;
    }
    if (c == '\\' && i + 1 < text.size()) {
      const char next = text[++i];
      if (next == '\n') continue;  // a continued line
      if (next == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
        ++i;
        continue;
      }
      word += next;
      in_word = true;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) throw SpecError(source, "", fmt::format("unterminated {} quote", quote == '"' ? "double" : "single"));
  if (in_word) words.push_back(std::move(word));
  return words;
}

namespace {

// The launch's strategy keys with the inline list's over them.
nlohmann::json merged_strategy(const LaunchConfig& launch, const nlohmann::json& extra) {
  auto json = launch.strategy;
  for (const auto& [key, value] : extra.items()) json[key] = value;
  return json;
}

std::int64_t integer_key(const nlohmann::json& json, const char* key, std::int64_t fallback) {
  const auto it = json.find(key);
  return it != json.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

WorkloadSpec launch_workload(const LaunchConfig& launch, const TrainingOverrides& t,
                             const std::optional<WorkloadSpec>& workload) {
  WorkloadSpec w;
  if (workload) {
    w = *workload;
    if (launch.model) {
      // a launch line that states the model's dimensions must agree with the workload file
      const auto& m = *launch.model;
      const auto check = [&](const char* what, std::int64_t launched, std::int64_t file) {
        if (launched != file)
          throw SpecError(launch.source, "",
                          fmt::format("{} {} contradicts workload \"{}\" ({})", what, launched, w.name, file));
      };
      check("the model's layers", m.layers, w.model.layers);
      check("the hidden size", m.hidden, w.model.hidden);
      check("the attention heads", m.heads, w.model.heads);
      check("the multi-token prediction modules (--mtp-num-layers)", m.mtp_layers, w.model.mtp_layers);
    }
  } else {
    if (!launch.model)
      throw SpecError(launch.source, "",
                      "gives no model: give -w WORKLOAD (a workload file or a Hugging Face config), or the model's "
                      "dimensions");
    if (launch.model->vocab <= 0)
      throw SpecError(launch.source, "", "a model given by arguments needs --vocab-size (Megatron takes it from the "
                                         "tokenizer)");
    w.name = launch.model_name;
    w.model = *launch.model;
    if (!t.seq_len || !t.global_batch)
      throw SpecError(launch.source, "", "gives no sequence length or global batch (--seq-length, --global-batch-size)");
  }
  if (t.seq_len) w.training.seq_len = *t.seq_len;
  if (t.global_batch) w.training.global_batch = *t.global_batch;
  if (t.dtype) w.training.dtype = training_dtype_named(*t.dtype, launch.source);
  if (t.optimizer) w.training.optimizer = optimizer_named(*t.optimizer, launch.source);
  for (const auto& warning : launch.warnings) w.warnings.push_back(warning);
  return w;
}

}  // namespace

TrainingOverrides launch_training(const LaunchConfig& launch, const nlohmann::json& extra,
                                  const TrainingOverrides& flags, std::int64_t devices) {
  auto t = launch.training;
  std::string batch_text;  // how the launch's global batch came about, for a conflict
  if (t.global_batch) {
    batch_text = fmt::format("{} {}", launch.batch_key, *t.global_batch);
  } else if (launch.local_batch) {
    // no gradient accumulation: the global batch is every data-parallel rank's local batch
    const auto json = merged_strategy(launch, extra);
    const std::int64_t model_parallel =
        integer_key(json, "tp", 1) * integer_key(json, "cp", 1) * integer_key(json, "pp", 1);
    const std::int64_t gpus =
        integer_key(json, "gpus", json.contains("dp") ? integer_key(json, "dp", 1) * model_parallel : devices);
    const std::int64_t dp = std::max<std::int64_t>(1, gpus / model_parallel);
    t.global_batch = *launch.local_batch * dp;
    batch_text = fmt::format("{} {} × data-parallel degree {} = global batch {}", launch.batch_key,
                             *launch.local_batch, dp, *t.global_batch);
  }
  if (flags.seq_len && t.seq_len && *flags.seq_len != *t.seq_len)
    throw SpecError(launch.source, "",
                    fmt::format("{} {} conflicts with --seq-len {} on the command line: give one of them, or the same "
                                "value",
                                launch.seq_len_key, *t.seq_len, *flags.seq_len));
  if (flags.global_batch && t.global_batch && !launch.batch_key.empty() && *flags.global_batch != *t.global_batch)
    throw SpecError(launch.source, "",
                    fmt::format("{} conflicts with --global-batch {} on the command line: give one of them, or the "
                                "same value",
                                batch_text, *flags.global_batch));
  if (flags.seq_len) t.seq_len = flags.seq_len;
  if (flags.global_batch) t.global_batch = flags.global_batch;
  if (flags.dtype) t.dtype = flags.dtype;
  if (flags.optimizer) t.optimizer = flags.optimizer;
  return t;
}

namespace {

// Megatron's even split with the embedding and the loss counted as layers (TransformerConfig's
// account_for_*_in_pipeline_split), as a pipeline layout: `slots` over `chunks` virtual stages, the
// embedding taking one of the first's, the loss one of the last's; the multi-token prediction
// modules beside the loss, where Megatron-Core builds them (mtp_process on the last stage).
std::string accounted_split_layout(const LaunchConfig& launch, int slots, std::int64_t chunks, int mtp) {
  if (chunks < 2 || slots % chunks != 0)
    throw SpecError(launch.source, "",
                    fmt::format("--account-for-*-in-pipeline-split: {} layers (with the embedding and the loss "
                                "counted) do not split evenly into pp·vpp = {} virtual stages",
                                slots, chunks));
  const auto k = slots / static_cast<int>(chunks);
  const int first = k - (launch.embedding_in_split ? 1 : 0);
  const int last = k - (launch.loss_in_split ? 1 : 0);
  const std::string modules = mtp > 0 ? fmt::format("m*{}", mtp) : "";
  if (chunks == 2) return fmt::format("Et*{}|t*{}{}L", first, last, modules);
  return fmt::format("Et*{}|(t*{}|)*{}t*{}{}L", first, k, chunks - 2, last, modules);
}

}  // namespace

LaunchedJob resolve_launch(const LaunchConfig& launch, const nlohmann::json& extra,
                           const std::optional<WorkloadSpec>& workload, std::int64_t devices,
                           const TrainingOverrides& flags) {
  const auto training = launch_training(launch, extra, flags, devices);
  LaunchedJob out{.workload = launch_workload(launch, training, workload), .strategy = {}};
  auto json = merged_strategy(launch, extra);
  const auto number = [&](const char* key, std::int64_t fallback) { return integer_key(json, key, fallback); };
  const std::int64_t pp = number("pp", 1);
  const int layers = out.workload.model.layers;
  // the slots of Megatron's even split: the layers, and the embedding and the loss where counted
  const bool accounted = pp > 1 && (launch.embedding_in_split || launch.loss_in_split);
  const int slots =
      layers + (accounted && launch.embedding_in_split ? 1 : 0) + (accounted && launch.loss_in_split ? 1 : 0);
  if (launch.layers_per_virtual_stage && !json.contains("vpp")) {
    const std::int64_t per_chunk = *launch.layers_per_virtual_stage;
    if (slots % (pp * per_chunk) != 0)
      throw SpecError(launch.source, "",
                      fmt::format("{} layers per virtual stage: {} layers do not split into {} stages of such chunks",
                                  per_chunk, slots, pp));
    json["vpp"] = slots / (pp * per_chunk);
  }
  if (accounted && !json.contains("pipeline_layout") && !json.contains("first_stage_layers") &&
      !json.contains("last_stage_layers"))
    json["pipeline_layout"] =
        accounted_split_layout(launch, slots, pp * number("vpp", 1), out.workload.model.mtp_layers);
  out.strategy = read_strategy_spec(json, launch.source);
  return out;
}

}  // namespace trainsim::spec
