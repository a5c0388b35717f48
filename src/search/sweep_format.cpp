// Rendering sweep results (JSON, CSV, a readable table) and reading a shard's JSON back for
// `sweep merge`.
#include <fmt/format.h>

#include "trainsim/report/format.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::search {
namespace {

using nlohmann::ordered_json;

constexpr std::int64_t kMaxCount = std::int64_t{1} << 50;

std::string_view objective_label(Objective o) {
  switch (o) {
    case Objective::StepTime:
      return "step time";
    case Objective::TokensPerS:
      return "tokens per second";
    case Objective::Cost:
      return "GPU-hours per million tokens";
  }
  return "";
}

std::string gpus_text(const std::vector<std::int64_t>& gpus) {
  return fmt::format("{}", fmt::join(gpus, ", "));
}

// The shard a result covers (all of it when unsharded) and the sweep's counts.
void read_shard_and_counts(spec::Reader& r, SweepResult& out) {
  if (auto shard = r.optional_object("shard")) {
    out.shards = static_cast<int>(shard->integer("count", {1, 1 << 20}));
    out.shard_indices = {static_cast<int>(shard->integer("index", {0, (1 << 20) - 1}))};
    if (out.shard_indices.front() >= out.shards) shard->error_at("index", "must be below the shard count");
    if (shard->has("fingerprint")) out.fingerprint = shard->string("fingerprint");
    shard->finish();
  } else {
    out.shard_indices = {0};
  }
  auto counts = r.object("counts");
  out.enumerated = counts.integer("enumerated", {0, kMaxCount});
  out.invalid = counts.integer("invalid", {0, kMaxCount});
  out.out_of_memory = counts.integer("out_of_memory", {0, kMaxCount});
  out.candidates = counts.integer("candidates", {0, kMaxCount});
  counts.finish();
}

// Each object of the list at `key`, read by `read`; a list missing, or an item of another shape,
// is an error at its JSON pointer.
template <class Read>
void read_objects(spec::Reader& r, spec::Diagnostics& d, const char* key, Read&& read) {
  const auto* value = r.value(key);
  if (value == nullptr || !value->is_array()) {
    r.error_at(key, "expected a list");
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    const auto pointer = spec::pointer_join(spec::pointer_join("", key), std::to_string(i));
    if (!(*value)[i].is_object()) {
      d.add(pointer, fmt::format("expected an object, got {}", spec::describe((*value)[i])));
      continue;
    }
    spec::Reader item((*value)[i], pointer, d);
    read(item);
    item.finish();
  }
}

}  // namespace

ordered_json to_json(const SweepResult& r) {
  ordered_json out{{"topology", r.topology},
                   {"workload", r.workload},
                   {"rank_by", objective_name(r.objective)},
                   {"top_k", r.top_k},
                   {"gpus", r.gpus}};
  if (r.shards > 1) {
    out["shard"] = {{"index", r.shard_indices.front()}, {"count", r.shards}};
    if (!r.fingerprint.empty()) out["shard"]["fingerprint"] = r.fingerprint;
  }
  out["counts"] = {{"enumerated", r.enumerated},
                   {"invalid", r.invalid},
                   {"out_of_memory", r.out_of_memory},
                   {"candidates", r.candidates}};
  ordered_json top = ordered_json::array();
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    const auto& p = r.top[i];
    top.push_back({{"rank", i + 1},
                   {"index", p.index},
                   {"strategy", p.strategy},
                   {"gpus", p.gpus},
                   {"step_time_s", p.step_time_s},
                   {"tokens_per_s", p.tokens_per_s},
                   {"tflops_per_gpu", p.tflops_per_gpu},
                   {"mfu", p.mfu},
                   {"bubble_fraction", p.bubble_fraction},
                   {"exposed_comm_s", p.exposed_comm_s},
                   {"gpu_hours_per_mtoken", p.gpu_hours_per_mtoken},
                   {"peak_memory_bytes", p.peak_memory},
                   {"memory_at_risk", p.memory_at_risk}});
  }
  out["top"] = std::move(top);
  ordered_json simulated = ordered_json::array();
  for (const auto& p : r.simulated)
    simulated.push_back({{"index", p.index},
                         {"strategy", p.strategy},
                         {"gpus", p.gpus},
                         {"step_time_s", p.step_time_s},
                         {"peak_memory_bytes", p.peak_memory},
                         {"bound", p.bound}});
  out["simulated"] = std::move(simulated);
  if (r.exhaustive) out["exhaustive"] = true;
  ordered_json pruned = ordered_json::array();
  for (const auto& f : r.pruned)
    pruned.push_back(
        {{"reason", f.reason}, {"count", f.count}, {"example_index", f.example_index}, {"example", f.example}});
  out["pruned"] = std::move(pruned);
  return out;
}

