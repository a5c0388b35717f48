// `trace summary`, `replay` and `calibrate`: what real profiler traces recorded, run back through
// the engine, and the parameters fitted from them.
#include <fstream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "trainsim/api/api.hpp"
#include "trainsim/driver/device_fit.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/report/trace_format.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::cli {
namespace {

struct TraceCommandOptions {
  std::vector<std::string> traces;
  std::string topology;
  std::string calibration;
  std::string output;
  std::string microbenchmarks;
  std::string match;
  double compute_scale = 1;
  double network_scale = 1;
  std::string format = "table";
  std::string html;
  std::string chakra;
  bool cost_compute = false;
  std::string workload;  // the job the traces recorded (replay, calibrate): its peak memory compared
  std::string strategy;
};

int run_summary(const TraceCommandOptions& o) {
  fmt::print("{}", report::render(trace::summarize(api::read_traces(o.traces)), parse_format(o.format)));
  return kOk;
}

int run_chakra_replay(const TraceCommandOptions& o) {
  if (!o.traces.empty()) throw SpecError("command line", "", "give --trace (Kineto) or --chakra (Chakra), not both");
  if (!o.html.empty()) throw SpecError("--html", "", "a Chakra replay has no HTML page yet (use --format json)");
  const auto format = parse_format(o.format);
  const auto report = api::replay_chakra(o.chakra, {.topology = o.topology,
                                                    .calibration = o.calibration,
                                                    .compute_scale = o.compute_scale,
                                                    .network_scale = o.network_scale,
                                                    .cost_compute = o.cost_compute});
  print_report(report::render(report, format), report.warnings, format);
  return kOk;
}

int run_replay(const TraceCommandOptions& o) {
  if (!o.chakra.empty()) {
    if (!o.workload.empty() || !o.strategy.empty())
      throw SpecError("--workload", "", "compares a Kineto trace's recorded memory: give --trace, not --chakra");
    return run_chakra_replay(o);
  }
  if (o.cost_compute) throw SpecError("--cost-compute", "", "costs the kernels of Chakra traces: give --chakra DIR");
  if (o.traces.empty()) throw SpecError("command line", "", "replay needs --trace FILE (Kineto) or --chakra DIR");
  const auto format = parse_format(o.format);
  const auto report = api::replay({.traces = o.traces,
                                   .topology = o.topology,
                                   .calibration = o.calibration,
                                   .compute_scale = o.compute_scale,
                                   .network_scale = o.network_scale,
                                   .workload = o.workload,
                                   .strategy = o.strategy});
  if (!o.html.empty()) html::write_page(o.html, html::replay_page(report));
  print_report(report::render(report, format), report.warnings, format);
  return kOk;
}

int run_microbench_calibrate(const TraceCommandOptions& o) {
  if (o.topology.empty())
    throw SpecError("command line", "", "--microbenchmarks needs -t TOPOLOGY: the device to fit (and its node)");
  if (o.match.empty()) throw SpecError("command line", "", "--microbenchmarks needs --match TEXT: which rows' device");
  const auto cluster = spec::load_cluster_spec(o.topology);
  const auto fit = driver::fit_device(o.microbenchmarks, o.match, cluster);
  const auto text = report::json_text(report::to_json(fit, o.microbenchmarks, o.match)) + "\n";
  std::ofstream out(o.output);
  out << text;
  if (!out) throw IoError(fmt::format("{}: cannot write", o.output));
  fmt::print("{}wrote {}\n", report::to_table(fit), o.output);
  return kOk;
}

int run_calibrate(const TraceCommandOptions& o) {
  if (!o.microbenchmarks.empty()) {
    if (!o.traces.empty()) throw SpecError("command line", "", "give --trace or --microbenchmarks, not both");
    return run_microbench_calibrate(o);
  }
  if (o.traces.empty())
    throw SpecError("command line", "", "give --trace FILE (profiler traces) or --microbenchmarks FILE");
  const auto result = api::calibrate(o.traces, o.topology, o.workload, o.strategy);
  const auto text = report::json_text(report::to_json(result, o.traces)) + "\n";
  std::ofstream out(o.output);
  out << text;
  if (!out) throw IoError(fmt::format("{}: cannot write", o.output));
  fmt::print("{}wrote {}\n", report::to_table(result), o.output);
  return kOk;
}

}  // namespace

