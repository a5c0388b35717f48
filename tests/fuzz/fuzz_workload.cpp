// Workload specs: any bytes, read as a workload file; a valid one goes through the model
// arithmetic and memory of a fixed strategy on a fixed cluster.
#include "fuzz/fuzz.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/strategy_spec.hpp"
#include "trainsim/spec/workload_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  static const auto cluster = spec::load_cluster_spec(TRAINSIM_SOURCE_DIR "/topologies/dgx-a100-superpod.json");
  fuzz::expect_clean([&] {
    auto workload = spec::read_workload_spec(spec::parse_json_text(fuzz::text(data, size), "fuzz.json"), "fuzz.json");
    const auto strategy = spec::read_strategy_spec(spec::parse_inline_strategy("tp=1,gpus=8", "s"), "s");
    const auto job = spec::resolve_job(cluster, std::move(workload), strategy, {"t", "fuzz.json", "s"});
    driver::RunOptions options;
    options.simulate = false;
    (void)driver::build_run_report(job, options);
  });
  return 0;
}
