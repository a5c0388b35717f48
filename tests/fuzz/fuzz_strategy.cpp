// Strategies: any bytes as an inline strategy string (`tp=8,pp=2,...`) and, from the same
// bytes, as a strategy JSON file; a valid strategy of a small model on a small cluster is
// simulated for one step.
#include "fuzz/fuzz.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/spec/workload_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  static const auto cluster = spec::load_cluster_spec(TRAINSIM_SOURCE_DIR "/topologies/dgx-a100-superpod.json");
  static const auto workload = spec::load_workload_spec(TRAINSIM_SOURCE_DIR "/workloads/megatron2020-1b.json");
  const auto input = fuzz::text(data, size);
  fuzz::expect_clean([&] {
    const auto strategy = spec::read_strategy_spec(spec::parse_inline_strategy(input, "s"), "s");
    const auto job = spec::resolve_job(cluster, workload, strategy, {"t", "w", "s"});
    driver::RunOptions options;
    // a simulation per input stays cheap: at most 64 GPUs and 64 micro-batches
    options.simulate = job.gpus <= 64 && job.micro_batches <= 64;
    (void)driver::build_run_report(job, options);
  });
  fuzz::expect_clean([&] { (void)spec::read_strategy_spec(spec::parse_json_text(input, "s.json"), "s.json"); });
  return 0;
}