void add_trace_commands(CLI::App& app, Action& action) {
  auto o = std::make_shared<TraceCommandOptions>();
  auto* trace = app.add_subcommand("trace", "read PyTorch-profiler (Kineto) traces");
  trace->require_subcommand(1);
  trace->footer("Example: trainsim trace summary rank0.json.gz");
  auto* summary = trace->add_subcommand("summary", "per profiler step: time, compute, communication, overlap");
  summary->footer("Example: trainsim trace summary rank0.json.gz rank1.json.gz");
  summary->add_option("traces", o->traces, "trace files (.json or .json.gz), one per rank")->required();
  add_format_option(*summary, o->format);
  summary->callback([o, &action] { action = [o] { return run_summary(*o); }; });

  auto* replay = app.add_subcommand("replay", "run recorded traces back through the engine, optionally changed");
  replay->footer("Example: trainsim replay --trace rank0.json.gz --trace rank1.json.gz --compute-scale 2");
  replay->add_option("--trace", o->traces, "a rank's trace file (repeat for several ranks)");
  replay->add_option("--chakra", o->chakra,
                     "a folder of Chakra execution traces (<prefix>.<rank>.et, comm_group.json) instead of --trace");
  replay->add_flag("--cost-compute", o->cost_compute,
                   "with --chakra and -t: cost the kernels on the topology's device from their FLOPs and bytes");
  replay->add_option("-t,--topology", o->topology, "cost the collectives on this topology (ranks = its devices)");
  replay->add_option("--calibration", o->calibration, "calibration JSON whose fitted collectives replace NCCL times");
  replay->add_option("--compute-scale", o->compute_scale,
                     "run GPU kernels, copies and sets this many times faster (0.01 to 1e6)");
  replay->add_option("--network-scale", o->network_scale,
                     "run recorded NCCL kernels this many times faster (0.01 to 1e6)");
  replay->add_option("-w,--workload", o->workload,
                     "with -t and -s: the workload the traces recorded; the model's peak memory is compared with the "
                     "caching allocator's recorded one (profile_memory=True)");
  replay->add_option("-s,--strategy", o->strategy, "with -t and -w: the strategy the traces recorded");
  add_format_option(*replay, o->format);
  replay->add_option("--html", o->html, "write a self-contained HTML page of the report");
  replay->callback([o, &action] { action = [o] { return run_replay(*o); }; });

  auto* calibrate =
      app.add_subcommand("calibrate", "fit collective and kernel parameters to traces or device microbenchmarks");
  calibrate->footer(
      "Example: trainsim calibrate --trace rank0.json.gz -t topologies/dgx-a100-superpod.json -o cal.json");
  calibrate->add_option("--trace", o->traces, "a rank's trace file (repeat for several)");
  calibrate->add_option("--microbenchmarks", o->microbenchmarks,
                        "device microbenchmarks (tests/reference/modern/devices.json format)");
  calibrate->add_option("--match", o->match, "with --microbenchmarks: the rows whose gpu contains this text");
  calibrate->add_option("-o,--output", o->output, "calibration JSON to write")->required();
  calibrate->add_option("-t,--topology", o->topology, "the device whose model to fit (with traces: optional)");
  calibrate->add_option("-w,--workload", o->workload,
                        "with --trace, -t and -s: the workload the traces recorded; fits memory.fragmentation from "
                        "the caching allocator's recorded peaks (profile_memory=True)");
  calibrate->add_option("-s,--strategy", o->strategy, "with --trace, -t and -w: the strategy the traces recorded");
  calibrate->callback([o, &action] { action = [o] { return run_calibrate(*o); }; });
}

}  // namespace trainsim::cli