SweepResult sweep_from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object())
    throw SpecError(source, "", fmt::format("expected a sweep result object, got {}", spec::describe(json)));
  spec::Diagnostics d;
  spec::Reader r(json, "", d);
  SweepResult out;
  out.topology = r.string("topology");
  out.workload = r.string("workload");
  const auto rank_by = r.string("rank_by");
  try {
    if (!rank_by.empty()) out.objective = objective_from_name(rank_by);
  } catch (const SpecError&) {
    r.error_at("rank_by", fmt::format("\"{}\" is not valid; expected one of: step_time, tokens_per_s, cost", rank_by));
  }
  out.top_k = static_cast<std::size_t>(r.integer("top_k", {1, 1 << 20}));
  out.gpus = r.integer_list("gpus", {1, std::int64_t{1} << 22}, 1, 1024);
  read_shard_and_counts(r, out);
  constexpr spec::NumberRange kNonNegative{0, 1e30};
  read_objects(r, d, "top", [&](spec::Reader& p) {
    p.integer("rank", {1, 1 << 20});
    out.top.push_back(Plan{.index = static_cast<std::size_t>(p.integer("index", {0, kMaxCount})),
                           .strategy = p.string("strategy"),
                           .gpus = p.integer("gpus", {1, std::int64_t{1} << 22}),
                           .step_time_s = p.number("step_time_s", {0, 1e30, true}),
                           .tokens_per_s = p.number("tokens_per_s", kNonNegative),
                           .tflops_per_gpu = p.number("tflops_per_gpu", kNonNegative),
                           .mfu = p.number("mfu", kNonNegative),
                           .bubble_fraction = p.number("bubble_fraction", {0, 1}),
                           .exposed_comm_s = p.number("exposed_comm_s", kNonNegative),
                           .gpu_hours_per_mtoken = p.number("gpu_hours_per_mtoken", kNonNegative),
                           .peak_memory = p.integer("peak_memory_bytes", {0, std::int64_t{1} << 62}),
                           .memory_at_risk = p.boolean_or("memory_at_risk", false)});
  });
  if (r.has("simulated"))
    read_objects(r, d, "simulated", [&](spec::Reader& p) {
      out.simulated.push_back(Plan{.index = static_cast<std::size_t>(p.integer("index", {0, kMaxCount})),
                                   .strategy = p.string("strategy"),
                                   .gpus = p.integer("gpus", {1, std::int64_t{1} << 22}),
                                   .step_time_s = p.number("step_time_s", {0, 1e30, true}),
                                   .peak_memory = p.integer("peak_memory_bytes", {0, std::int64_t{1} << 62}),
                                   .bound = p.has("bound") ? p.number("bound", {0, 1e30}) : 0.0});
    });
  out.exhaustive = r.boolean_or("exhaustive", false);
  read_objects(r, d, "pruned", [&](spec::Reader& f) {
    out.pruned.push_back(
        PrunedFamily{.reason = f.string("reason"),
                     .count = f.integer("count", {1, kMaxCount}),
                     .example_index = static_cast<std::size_t>(f.integer("example_index", {0, kMaxCount})),
                     .example = f.string("example")});
  });
  r.finish();
  d.throw_if_any(source);
  // the objective is not stored: recompute it as the sweep did
  for (auto& p : out.top) p.objective = out.objective == Objective::Cost ? p.gpu_hours_per_mtoken : p.step_time_s;
  return out;
}

