#include "trainsim/report/regress.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/driver/collective.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/driver/tunables.hpp"
#include "trainsim/report/collective_report.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/spec/quantity.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/parallel.hpp"

namespace trainsim::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr double kDefaultPredictedTolerance = 1e-6;

// An input given inline or as a path relative to the repository root. `inline_name` is
// "CASE /pointer"; a file that cannot be read is reported against the case that names it.
json input_json(const json& value, const fs::path& root, std::string& source, const std::string& inline_name) {
  if (value.is_string()) {
    const auto path = (root / value.get<std::string>()).lexically_normal().string();
    source = path;
    try {
      return spec::load_json_file(path);
    } catch (const IoError& e) {
      const auto space = inline_name.rfind(' ');
      throw SpecError(inline_name.substr(0, space), inline_name.substr(space + 1), e.what());
    }
  }
  source = inline_name;
  return value;
}

// The report of a "run" case, as `trainsim run --format json` prints it; `result` gets the run's regime.
ordered_json run_case(const json& run, const fs::path& root, const std::string& case_source, CaseResult& result) {
  spec::Sources sources;
  const auto cluster = spec::read_cluster_spec(
      input_json(run.at("topology"), root, sources.topology, case_source + " /run/topology"), sources.topology);
  const auto workload = spec::read_workload_spec(
      input_json(run.at("workload"), root, sources.workload, case_source + " /run/workload"), sources.workload);
  const auto& s = run.at("strategy");
  spec::StrategySpec strategy;
  if (s.is_string() && s.get<std::string>().find('=') != std::string::npos) {
    sources.strategy = fmt::format("{} /run/strategy", case_source);
    strategy =
        spec::read_strategy_spec(spec::parse_inline_strategy(s.get<std::string>(), sources.strategy), sources.strategy);
  } else {
    strategy = spec::read_strategy_spec(input_json(s, root, sources.strategy, case_source + " /run/strategy"),
                                        sources.strategy);
  }
  auto job = spec::resolve_job(cluster, workload, strategy, sources);
  result.device = job.cluster.device.name;
  result.tp = job.strategy.tp;
  result.framework = std::string(spec::framework_name(job.strategy.framework));
  result.micro_batch = job.strategy.mb;
  result.seq_len = job.workload.training.seq_len;
  driver::RunOptions options;
  options.simulate = !run.value("analytic", false);
  if (run.contains("calibration")) {
    std::string cal_source;
    options.calibration = (spec::read_calibration_spec(
        input_json(run.at("calibration"), root, cal_source, case_source + " /run/calibration"), cal_source));
  }
  driver::prepare_job(job, options);
  return to_json(driver::build_run_report(job, options));
}

// The report of a "collective" case, as `trainsim collective --format json` prints it.
ordered_json collective_case(const json& c, const fs::path& root, const std::string& case_source) {
  std::string topo_source;
  const auto cluster = spec::read_cluster_spec(
      input_json(c.at("topology"), root, topo_source, case_source + " /collective/topology"), topo_source);
  const auto op = c.at("op").get<std::string>();
  const auto& names = cost::collective_names();
  if (std::find(names.begin(), names.end(), op) == names.end())
    throw SpecError(case_source, "/collective/op", fmt::format("unknown operation \"{}\"", op));
  driver::CollectiveQuery query{
      .op = op,
      .sizes = {spec::parse_bytes_option(c.at("bytes").get<std::string>(), case_source + " /collective/bytes")},
      .group = c.value("group", std::string("all")),
      .algorithm = c.value("algo", std::string("auto")),
      .strategy = c.value("strategy", std::string()),
      .group_source = case_source + " /collective/group",
      .algorithm_source = case_source + " /collective/algo"};
  std::optional<spec::CalibrationSpec> calibration;
  if (c.contains("calibration")) {
    std::string cal_source;
    calibration = spec::read_calibration_spec(
        input_json(c.at("calibration"), root, cal_source, case_source + " /collective/calibration"), cal_source);
  }
  // the device's fitted collective parameters, then the case's calibration, as `collective` does
  const auto tunables = driver::resolve_tunables(cluster, calibration ? &*calibration : nullptr).values;
  return to_json(driver::run_collective(cluster, query, tunables));
}

