// The readers of third-party and run-time files (issue 29): the first byte picks one, the rest is
// its input. 0: a Hugging Face config.json (the model read from it); 1: a Megatron-LM command line
// or launch script; 2: a TorchTitan TOML; 3: a perturbation spec (--perturb); 4: a reliability spec
// (goodput); 5: a sweep shard's JSON (sweep merge); 6: a microbenchmark file (fit-devices,
// calibrate). A valid launch configuration is resolved into a job and costed without simulation.
#include <unistd.h>

#include "fuzz/fuzz.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/search/sweep.hpp"
#include "trainsim/spec/job.hpp"
#include "trainsim/spec/launch_config.hpp"
#include "trainsim/spec/perturb_spec.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/reliability_spec.hpp"
#include "trainsim/spec/workload_spec.hpp"
#include "trainsim/trace/microbench.hpp"

namespace {

using namespace trainsim;

const spec::ClusterSpec& h100_cluster() {
  static const auto cluster = spec::load_cluster_spec(TRAINSIM_SOURCE_DIR "/topologies/dgx-h100-superpod.json");
  return cluster;
}

// A launch configuration's job on a fixed cluster, costed without the event simulation.
void cost_launch(const spec::LaunchConfig& launch) {
  const auto& cluster = h100_cluster();
  const auto launched = spec::resolve_launch(launch, nlohmann::json::object(), std::nullopt, cluster.num_devices(),
                                             {.seq_len = 4096, .global_batch = 1024});
  const auto job =
      spec::resolve_job(cluster, launched.workload, launched.strategy, {"dgx-h100-superpod", "fuzz", "fuzz"});
  driver::RunOptions options;
  options.simulate = false;
  (void)driver::build_run_report(job, options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto text = fuzz::text(data + 1, size - 1);
  fuzz::expect_clean([&] {
    switch (data[0] % 7) {
      case 0: {
        std::vector<std::string> warnings;
        (void)spec::read_hf_model(spec::parse_json_text(text, "config.json"), "config.json", warnings);
        break;
      }
      case 1:
        cost_launch(spec::read_megatron_args(text, "train.sh"));
        break;
      case 2:
        cost_launch(spec::read_torchtitan_toml(text, "train.toml"));
        break;
      case 3:
        (void)spec::read_perturb_spec(spec::parse_json_text(text, "perturb.json"), "perturb.json");
        break;
      case 4:
        (void)spec::read_reliability_spec(spec::parse_json_text(text, "reliability.json"), "reliability.json");
        break;
      case 5:
        (void)search::sweep_from_json(spec::parse_json_text(text, "shard.json"), "shard.json");
        break;
      default: {
        static const std::string path = "/tmp/trainsim-fuzz-microbench-" + std::to_string(getpid()) + ".json";
        // the rows the fit would take, checked against what the device can do (the fit itself
        // costs seconds per input; what it is given is what these two pass)
        if (fuzz::write_input(path, data + 1, size - 1))
          trace::check_physical(trace::read_microbenchmarks(path, "H100|A100"), h100_cluster());
        break;
      }
    }
  });
  return 0;
}