std::string to_table(const SweepResult& r) {
  std::string out = fmt::format("sweep: {} on {}, {} GPUs, ranked by {}", r.workload, r.topology, gpus_text(r.gpus),
                                objective_label(r.objective));
  if (r.shards > 1) out += fmt::format(" (shard {} of {})", r.shard_indices.front(), r.shards);
  out += fmt::format("\n{} configurations: {} invalid, {} do not fit (analytic memory), {} candidates\n\n",
                     r.enumerated, r.invalid, r.out_of_memory, r.candidates);
  if (r.top.empty()) {
    out += "no configuration fits the devices: every candidate was pruned, for the reasons below\n";
  } else {
    std::size_t width = 8;
    for (const auto& p : r.top) width = std::max(width, p.strategy.size());
    out += fmt::format("{:>4}  {:<{}}  {:>6}  {:>9}  {:>10}  {:>7}  {:>5}  {:>6}  {:>8}  {:>10}  {:>10}\n", "rank",
                       "strategy", width, "gpus", "step (s)", "tokens/s", "TFLOP/s", "MFU", "bubble", "exp.comm",
                       "peak mem", "GPU-h/Mtok");
    for (std::size_t i = 0; i < r.top.size(); ++i) {
      const auto& p = r.top[i];
      out += fmt::format(
          "{:>4}  {:<{}}  {:>6}  {:>9.3f}  {:>10.0f}  {:>7.1f}  {:>5.3f}  {:>6.3f}  {:>8.3f}  {:>10}  {:>10.3f}\n",
          i + 1, p.strategy, width, p.gpus, p.step_time_s, p.tokens_per_s, p.tflops_per_gpu, p.mfu, p.bubble_fraction,
          p.exposed_comm_s, report::human_bytes(Bytes{p.peak_memory}) + (p.memory_at_risk ? "!" : ""),
          p.gpu_hours_per_mtoken);
    }
    if (std::any_of(r.top.begin(), r.top.end(), [](const Plan& p) { return p.memory_at_risk; }))
      out +=
          "  ! at risk, not pruned: the peak enters the memory headroom (--memory-headroom) or needs the "
          "caching allocator's reserve given back\n";
  }
  if (!r.pruned.empty()) {
    out += "\npruned, most common reasons first:\n";
    constexpr std::size_t kShown = 12;
    for (std::size_t i = 0; i < std::min(kShown, r.pruned.size()); ++i) {
      const auto& f = r.pruned[i];
      out += fmt::format("{:>8}  {}\n          e.g. {}\n", f.count, f.reason, f.example);
    }
    if (r.pruned.size() > kShown) {
      std::int64_t rest = 0;
      for (std::size_t i = kShown; i < r.pruned.size(); ++i) rest += r.pruned[i].count;
      out += fmt::format("{:>8}  in {} more families (--format json lists them all)\n", rest, r.pruned.size() - kShown);
    }
  }
  return out;
}

std::string to_csv(const SweepResult& r) {
  std::string out =
      "rank,strategy,gpus,step_time_s,tokens_per_s,tflops_per_gpu,mfu,bubble_fraction,exposed_comm_s,"
      "peak_memory_bytes,gpu_hours_per_mtoken\n";
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    const auto& p = r.top[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", i + 1, report::csv_field(p.strategy), p.gpus,
                       p.step_time_s, p.tokens_per_s, p.tflops_per_gpu, p.mfu, p.bubble_fraction, p.exposed_comm_s,
                       p.peak_memory, p.gpu_hours_per_mtoken);
  }
  return out;
}

std::string render(const SweepResult& r, report::Format format) {
  switch (format) {
    case report::Format::Json:
      return report::json_text(to_json(r)) + "\n";
    case report::Format::Csv:
      return to_csv(r);
    case report::Format::Table:
      return to_table(r);
  }
  SIM_ASSERT(false, "unhandled format");
}

}  // namespace trainsim::search