// The JSON pointers an expectation's field adds up ("/a" or "/a + /b"), each with its text.
std::vector<std::pair<std::string, ordered_json::json_pointer>> field_pointers(const std::string& field,
                                                                               const std::string& source) {
  std::vector<std::pair<std::string, ordered_json::json_pointer>> out;
  std::size_t start = 0;
  while (start <= field.size()) {
    const auto end = std::min(field.find('+', start), field.size());
    std::string pointer = field.substr(start, end - start);
    pointer.erase(0, pointer.find_first_not_of(' '));
    pointer.erase(pointer.find_last_not_of(' ') + 1);
    try {
      if (pointer.empty()) throw std::invalid_argument("empty");
      auto p = ordered_json::json_pointer(pointer);
      out.emplace_back(pointer, std::move(p));
    } catch (const std::exception&) {
      throw SpecError(source, spec::pointer_join("/expect", field),
                      fmt::format("\"{}\" is not a JSON pointer (expected \"/field\" or \"/a + /b\")", pointer));
    }
    start = end + 1;
  }
  return out;
}

double field_value(const ordered_json& report, const std::string& field, const std::string& source) {
  double sum = 0;
  for (const auto& [text, p] : field_pointers(field, source)) {
    if (!report.contains(p) || !report.at(p).is_number())
      throw SpecError(source, spec::pointer_join("/expect", field),
                      fmt::format("the report has no number at {}", text));
    sum += report.at(p).get<double>();
  }
  return sum;
}

