#pragma once
// CI regression on cost predictions: every case under results/ is recomputed and its report fields
// compared with two kinds of expectation, kept apart:
//  - measured: a published number (or a closed form) with a tolerance that states trainsim's
//    accuracy on it (relative, or also absolute for small quantities such as bubbles);
//  - predicted: the last accepted output, with a tight tolerance that catches accidental drift
//    (`--update` rewrites these after an intended model change, never the measured ones).
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::report {

struct Check {
  std::string case_name;
  std::string field;  // a JSON pointer into the case's report, or pointers joined by " + "
  std::string kind;   // "measured" or "predicted"
  double actual = 0;
  double expected = 0;
  double error = 0;               // relative: actual / expected − 1
  double tolerance = 0;           // relative
  double absolute_tolerance = 0;  // measured checks only: also passes when |actual − expected| ≤ this
  bool passed = false;
  bool known_gap = false;  // a measured value trainsim does not reproduce, reported but not failing
  std::string source;
};

struct CaseResult {
  std::string name;
  std::string path;
  // run cases: what their errors are grouped by in docs/validation.md (the regime of the run)
  std::string device;
  int tp = 0;
  std::string framework;
  double params = 0;             // parameters of the model
  std::int64_t micro_batch = 0;  // sequences per micro-batch
  std::int64_t seq_len = 0;
  std::vector<Check> checks;
  double seconds = 0;  // wall time to recompute
};

struct RegressOptions {
  bool update = false;
  unsigned threads = 0;  // 0: all cores
};

// Recomputes every *.json case under `directory` (sorted by path), in parallel across cases.
// Paths inside a case are relative to the directory that holds `directory` (the repository root).
std::vector<CaseResult> run_regression(const std::string& directory, const RegressOptions& options);

std::string regress_table(const std::vector<CaseResult>& results);
// docs/validation.md's generated section: per source, mean absolute and worst error; the step times'
// mean signed error per regime (device, tensor-parallel degree, framework, model size, micro-batch,
// sequence length), groups of 5 or more whose bias passes ±5% marked; then every case.
std::string regress_markdown(const std::vector<CaseResult>& results);
bool all_passed(const std::vector<CaseResult>& results);

}  // namespace trainsim::report
