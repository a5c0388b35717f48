// TorchTitan training TOMLs (torchtitan/config/job_config.py; the 2024 layout's [experimental] and
// [training] degrees too) as strategy keys and training settings. The TOML is read with toml11 and
// walked as JSON, so errors name the file and the key's path like every other spec.
#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml.hpp>

#include "trainsim/spec/launch_config.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/utf8.hpp"

namespace trainsim::spec {
namespace {

nlohmann::json to_json(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean:
      return v.as_boolean();
    case toml::value_t::integer:
      return v.as_integer();
    case toml::value_t::floating:
      return v.as_floating();
    case toml::value_t::string:
      return v.as_string().str;
    case toml::value_t::array: {
      auto out = nlohmann::json::array();
      for (const auto& e : v.as_array()) out.push_back(to_json(e));
      return out;
    }
    case toml::value_t::table: {
      auto out = nlohmann::json::object();
      for (const auto& [k, e] : v.as_table()) out[k] = to_json(e);
      return out;
    }
    default: {
      std::ostringstream text;
      text << v;
      return text.str();  // dates and times: nothing here reads them
    }
  }
}

// TorchTitan's Llama flavours (torchtitan/models/llama3/__init__.py): dimension, layers, heads,
// key-value heads, and the FFN width its ffn_dim_multiplier and multiple_of give; vocabulary of
// the Llama 3 tokenizer.
struct Flavour {
  std::string_view name;
  std::string_view flavour;
  int layers;
  std::int64_t hidden;
  int heads;
  int kv_heads;
  std::int64_t ffn;
  std::int64_t vocab;
};
constexpr Flavour kFlavours[] = {{"llama3", "8B", 32, 4096, 32, 8, 14336, 128256},
                                 {"llama3", "70B", 80, 8192, 64, 8, 28672, 128256},
                                 {"llama3", "405B", 126, 16384, 128, 8, 53248, 128256}};

// Keys that leave a step's cost alone: jobs, logging, checkpoints, data, optimiser settings.
const std::set<std::string, std::less<>> kCostFreeTables{
    "job",  "profiling",  "metrics",         "checkpoint",        "optimizer",   "lr_scheduler",
    "comm", "validation", "fault_tolerance", "memory_estimation", "experimental"};

// Keys of [training] that leave a step's cost alone.
const std::set<std::string, std::less<>> kCostFreeTrainingKeys{"steps",
                                                               "warmup_steps",
                                                               "max_norm",
                                                               "dataset",
                                                               "dataset_path",
                                                               "gc_freq",
                                                               "seed",
                                                               "deterministic",
                                                               "gc_debug",
                                                               "mixed_precision_param",
                                                               "mixed_precision_reduce"};

// Which schedule each of TorchTitan's pipeline schedules is closest to.
struct ScheduleName {
  std::string_view titan;
  std::string_view schedule;
  bool exact;
};
constexpr ScheduleName kSchedules[] = {{"1F1B", "1f1b", true},
                                       {"GPipe", "gpipe", true},
                                       {"Interleaved1F1B", "interleaved", true},
                                       {"LoopedBFS", "interleaved", false},
                                       {"InterleavedZeroBubble", "zb-h1", false},
                                       {"ZBVZeroBubble", "zb-h1", false},
                                       {"DualPipeV", "dualpipev", false}};

// A list of names as job_config.py takes it: a TOML list of strings, or one string of
// comma-separated names (the 2025 layout's `string_list`: split on commas, blanks trimmed, empty
// names dropped; TorchTitan's own llama3_405b.toml of April 2025 writes `converters = "float8"`).
std::optional<std::vector<std::string>> string_list(Reader& r, std::string_view key) {
  const auto* v = r.value(key);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  const auto add = [&](std::string_view text) {
    while (!text.empty()) {
      const auto comma = std::min(text.find(','), text.size());
      auto name = text.substr(0, comma);
      text.remove_prefix(std::min(comma + 1, text.size()));
      name.remove_prefix(std::min(name.find_first_not_of(" \t"), name.size()));
      name.remove_suffix(name.size() - (name.find_last_not_of(" \t") + 1));
      if (!name.empty()) out.emplace_back(name);
    }
  };
  if (v->is_string()) {
    add(v->get_ref<const std::string&>());
    return out;
  }
  if (v->is_array() && std::all_of(v->begin(), v->end(), [](const nlohmann::json& e) { return e.is_string(); })) {
    for (const auto& e : *v) add(e.get_ref<const std::string&>());
    return out;
  }
  r.error_at(key, fmt::format("expected a list of strings or a comma-separated string, got {}", describe(*v)));
  return std::nullopt;
}

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// toml11's multi-line message ("[error] toml::parse_key: what\n --> FILE\n   |\n 3 | text\n   |  ^--- detail
// \n Hint: ...") as one line: "at line 3: what (detail)".
std::string toml_error(std::string_view message) {
  std::string what;
  std::string line;
  std::string detail;
  std::size_t start = 0;
  while (start < message.size()) {
    const auto end = std::min(message.find('\n', start), message.size());
    const auto text = message.substr(start, end - start);
    start = end + 1;
    if (what.empty()) {
      what = std::string(text);
      if (const auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
      continue;
    }
    const auto bar = text.find(" | ");
    if (bar != std::string_view::npos && line.empty()) {
      const auto number = text.substr(0, bar);
      if (number.find_first_not_of(' ') != std::string_view::npos &&
          number.find_first_not_of(" 0123456789") == std::string_view::npos)
        line = std::string(number.substr(number.find_first_not_of(' ')));
    }
    if (const auto caret = text.find("^"); caret != std::string_view::npos && detail.empty()) {
      auto rest = text.substr(caret);
      rest.remove_prefix(std::min(rest.find_first_not_of("^-~ "), rest.size()));
      detail = std::string(rest);
    }
  }
  if (!what.empty() && what.back() == '.') what.pop_back();
  return fmt::format("{}{}{}", line.empty() ? "" : fmt::format("at line {}: ", line), what,
                     detail.empty() ? "" : fmt::format(" ({})", detail));
}

// One TOML read into a launch, section by section. The degrees may stand in [parallelism] (2025)
// or in the 2024 layout's [training] and [experimental].
class TitanReader {
 public:
  TitanReader(const nlohmann::json& json, const std::string& source, LaunchConfig& out)
      : root_(json, "", diagnostics_), source_(source), out_(out), s_(out.strategy) {
    parallelism_ = root_.optional_object("parallelism");
    training_ = root_.optional_object("training");
    experimental_ = root_.optional_object("experimental");
  }

  void read() {
    s_["framework"] = "torchtitan";
    optimizer();
    const auto pp = degrees();
    schedule(pp);
    training(pp);
    compile();
    activation_checkpoint();
    float8_and_model();
    unknown_keys();
    diagnostics_.throw_if_any(source_);
  }

 private:
  std::optional<std::int64_t> degree(std::string_view key, std::int64_t min = 1) {
    for (auto* t : {&parallelism_, &training_, &experimental_})
      if (*t && (*t)->has(key)) return (*t)->integer(key, {min, 1 << 20});
    return std::nullopt;
  }
  std::optional<bool> flag(std::string_view key) {
    for (auto* t : {&parallelism_, &training_, &experimental_})
      if (*t && (*t)->has(key)) return (*t)->boolean(key);
    return std::nullopt;
  }

  // The parallel degrees, FSDP/HSDP, AsyncTP and resharding; returns pp.
  std::int64_t degrees() {
    const auto shard = degree("data_parallel_shard_degree", -1).value_or(-1);
    const auto replicate = degree("data_parallel_replicate_degree").value_or(1);
    const auto tp = degree("tensor_parallel_degree").value_or(1);
    const auto pp = degree("pipeline_parallel_degree").value_or(1);
    const auto cp = degree("context_parallel_degree").value_or(1);
    const auto ep = degree("expert_parallel_degree").value_or(1);
    if (shard == 0) root_.error_at("data_parallel_shard_degree", "0: expected -1 (what remains) or a degree");
    s_["tp"] = tp;
    if (tp > 1) s_["sp"] = "on";  // TorchTitan's tensor-parallel plan shards the sequence between blocks
    s_["pp"] = pp;
    if (cp > 1) s_["cp"] = cp;
    if (ep > 1) s_["ep"] = ep;
    // FSDP over the shard group, replicated across the replicate group (HSDP); DDP when shard is 1
    if (shard > 0) {
      s_["dp"] = shard * replicate;
      s_["zero"] = shard > 1 ? 3 : 0;
      if (replicate > 1 && shard > 1) s_["zero_group"] = shard;
    } else if (replicate > 1) {
      root_.error_at("data_parallel_replicate_degree",
                     "with data_parallel_shard_degree -1 the shard group is what remains: give both degrees for HSDP");
    }
    if (const auto async = flag("enable_async_tensor_parallel"); async && *async) s_["tp_overlap"] = "on";
    // with TP the loss runs under DTensor's loss parallelism unless disabled (the preset's loss)
    if (const auto plain = flag("disable_loss_parallel"); plain && *plain && tp > 1) s_["loss"] = "upcast";
    if (parallelism_ && parallelism_->has("fsdp_reshard_after_forward")) {
      const auto policy = parallelism_->string("fsdp_reshard_after_forward");
      if (policy == "always")
        s_["reshard_after_forward"] = "on";
      else if (policy == "never")
        s_["reshard_after_forward"] = "off";
      else if (policy != "default")
        parallelism_->error_at("fsdp_reshard_after_forward",
                               fmt::format("\"{}\": expected default, always or never", policy));
    }
    return pp;
  }

  // The pipeline schedule and its micro-batches.
  void schedule(std::int64_t pp) {
    std::string schedule = "1F1B";
    for (auto* t : {&parallelism_, &experimental_})
      if (*t && (*t)->has("pipeline_parallel_schedule")) schedule = (*t)->string("pipeline_parallel_schedule");
    if (pp > 1) {
      const auto* known = std::find_if(std::begin(kSchedules), std::end(kSchedules),
                                       [&](const ScheduleName& n) { return n.titan == schedule; });
      if (known == std::end(kSchedules)) {
        root_.error_at("parallelism", fmt::format("pipeline_parallel_schedule \"{}\" is not one trainsim models "
                                                  "(1F1B, GPipe, Interleaved1F1B; LoopedBFS, InterleavedZeroBubble, "
                                                  "ZBVZeroBubble, DualPipeV approximated)",
                                                  schedule));
      } else {
        s_["schedule"] = std::string(known->schedule);
        const bool zero_bubble = known->schedule == "zb-h1";
        if (!known->exact)
          out_.warnings.push_back(
              fmt::format("{}: pipeline schedule {} is simulated as {}{}", source_, schedule, known->schedule,
                          zero_bubble ? " with one stage per rank (its looped or V-shaped stages are not modelled; "
                                        "pipeline_parallel_layers_per_stage is not read)"
                                      : ""));
        // DualPipeV: two stages per rank in a V, in the order of DeepSeek's dualpipev.py
        if (known->schedule == "dualpipev") s_["vpp"] = 2;
        // looped schedules put two stages on each rank unless the layers per stage say otherwise
        if (known->schedule == "interleaved") {
          if (const auto per_stage = degree("pipeline_parallel_layers_per_stage"))
            out_.layers_per_virtual_stage = *per_stage;
          else
            s_["vpp"] = 2;
        }
      }
      if (const auto micro = degree("pipeline_parallel_microbatch_size")) s_["mb"] = *micro;
    }
  }

  // [optimizer] name: TorchTitan builds torch.optim.Adam or AdamW (components/optimizer.py), in
  // its `implementation` ("for-loop", "foreach", "fused": how the host launches the step).
  void optimizer() {
    auto o = root_.optional_object("optimizer");
    if (!o) return;
    if (o->has("implementation")) {
      const auto impl = o->string("implementation");
      if (impl == "fused" || impl == "foreach")
        s_["optimizer_impl"] = impl;
      else if (impl == "for-loop")
        s_["optimizer_impl"] = "for_loop";
      else
        o->error_at("implementation", fmt::format("\"{}\": expected for-loop, foreach or fused", impl));
    }
    if (!o->has("name")) return;
    const auto name = o->string("name");
    if (name == "AdamW")
      out_.training.optimizer = "adamw";
    else if (name == "Adam")
      out_.training.optimizer = "adam";
    else
      o->error_at("name", fmt::format("\"{}\": expected AdamW or Adam", name));
  }

  // [training]: the local batch, the sequence, mixed precision.
  void training(std::int64_t pp) {
    if (training_) {
      const auto local = training_->has("local_batch_size") ? training_->integer("local_batch_size", {1, 1 << 30})
                                                            : training_->integer_or("batch_size", 8, {1, 1 << 30});
      out_.local_batch = local;
      if (pp == 1) s_["mb"] = local;  // no pipeline: each rank's batch is one micro-batch
      out_.seq_len_key = "/training/seq_len";
      out_.batch_key = training_->has("local_batch_size") ? "/training/local_batch_size"
                       : training_->has("batch_size")     ? "/training/batch_size"
                                                          : "";
      // global_batch_size -1 (job_config.py's default): the local batch × the data-parallel degree
      if (const auto global = training_->optional_integer("global_batch_size", {-1, 1 << 30}); global && *global > 0) {
        out_.training.global_batch = *global;
        out_.batch_key = "/training/global_batch_size";
      }
      if (const auto seq = training_->optional_integer("seq_len", {1, 1 << 24})) out_.training.seq_len = *seq;
      if (training_->has("mixed_precision_param")) {
        const auto param = training_->string("mixed_precision_param");
        if (param == "bfloat16")
          out_.training.dtype = "bf16";
        else if (param == "float32")
          out_.training.dtype = "fp32";
        else
          training_->error_at("mixed_precision_param", fmt::format("\"{}\": expected bfloat16 or float32", param));
      }
      if (training_->has("mixed_precision_reduce")) {
        const auto reduce = training_->string("mixed_precision_reduce");
        if (reduce == "float32")
          s_["grad_reduce_dtype"] = "fp32";
        else if (reduce == "bfloat16")
          s_["grad_reduce_dtype"] = "bf16";
        else
          training_->error_at("mixed_precision_reduce", fmt::format("\"{}\": expected float32 or bfloat16", reduce));
      }
      if (training_->has("compile")) s_["compile"] = training_->boolean("compile") ? "on" : "off";
    } else {
      out_.local_batch = 8;  // job_config.py's default
      out_.batch_key = "";
      if (pp == 1) s_["mb"] = 8;
    }
  }

  // [compile] (job_config.py's Compile: enable false, components ["model", "loss"]): the blocks
  // are compiled only when enabled with "model" among the components. A compiled loss alone leaves
  // the blocks eager; the loss's own kernels are priced eager either way (named below).
  void compile() {
    auto compile = root_.optional_object("compile");
    if (!compile) return;
    const bool enable = compile->boolean_or("enable", false);
    const auto components = string_list(*compile, "components").value_or(std::vector<std::string>{"model", "loss"});
    for (const auto& c : components)
      if (c != "model" && c != "loss")
        compile->error_at("components", fmt::format("\"{}\": expected model or loss", c));
    s_["compile"] = enable && contains(components, "model") ? "on" : "off";
    if (enable && contains(components, "loss")) unmodelled_.push_back("/compile/components \"loss\" (priced eager)");
  }

  // [activation_checkpoint] (job_config.py's defaults: selective, every 2nd block).
  void activation_checkpoint() {
    auto ac = root_.optional_object("activation_checkpoint");
    const auto mode = ac ? ac->string_or("mode", "selective") : std::string("selective");
    if (mode == "none" || mode == "full") {
      s_["recompute"] = mode;
    } else if (mode == "selective") {
      const auto option = ac ? ac->string_or("selective_ac_option", "2") : std::string("2");
      std::int64_t every = 0;
      const auto [end, ec] = std::from_chars(option.data(), option.data() + option.size(), every);
      if (option == "op") {
        s_["recompute"] = "op";
      } else if (ec == std::errc() && end == option.data() + option.size() && every >= 1) {
        // every n-th block of a chunk wholly recomputed (TorchTitan's layer policy)
        s_["recompute"] = "full";
        if (every > 1) s_["recompute_period"] = every;
      } else {
        ac->error_at("selective_ac_option", fmt::format("\"{}\": expected \"op\" or a positive integer", option));
      }
    } else if (ac) {
      ac->error_at("mode", fmt::format("\"{}\": expected none, selective or full", mode));
    }
  }

  // Float8: [model] converters containing "float8" (a list, or a comma-separated string) or
  // [float8] enable_float8_linear (2024); [float8] recipe_name picks the scaling. The [float8] keys
  // that tune the cast (FP8 all-gathers, scale precomputation, modules left out) are not modelled
  // and are named.
  void float8_and_model() {
    auto model = root_.optional_object("model");
    bool float8 = false;
    if (model)
      if (const auto converters = string_list(*model, "converters")) {
        float8 = contains(*converters, "float8");
        for (const auto& c : *converters)
          if (c != "float8") unmodelled_.push_back(fmt::format("/model/converters \"{}\"", c));
      }
    if (auto f8 = root_.optional_object("float8")) {
      if (f8->has("enable_float8_linear")) float8 = f8->boolean("enable_float8_linear") || float8;
      const auto recipe = f8->string_or("recipe_name", "tensorwise");
      if (float8) {
        if (recipe == "tensorwise")
          s_["fp8"] = "tensorwise";
        else if (recipe.starts_with("rowwise"))
          s_["fp8"] = "rowwise";
        else
          f8->error_at("recipe_name",
                       fmt::format("\"{}\": expected tensorwise, rowwise or rowwise_with_gw_hp", recipe));
      }
      // the cast's settings apply only with the converter (TorchTitan's Float8Converter reads them)
      for (const auto& key : f8->unread())
        if (float8) unmodelled_.push_back(fmt::format("{}/{}", f8->pointer(), key));
    } else if (float8) {
      s_["fp8"] = "tensorwise";
    }
    // [model]: a Llama flavour gives the model when no workload file does
    if (model) {
      const auto name = model->string_or("name", "");
      const auto flavour = model->string_or("flavor", "");
      const auto* f = std::find_if(std::begin(kFlavours), std::end(kFlavours),
                                   [&](const Flavour& x) { return x.name == name && x.flavour == flavour; });
      if (f != std::end(kFlavours)) {
        ModelSpec m;
        m.layers = f->layers;
        m.hidden = f->hidden;
        m.heads = f->heads;
        m.kv_heads = f->kv_heads;
        m.head_dim = f->hidden / f->heads;
        m.ffn_hidden = f->ffn;
        m.vocab = f->vocab;
        m.mlp = MlpKind::Swiglu;
        m.bias = false;
        m.norm = NormKind::RmsNorm;
        m.position = PositionKind::Rope;
        m.tied_embeddings = false;
        m.dropout = false;
        out_.model = m;
        out_.model_name = fmt::format("{}-{} (TorchTitan flavour)", name, flavour);
      }
      for (const auto& key : model->unread()) model->has(key);  // tokenizer paths, norm type: no cost
    }
  }

  // What else the file says that may change the cost.
  void unknown_keys() {
    std::vector<std::string> unknown;
    for (auto* t : {&parallelism_, &training_, &experimental_}) {
      if (!*t) continue;
      for (const auto& key : (*t)->unread()) {
        if (t == &training_ && kCostFreeTrainingKeys.contains(key)) continue;
        if (t == &experimental_ && key.find("parallel") == std::string::npos) continue;
        unknown.push_back(fmt::format("{}/{}", (*t)->pointer(), key));
      }
    }
    for (const auto& key : root_.unread())
      if (!kCostFreeTables.contains(key)) unknown.push_back("/" + key);
    unknown.insert(unknown.end(), unmodelled_.begin(), unmodelled_.end());
    if (!unknown.empty())
      out_.warnings.push_back(fmt::format("{}: not read or not modelled, assumed not to change the cost: {}", source_,
                                          fmt::join(unknown, ", ")));
  }

  Diagnostics diagnostics_;
  Reader root_;
  const std::string& source_;
  LaunchConfig& out_;
  nlohmann::json& s_;
  std::optional<Reader> parallelism_;
  std::optional<Reader> training_;
  std::optional<Reader> experimental_;
  std::vector<std::string> unmodelled_;  // keys read but not modelled, named in the warning
};

// Nesting and dotted keys bounded before toml11 sees the text: its parser recurses once per level
// of nested arrays and inline tables (100,000 levels overflowed the stack) and handles a key of n
// dotted parts in time quadratic in n (100,000 parts never finished). One linear pass outside
// strings and comments: brackets and braces open at once, and dotted parts in a row. And the
// document is UTF-8, as TOML 1.0 requires, before toml11 reads it: toml11 3.7 (Debian 12) reads
// past its buffer when it reports a literal string that is not (its issue #199, fixed in 3.8).
constexpr int kMaxTomlDepth = 64;
constexpr int kMaxTomlDottedParts = 64;

void check_toml_utf8(std::string_view text, const std::string& source) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return;
  const auto before = text.substr(0, *bad);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const auto line_start = before.rfind('\n');
  const auto column = *bad - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  throw SpecError(source, "",
                  fmt::format("invalid TOML at line {}, byte {} of the line: 0x{:02x} does not begin a UTF-8 "
                              "character (a TOML document is UTF-8)",
                              line, column, static_cast<unsigned char>(text[*bad])));
}

void check_toml_structure(std::string_view text, const std::string& source) {
  check_toml_utf8(text, source);
  int depth = 0;
  int dots = 0;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      dots = 0;
    } else if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      // a string, basic or literal, single- or multi-line: skip to its end (an unclosed string is
      // toml11's to report)
      const bool multi = text.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''");
      const std::string_view close = multi ? text.substr(i, 3) : text.substr(i, 1);
      std::size_t j = i + close.size();
      while (j < text.size() && text.substr(j, close.size()) != close) {
        if (c == '"' && text[j] == '\\') ++j;  // an escape in a basic string
        if (j < text.size() && text[j] == '\n') ++line;
        ++j;
      }
      i = std::min(text.size(), j + close.size()) - 1;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxTomlDepth)
        throw SpecError(source, "",
                        fmt::format("invalid TOML at line {}: arrays and inline tables nested deeper than {} levels",
                                    line, kMaxTomlDepth));
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    } else if (c == '.') {
      if (++dots > kMaxTomlDottedParts)
        throw SpecError(
            source, "",
            fmt::format("invalid TOML at line {}: a key of more than {} dotted parts", line, kMaxTomlDottedParts));
    } else if (c == '=' || c == ',') {
      dots = 0;
    }
  }
}

}  // namespace

LaunchConfig read_torchtitan_toml(std::string_view text, const std::string& source) {
  check_toml_structure(text, source);
  toml::value parsed;
  try {
    std::istringstream in{std::string(text)};
    parsed = toml::parse(in, source);
  } catch (const toml::exception& e) {
    throw SpecError(source, "", fmt::format("invalid TOML {}", toml_error(e.what())));
  }
  const auto json = to_json(parsed);
  LaunchConfig out;
  out.source = source;
  TitanReader(json, source, out).read();
  return out;
}

LaunchConfig load_torchtitan_toml(const std::string& path) {
  return read_torchtitan_toml(read_text_file(path), path);
}

}  // namespace trainsim::spec