CaseResult run_one(const fs::path& path, const fs::path& root, bool update) {
  const auto start = std::chrono::steady_clock::now();
  const std::string source = path.string();
  const auto spec = spec::load_json_file(source);
  // validate the case's own shape with the path-tracking reader
  spec::Diagnostics d;
  spec::Reader r(spec, "", d);
  r.string_or("name", "");
  r.string_or("group", "");
  r.string_or("source", "");
  const bool is_run = r.has("run");
  const bool is_collective = r.has("collective");
  if (is_run == is_collective) r.error("expected exactly one of \"run\" and \"collective\"");
  auto expect = r.object("expect");
  for (const auto& key : expect.keys()) {
    auto e = expect.object(key);
    if (e.has("measured")) {
      e.number("measured", {0, 1e30, true});
      e.number("tolerance", {0, 100});
      e.number_or("absolute_tolerance", 0, {0, 1e30});
    }
    e.number_or("predicted", 0, {-1e30, 1e30});
    e.number_or("predicted_tolerance", kDefaultPredictedTolerance, {0, 100});
    e.boolean_or("known_gap", false);
    e.string_or("source", "");
    e.string_or("note", "");
    e.finish();
  }
  r.value("run");
  r.value("collective");
  r.finish();
  d.throw_if_any(source);
  // the fields' pointers before the (possibly long) run
  for (const auto& [field, e] : spec.at("expect").items()) field_pointers(field, source);

  CaseResult result{.name = spec.value("name", path.stem().string()), .path = source};
  const auto report =
      is_run ? run_case(spec.at("run"), root, source, result) : collective_case(spec.at("collective"), root, source);
  if (is_run) result.params = report.value("params_total", 0.0);
  auto rewritten = ordered_json::parse(std::ifstream(path));
  for (const auto& [field, e] : spec.at("expect").items()) {
    const double actual = field_value(report, field, source);
    const std::string where = e.value("source", spec.value("source", std::string()));
    if (e.contains("measured")) {
      const double measured = e.at("measured").get<double>();
      const double error = actual / measured - 1;
      const double tol = e.at("tolerance").get<double>();
      // an absolute tolerance, when given, also passes a small quantity (a bubble of a few percent)
      const double abs_tol = e.value("absolute_tolerance", 0.0);
      const bool within = std::abs(error) <= tol || std::abs(actual - measured) <= abs_tol;
      result.checks.push_back({result.name, field, "measured", actual, measured, error, tol, abs_tol, within,
                               e.value("known_gap", false), where});
    }
    if (update) rewritten["expect"][field]["predicted"] = actual;
    if (!e.contains("predicted") && !update) {
      result.checks.push_back({result.name, field, "predicted", actual, 0, 0, 0, 0, false, false,
                               "no accepted prediction yet: run `trainsim regress --update`"});
      continue;
    }
    const double predicted = update ? actual : e.at("predicted").get<double>();
    const double error = predicted == 0 ? actual : actual / predicted - 1;
    const double tol = e.value("predicted_tolerance", kDefaultPredictedTolerance);
    result.checks.push_back({result.name, field, "predicted", actual, predicted, error, tol, 0, std::abs(error) <= tol,
                             false, "last accepted output"});
  }
  if (update) {
    std::ofstream out(path);
    out << json_text(rewritten) << "\n";
    if (!out) throw IoError(fmt::format("{}: cannot write", source));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

std::vector<CaseResult> run_regression(const std::string& directory, const RegressOptions& options) {
  const fs::path dir(directory);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError(fmt::format("{}: not a directory", directory));
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  // `results/` and `results` both name the directory; the directory holding it holds the inputs
  // (kept relative when given relative, so that messages name the paths the user wrote)
  fs::path normal = dir.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  if (normal.filename() == "." || normal.filename() == "..") normal = fs::absolute(normal).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  fs::path base = normal.parent_path();
  if (base.empty()) base = ".";

  std::vector<CaseResult> results(files.size());
  parallel_for(files.size(), options.threads,
               [&](std::size_t i) { results[i] = run_one(files[i], base, options.update); });
  return results;
}

bool all_passed(const std::vector<CaseResult>& results) {
  for (const auto& r : results)
    for (const auto& c : r.checks)
      if (!c.passed && !c.known_gap) return false;
  return true;
}

std::string regress_table(const std::vector<CaseResult>& results) {
  std::string out = fmt::format("{:<40} {:<34} {:<9} {:>14} {:>14} {:>8} {:>8}  {}\n", "case", "field", "kind",
                                "predicted", "expected", "error", "tol", "result");
  int passed = 0, failed = 0, gaps = 0;
  for (const auto& r : results) {
    for (const auto& c : r.checks) {
      const char* verdict = c.passed ? "pass" : c.known_gap ? "known gap" : "FAIL";
      out +=
          fmt::format("{:<40} {:<34} {:<9} {:>14.6g} {:>14.6g} {:>+7.2f}% {:>7.2g}%  {}\n", c.case_name.substr(0, 40),
                      c.field.substr(0, 34), c.kind, c.actual, c.expected, c.error * 100, c.tolerance * 100, verdict);
      if (!c.passed && !c.known_gap && c.expected == 0 && c.kind == "predicted")
        out += fmt::format("    {}\n", c.source);
      (c.passed ? passed : c.known_gap ? gaps : failed)++;
    }
  }
  out += fmt::format("{} passed, {} failed", passed, failed);
  if (gaps > 0) out += fmt::format(" ({} known gaps reported)", gaps);
  return out + "\n";
}

namespace {

// The bands docs/validation.md groups step-time errors by: (order within the dimension, label).
using Band = std::pair<int, std::string>;

Band size_band(double params) {
  if (params < 1e9) return {0, "model < 1B parameters"};
  if (params < 1e10) return {1, "model 1-10B"};
  if (params < 1e11) return {2, "model 10-100B"};
  return {3, "model >= 100B"};
}

Band micro_batch_band(std::int64_t mb) {
  if (mb <= 1) return {0, "micro-batch 1"};
  if (mb <= 4) return {1, "micro-batch 2-4"};
  if (mb <= 16) return {2, "micro-batch 5-16"};
  return {3, "micro-batch > 16"};
}

Band sequence_band(std::int64_t seq) {
  if (seq <= 2048) return {0, "sequence <= 2K"};
  if (seq <= 8192) return {1, "sequence 4-8K"};
  if (seq <= 32768) return {2, "sequence 16-32K"};
  return {3, "sequence > 32K"};
}

struct Summary {
  double sum = 0;
  double signed_sum = 0;
  double worst = 0;
  std::string worst_case;
  int n = 0;
  int gaps = 0;
  double all_signed_sum = 0;  // known gaps included
  void add(const Check& c) {
    all_signed_sum += c.error;
    if (c.known_gap) {
      ++gaps;
      return;
    }
    sum += std::abs(c.error);
    signed_sum += c.error;
    ++n;
    if (std::abs(c.error) > std::abs(worst)) {
      worst = c.error;
      worst_case = c.case_name;
    }
  }
  double mean_signed() const { return n ? signed_sum / n : 0.0; }
  double mean_signed_all() const { return n + gaps ? all_signed_sum / (n + gaps) : 0.0; }
  double mean_abs() const { return n ? sum / n : 0.0; }
};

// A group of this many step times or more whose mean signed error passes the bound is a bias: a
// behaviour the model lacks (issue 27's acceptance bound).
constexpr int kBiasRows = 5;
constexpr double kBiasBound = 0.05;

}  // namespace

std::string regress_markdown(const std::vector<CaseResult>& results) {
  std::map<std::string, Summary> by_source;
  Summary runs;  // every end-to-end training measurement together
  // the same by regime, keyed by (dimension, band): a mean signed error shows a bias
  std::map<std::pair<int, Band>, Summary> by_regime;
  std::string rows;
  for (const auto& r : results) {
    for (const auto& c : r.checks) {
      if (c.kind != "measured") continue;
      const auto group = c.source.substr(0, c.source.find(':'));
      by_source[group].add(c);
      if (c.field == "/step_time_s" || c.field == "/tflops_per_gpu") {
        // a throughput's error has the opposite sign of the step time's: count step-time errors
        Check as_time = c;
        if (c.field == "/tflops_per_gpu") as_time.error = 1 / (1 + c.error) - 1;
        runs.add(as_time);
        const Band regimes[] = {
            {0, r.device},       {r.tp, fmt::format("TP {}", r.tp)}, {0, "framework " + r.framework},
            size_band(r.params), micro_batch_band(r.micro_batch),    sequence_band(r.seq_len)};
        for (int d = 0; d < static_cast<int>(std::size(regimes)); ++d) by_regime[{d, regimes[d]}].add(as_time);
      }
      const auto tolerance = c.absolute_tolerance > 0
                                 ? fmt::format("{:.0f}% or ±{:g}", c.tolerance * 100, c.absolute_tolerance)
                                 : fmt::format("{:.0f}%", c.tolerance * 100);
      rows += fmt::format("| {} | `{}` | {:.4g} | {:.4g} | {:+.1f}% | {} | {} |\n", c.case_name, c.field, c.expected,
                          c.actual, c.error * 100, tolerance,
                          c.passed      ? "pass"
                          : c.known_gap ? "known gap"
                                        : "FAIL");
    }
  }
  const auto line = [](const std::string& name, const Summary& s) {
    return fmt::format("| {} | {} | {:.1f}% | {:+.1f}% ({}) | {} |\n", name, s.n, s.mean_abs() * 100, s.worst * 100,
                       s.worst_case, s.gaps);
  };
  std::string out =
      "| source | checks | mean absolute error | worst | known gaps |\n| --- | ---: | ---: | --- | ---: |\n";
  for (const auto& [group, s] : by_source) out += line(group, s);
  out += line("**all training step times and throughputs**", runs);
  out += fmt::format(
      "\nTraining step times (throughputs as the step times they imply) by regime: device, tensor-parallel "
      "degree, framework, model size, micro-batch and sequence length. The mean signed error shows a bias "
      "(negative: predicted too fast); **bias** marks a group of {} or more whose mean passes ±{:.0f}%. The "
      "last column counts the known gaps and gives the group's mean signed error with them.\n\n"
      "| regime | checks | mean signed error | mean absolute error | known gaps (signed error with them) |\n"
      "| --- | ---: | ---: | ---: | ---: |\n",
      kBiasRows, kBiasBound * 100);
  for (const auto& [key, s] : by_regime) {
    const bool biased = s.n >= kBiasRows && std::abs(s.mean_signed()) > kBiasBound;
    out += fmt::format("| {} | {} | {:+.1f}%{} | {:.1f}% | {} ({:+.1f}%) |\n", key.second.second, s.n,
                       s.mean_signed() * 100, biased ? " **bias**" : "", s.mean_abs() * 100, s.gaps,
                       s.mean_signed_all() * 100);
  }
  out +=
      "\n| case | field | measured | predicted | error | tolerance | result |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | --- |\n";
  return out + rows;
}

}  // namespace trainsim::report
