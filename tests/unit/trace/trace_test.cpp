// The trace reader, replay and calibration against the real traces under reference/traces/ and
// against small traces whose answers follow by hand.
//
// Independent truth: PROVENANCE.md's step counts; the CSV listing every NCCL kernel; a second,
// naive reading of each file (zlib's gzread and a whole-document JSON parse) for the kernels per
// stream; hand-computed timelines for the synthetic traces.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/paths.hpp"
#include "trace/json_fields.hpp"
#include "trainsim/spec/calibration_spec.hpp"
#include "trainsim/trace/analysis.hpp"
#include "trainsim/util/error.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace trainsim;

namespace {

std::string trace_path(const std::string& file) {
  return test::reference("traces/hta/" + file);
}

// A reference trace as read_trace reads it, read once for all the tests that use it (the largest
// decompress to 35 MB of JSON, slow to parse under the sanitizers).
const trace::RankTrace& reference_trace(const std::string& file) {
  static std::map<std::string, trace::RankTrace> read;
  auto it = read.find(file);
  if (it == read.end()) it = read.emplace(file, trace::read_trace(trace_path(file))).first;
  return it->second;
}

// The naive reading: the whole file decompressed and parsed at once.
json parse_whole(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  gzclose(f);
  return json::parse(text);
}

// One CSV row per NCCL kernel; fields may be quoted ("[0, 1]").
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  const auto split = [](const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (const char c : line) {
      if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted)
        out.emplace_back();
      else
        out.back() += c;
    }
    return out;
  };
  std::string line;
  std::getline(in, line);
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto fields = split(line);
    REQUIRE(fields.size() == header.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

// The CSV names collectives as NCCL's kernels do, in lower case.
std::string csv_op(const std::string& op) {
  if (op == "allreduce") return "all_reduce";
  if (op == "allgather") return "all_gather";
  if (op == "reducescatter") return "reduce_scatter";
  if (op == "sendrecv") return "send_recv";
  return op;
}

struct Expected {
  std::string file;
  int rank;
  int world_size;
  std::size_t steps;  // PROVENANCE.md
};

const std::vector<Expected> kTraces = {
    {"nccl_parser_config_nccl_data.json.gz", 0, 2, 3},  {"negative_queue_length_values_check_rank0.json.gz", 0, 16, 5},
    {"trace_filter_sampled_rank-0.json.gz", 0, 128, 2}, {"trace_filter_sampled_rank-1.json.gz", 1, 128, 2},
    {"trace_diff_control_control.json.gz", 3, 8, 6},
};

// A scratch file for a synthetic trace.
std::string write_trace(const std::string& name, const json& trace) {
  const auto dir = fs::temp_directory_path() / "trainsim-trace-test";
  fs::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << trace.dump();
  return path;
}

constexpr double kBaseUs = 1.7e15;  // microseconds since the epoch, as Kineto writes them

json complete(const std::string& cat, const std::string& name, double ts, double dur, json args, int tid = 1) {
  return {{"ph", "X"},  {"cat", cat},         {"name", name}, {"pid", 1},
          {"tid", tid}, {"ts", kBaseUs + ts}, {"dur", dur},   {"args", std::move(args)}};
}
json launch(double ts, int correlation) {
  return complete("cuda_runtime", "cudaLaunchKernel", ts, 5, {{"correlation", correlation}});
}
json kernel(const std::string& name, double ts, double dur, int stream, int correlation, json extra = json::object()) {
  json args = {{"stream", stream}, {"correlation", correlation}, {"device", 0}};
  args.update(extra);
  return complete("kernel", name, ts, dur, args, stream);
}

// One step on one thread: two 100 us kernels on stream 7 and an all-reduce on stream 20, then a
// device synchronisation and 30 us of CPU work (times in us from the step's start):
//   launches at 10, 20, 30 (5 us each); k1 15–115, k2 115–215; all-reduce 35–(35 + nccl_us);
//   cudaDeviceSynchronize 40–370; the step ends at 400.
json one_step_trace(int rank, double nccl_us, double offset_us) {
  json events = json::array();
  const auto at = [&](json e) {
    e["ts"] = e["ts"].get<double>() + offset_us;
    events.push_back(std::move(e));
  };
  at(complete("user_annotation", "ProfilerStep#7", 0, 400, json::object()));
  at(launch(10, 1));
  at(launch(20, 2));
  at(launch(30, 3));
  at(complete("cuda_runtime", "cudaDeviceSynchronize", 40, 330, json::object()));
  at(kernel("gemm_a", 15, 100, 7, 1));
  at(kernel("gemm_b", 115, 100, 7, 2));
  at(kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 35, nccl_us, 20, 3,
            {{"Collective name", "allreduce"},
             {"In msg nelems", 1 << 20},
             {"Out msg nelems", 1 << 20},
             {"Group size", 2},
             {"dtype", "Float"},
             {"Process Group Ranks", "[0, 1]"}}));
  return {{"schemaVersion", 1},
          {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
          {"deviceProperties", json::array({{{"id", 0}, {"name", "Test GPU"}, {"totalGlobalMem", 1 << 30}}})},
          {"traceEvents", events}};
}

}  // namespace

TEST_CASE("every reference trace: ranks, steps, kernels per stream, NCCL kernels as the CSV lists them" * doctest::test_suite("volume")) {
  const auto csv = read_csv(test::reference("traces/nccl_kernels_from_staged_traces.csv"));
  for (const auto& expected : kTraces) {
    CAPTURE(expected.file);
    const auto& t = reference_trace(expected.file);
    CHECK(t.rank == expected.rank);
    CHECK(t.world_size == expected.world_size);
    CHECK(t.steps.size() == expected.steps);

    // kernels per stream against the naive reading
    const auto whole = parse_whole(trace_path(expected.file));
    std::map<std::int64_t, std::int64_t> naive, ours;
    std::int64_t naive_steps = 0;
    for (const auto& e : whole["traceEvents"]) {
      if (e.value("cat", "") == "kernel") ++naive[e["args"]["stream"].get<std::int64_t>()];
      if (e.value("cat", "") == "user_annotation" && e.value("name", "").rfind("ProfilerStep#", 0) == 0) ++naive_steps;
    }
    for (const auto& g : t.gpu)
      if (g.kind == trace::GpuKind::Kernel) ++ours[g.stream];
    CHECK(ours == naive);
    CHECK(static_cast<std::int64_t>(t.steps.size()) == naive_steps);
    const auto summary = trace::summarize({t});
    std::map<std::int64_t, std::int64_t> reported(summary.files.front().kernels_per_stream.begin(),
                                                  summary.files.front().kernels_per_stream.end());
    CHECK(reported == naive);

    // NCCL kernels: the same count, and kernel by kernel (in time order) the same collective,
    // size, group, stream and duration
    std::vector<const std::map<std::string, std::string>*> rows;
    for (const auto& row : csv)
      if (row.at("file") == expected.file) rows.push_back(&row);
    // (kernels starting together on two streams: by stream)
    std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
      return std::pair(std::stod(a->at("ts_us")), std::stoll(a->at("stream"))) <
             std::pair(std::stod(b->at("ts_us")), std::stoll(b->at("stream")));
    });
    std::vector<const trace::GpuOp*> nccl;
    for (const auto& g : t.gpu)
      if (g.collective) nccl.push_back(&g);
    std::stable_sort(nccl.begin(), nccl.end(), [](const auto* a, const auto* b) {
      return std::pair(a->start_ns, a->stream) < std::pair(b->start_ns, b->stream);
    });
    REQUIRE(nccl.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& row = *rows[i];
      const auto& c = *nccl[i]->collective;
      CAPTURE(i);
      CHECK(nccl[i]->stream == std::stoll(row.at("stream")));
      CHECK(std::abs(static_cast<double>(nccl[i]->dur_ns) - std::stod(row.at("dur_us")) * 1e3) <= 1.0);
      if (row.at("in_nelems").empty()) {
        CHECK_FALSE(c.sized());
        continue;
      }
      CHECK(c.op == csv_op(row.at("collective")));
      CHECK(c.in_elements == std::stoll(row.at("in_nelems")));
      CHECK(c.out_elements == std::stoll(row.at("out_nelems")));
      CHECK(c.group_size == std::stoi(row.at("group_size")));
      CHECK(c.dtype == row.at("dtype"));
      CHECK(c.bytes() == std::stoll(row.at("in_nelems")) * trace::dtype_bytes(row.at("dtype")));
    }
  }
}

TEST_CASE("trace summary: per-collective totals add up to the kernels they count") {
  const auto& t = reference_trace("nccl_parser_config_nccl_data.json.gz");
  const auto summary = trace::summarize({t});
  std::int64_t count = 0, bytes = 0;
  for (const auto& c : summary.collectives) {
    count += c.count;
    bytes += c.bytes;
  }
  std::int64_t expected_bytes = 0;
  for (const auto& g : t.gpu)
    if (g.collective) expected_bytes += g.collective->bytes();
  CHECK(count == 21);
  CHECK(bytes == expected_bytes);
  for (const auto& s : summary.steps) {
    // conservation: busy = compute + communication − overlap; exposed = communication − overlap
    CHECK(s.gpu_busy_s == doctest::Approx(s.compute_s + s.comm_s - s.overlap_s).epsilon(1e-9));
    CHECK(s.exposed_comm_s == doctest::Approx(s.comm_s - s.overlap_s).epsilon(1e-9));
    CHECK(s.gpu_busy_s <= s.recorded_s);
  }
}

TEST_CASE("replay reproduces every recorded profiler step within 5%") {
  std::vector<std::vector<std::string>> jobs;
  for (const auto& e : kTraces) jobs.push_back({e.file});
  jobs.push_back({"trace_filter_sampled_rank-0.json.gz", "trace_filter_sampled_rank-1.json.gz"});
  for (const auto& files : jobs) {
    std::vector<trace::RankTrace> traces;
    for (const auto& f : files) traces.push_back(reference_trace(f));
    const auto report = trace::replay(traces, {});
    REQUIRE(!report.steps.empty());
    for (const auto& s : report.steps) {
      CAPTURE(files.front());
      CAPTURE(s.step);
      REQUIRE(s.replayed_s.has_value());
      CHECK(*s.replayed_s == doctest::Approx(s.recorded_s).epsilon(0.05));
      MESSAGE(fmt::format("{} rank {} step {}: recorded {:.3f} ms, replayed {:.3f} ms ({:+.2f}%)", files.front(),
                          s.rank, s.step, s.recorded_s * 1e3, *s.replayed_s * 1e3,
                          (*s.replayed_s / s.recorded_s - 1) * 100));
    }
  }
}

TEST_CASE("replay what-ifs move only what they change") {
  const auto& t = reference_trace("nccl_parser_config_nccl_data.json.gz");
  const auto base = trace::replay({t}, {});
  const auto faster_net = trace::replay({t}, {.network_scale = 2});
  const auto faster_gpu = trace::replay({t}, {.compute_scale = 2});
  REQUIRE(base.steps.size() == faster_net.steps.size());
  for (std::size_t s = 0; s < base.steps.size(); ++s) {
    // communication halves; compute is untouched; nothing gets slower
    CHECK(faster_net.steps[s].comm_s == doctest::Approx(base.steps[s].comm_s / 2).epsilon(0.01));
    CHECK(faster_net.steps[s].compute_s == doctest::Approx(base.steps[s].compute_s).epsilon(1e-6));
    CHECK(faster_gpu.steps[s].compute_s == doctest::Approx(base.steps[s].compute_s / 2).epsilon(0.01));
    CHECK(*faster_net.steps[s].replayed_s <= *base.steps[s].replayed_s * (1 + 1e-9));
    CHECK(*faster_gpu.steps[s].replayed_s <= *base.steps[s].replayed_s * (1 + 1e-9));
  }
}

TEST_CASE("on every reference trace a faster GPU or network never makes the steps slower in total") {
  for (const auto& e : kTraces) {
    CAPTURE(e.file);
    const auto& t = reference_trace(e.file);
    const auto total = [&](const trace::ReplayOptions& o) {
      double sum = 0;
      for (const auto& s : trace::replay({t}, o).steps) sum += *s.replayed_s;
      return sum;
    };
    const double base = total({});
    const double gpu = total({.compute_scale = 2});
    const double net = total({.network_scale = 2});
    const double both = total({.compute_scale = 1000, .network_scale = 1000});
    CHECK(gpu <= base * (1 + 1e-9));
    CHECK(net <= base * (1 + 1e-9));
    CHECK(both <= std::min(gpu, net) * (1 + 1e-9));
    CHECK(both > 0);
  }
}

TEST_CASE("synthetic trace: launches, a device synchronisation and the what-ifs, by hand") {
  const auto t = trace::read_trace(write_trace("one.json", one_step_trace(0, 300, 0)));
  REQUIRE(t.steps.size() == 1);
  REQUIRE(t.gpu.size() == 3);
  REQUIRE(t.gpu[1].collective.has_value());  // in time order: k1, the all-reduce, k2
  CHECK(t.gpu[1].collective->bytes() == 4 << 20);

  // unchanged: the recorded 400 us
  const auto base = trace::replay({t}, {});
  CHECK(*base.steps[0].replayed_s == doctest::Approx(400e-6).epsilon(1e-6));
  // the all-reduce at half time ends at 185, before k2 (215): the sync returns 215 + 35 (what it
  // spent after its op finished), then 30 us of CPU: 280 us
  const auto net = trace::replay({t}, {.network_scale = 2});
  CHECK(*net.steps[0].replayed_s == doctest::Approx(280e-6).epsilon(1e-6));
  // the step waits on the all-reduce: twice faster kernels change nothing
  const auto gpu = trace::replay({t}, {.compute_scale = 2});
  CHECK(*gpu.steps[0].replayed_s == doctest::Approx(400e-6).epsilon(1e-6));
  CHECK(gpu.steps[0].compute_s == doctest::Approx(100e-6).epsilon(1e-6));
}

TEST_CASE("synthetic trace: the critical path says what bounds the step, by hand") {
  const auto t = trace::read_trace(write_trace("bound.json", one_step_trace(0, 300, 0)));
  // as recorded: CPU 0–35 (launches and their gaps), the all-reduce 35–335, the sync's last 35 us,
  // 30 us of CPU: communication-bound, 300 us of NCCL and 100 of CPU on the path
  const auto base = trace::replay({t}, {});
  REQUIRE(base.steps[0].critical_path.has_value());
  const auto& b = *base.steps[0].critical_path;
  CHECK(b.comm_s == doctest::Approx(300e-6).epsilon(1e-6));
  CHECK(b.cpu_s == doctest::Approx(100e-6).epsilon(1e-6));
  CHECK(b.compute_s == doctest::Approx(0).epsilon(1e-9));
  CHECK(std::string(b.bound()) == "communication");
  CHECK_FALSE(base.what_if);
  // twice the network: the sync now waits for k2 (launch 10–15, k1 15–115, k2 115–215, then
  // 35 + 30 us): GPU-bound, 200 us of kernels and 80 of CPU
  const auto net = trace::replay({t}, {.network_scale = 2});
  const auto& n = *net.steps[0].critical_path;
  CHECK(n.compute_s == doctest::Approx(200e-6).epsilon(1e-6));
  CHECK(n.cpu_s == doctest::Approx(80e-6).epsilon(1e-6));
  CHECK(n.comm_s == doctest::Approx(0).epsilon(1e-9));
  CHECK(std::string(n.bound()) == "GPU");
  CHECK(net.what_if);
  // the path covers the step
  CHECK(n.cpu_s + n.compute_s + n.comm_s + n.wait_s == doctest::Approx(*net.steps[0].replayed_s).epsilon(1e-6));
}

TEST_CASE("replay with fits: nothing to cost is bad input, a part left uncosted is a warning") {
  const auto t = trace::read_trace(write_trace("fits.json", one_step_trace(0, 300, 0)));
  const spec::CollectiveFit fit{.op = "all_reduce",
                                .group_size = 2,
                                .latency = Duration::from_seconds(10e-6),
                                .bandwidth = Bandwidth{4e9},
                                .samples = 1};
  // 4 MiB at 4 GB/s + 10 us = 1058.6 us instead of the recorded 300
  const auto costed = trace::replay({t}, {.fits = std::vector{fit}});
  CHECK(costed.warnings.empty());
  CHECK(costed.steps[0].critical_path->comm_s == doctest::Approx(10e-6 + (4 << 20) / 4e9).epsilon(1e-6));
  auto other = fit;
  other.group_size = 4;
  CHECK_THROWS_WITH_AS(trace::replay({t}, {.fits = std::vector{other}}),
                       "--calibration: none of the 1 NCCL kernel(s) can be costed: 1 have no fit for their operation "
                       "and group size",
                       SpecError);
  auto unsized = one_step_trace(0, 300, 0);
  for (auto& e : unsized["traceEvents"])
    if (e["args"].contains("In msg nelems")) e["args"].erase("In msg nelems");
  CHECK_THROWS_WITH_AS(
      trace::replay({trace::read_trace(write_trace("unsized.json", unsized))}, {.fits = std::vector{fit}}),
      doctest::Contains("1 record no size or group size"), SpecError);
  auto no_nccl = one_step_trace(0, 300, 0);
  auto& events = no_nccl["traceEvents"];
  events.erase(std::remove_if(events.begin(), events.end(),
                              [](const json& e) { return e["name"].get<std::string>().starts_with("nccl"); }),
               events.end());
  CHECK_THROWS_WITH_AS(
      trace::replay({trace::read_trace(write_trace("no-nccl.json", no_nccl))}, {.fits = std::vector{fit}}),
      "--calibration: the traces hold no NCCL kernels: there is nothing to cost", SpecError);
  // two ranks' kernels, one fitted and one not: a warning, the fitted one costed
  auto two = one_step_trace(0, 300, 0);
  two["traceEvents"].push_back(kernel("ncclKernel_AllGather_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                                      350, 10, 20, 9,
                                      {{"Collective name", "allgather"},
                                       {"In msg nelems", 1024},
                                       {"Out msg nelems", 2048},
                                       {"Group size", 2},
                                       {"dtype", "Float"}}));
  const auto partial = trace::replay({trace::read_trace(write_trace("partial.json", two))}, {.fits = std::vector{fit}});
  REQUIRE(partial.warnings.size() == 1);
  CHECK(partial.warnings[0] ==
        "1 of 2 NCCL kernel(s) keep their recorded time: 1 have no fit for their operation "
        "and group size");
}

TEST_CASE("synthetic traces of two ranks: clocks aligned per file, one collective of the shortest duration") {
  // rank 1's clock is a second ahead and its all-reduce lasted 200 us (rank 0 waited for it)
  const auto r0 = trace::read_trace(write_trace("rank0.json", one_step_trace(0, 300, 0)));
  const auto r1 = trace::read_trace(write_trace("rank1.json", one_step_trace(1, 200, 1e6)));
  const auto report = trace::replay({r0, r1}, {});
  REQUIRE(report.steps.size() == 2);
  // rank 0: the all-reduce ends at 235, the sync returns 35 us later, the step 30 us after: 300
  CHECK(*report.steps[0].replayed_s == doctest::Approx(300e-6).epsilon(1e-6));
  // rank 1: as recorded
  CHECK(*report.steps[1].replayed_s == doctest::Approx(400e-6).epsilon(1e-6));
  CHECK(std::find(report.notes.begin(), report.notes.end(), "1 collectives matched across 2 ranks") !=
        report.notes.end());
  // the all-reduce ends 999.9 ms later on rank 1's clock (1 s ahead, its kernel 100 us shorter)
  CHECK(std::find(report.notes.begin(), report.notes.end(),
                  "rank 1's clock reads 999.900 ms ahead of rank 0's (the median over 1 matched collectives' ends): "
                  "each rank is replayed on its own clock") != report.notes.end());
  // clocks within a millisecond: nothing to say
  const auto close =
      trace::replay({r0, trace::read_trace(write_trace("rank1_ntp.json", one_step_trace(1, 200, 900)))}, {});
  CHECK(std::none_of(close.notes.begin(), close.notes.end(),
                     [](const std::string& n) { return n.find("clock reads") != std::string::npos; }));
}

TEST_CASE("a GPU clock behind or ahead of the CPU's is a warning") {
  const auto warned = [](const trace::RankTrace& t, const std::string& text) {
    return std::any_of(t.warnings.begin(), t.warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  // every kernel of the one-step trace moved 5 s earlier: each starts before its launch
  auto behind = one_step_trace(0, 300, 0);
  for (auto& e : behind["traceEvents"])
    if (e["cat"] == "kernel") e["ts"] = e["ts"].get<double>() - 5e6;
  const auto early = trace::read_trace(write_trace("gpu_behind.json", behind));
  CHECK(warned(early, "3 of 3 GPU op(s) start before the runtime call that launched them (by up to 4999.995 ms)"));
  // 100 launches whose kernels all start 50 ms later: no op within 10 ms of its launch
  json events = json::array({complete("user_annotation", "ProfilerStep#1", 0, 1e6, json::object())});
  for (int i = 1; i <= 100; ++i) {
    events.push_back(launch(i * 100.0, i));
    events.push_back(kernel("k", 50000 + i * 100.0, 50, 7, i));
  }
  const auto late = trace::read_trace(write_trace("gpu_ahead.json", {{"traceEvents", events}}));
  CHECK(warned(late,
               "none of 100 GPU ops starts within 10 ms of the call that launched it (the least delay is "
               "50.000 ms)"));
  // the reference traces: neither
  for (const auto& t : kTraces) CHECK_FALSE(warned(reference_trace(t.file), "clock"));
}

TEST_CASE("calibration recovers a known latency and bandwidth from the lower envelope") {
  // all-reduce on 4 ranks: 12 us + bytes / 80 GB/s, each size also recorded 40% slower (a late peer)
  json events = json::array();
  int correlation = 1;
  double ts = 0;
  for (std::int64_t elements = 1 << 16; elements <= (1 << 26); elements *= 4) {
    const double us = 12 + static_cast<double>(elements * 2) / 80e9 * 1e6;
    for (const double slow : {1.0, 1.4}) {
      events.push_back(kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", ts,
                              us * slow, 20, correlation++,
                              {{"Collective name", "allreduce"},
                               {"In msg nelems", elements},
                               {"Out msg nelems", elements},
                               {"Group size", 4},
                               {"dtype", "BFloat16"}}));
      ts += 2 * us;
    }
  }
  const auto path = write_trace("fit.json", {{"traceEvents", events}});
  const auto report = trace::calibrate({trace::read_trace(path)}, std::nullopt);
  REQUIRE(report.calibration.fits.size() == 1);
  const auto& fit = report.calibration.fits.front();
  CHECK(fit.op == "all_reduce");
  CHECK(fit.group_size == 4);
  CHECK(fit.latency.seconds() == doctest::Approx(12e-6).epsilon(0.01));
  CHECK(fit.bandwidth.bytes_per_s == doctest::Approx(80e9).epsilon(0.01));
  CHECK(report.collectives.front().envelope_error < 0.01);

  // the file `run --calibration` reads gives the same fit back
  const auto back = spec::read_calibration_spec(spec::calibration_json(report.calibration), "calibration");
  REQUIRE(back.fits.size() == 1);
  CHECK(back.fits.front().latency.seconds() == doctest::Approx(fit.latency.seconds()));
  CHECK(back.fits.front().bandwidth.bytes_per_s == doctest::Approx(fit.bandwidth.bytes_per_s));
}

TEST_CASE("calibration on nccl_parser_config reproduces its large all-reduces within 10%") {
  // the CSV's all-reduces of at least 16 MB, fastest instance per size: the others include
  // waiting for the peer rank
  std::map<std::int64_t, double> fastest;
  for (const auto& row : read_csv(test::reference("traces/nccl_kernels_from_staged_traces.csv"))) {
    if (row.at("file") != "nccl_parser_config_nccl_data.json.gz" || row.at("collective") != "allreduce") continue;
    const auto bytes = std::stoll(row.at("in_nelems")) * 4;
    const double seconds = std::stod(row.at("dur_us")) * 1e-6;
    if (bytes < 16'000'000) continue;
    auto [it, inserted] = fastest.try_emplace(bytes, seconds);
    if (!inserted) it->second = std::min(it->second, seconds);
  }
  REQUIRE(fastest.size() == 3);
  const auto report = trace::calibrate({reference_trace("nccl_parser_config_nccl_data.json.gz")}, std::nullopt);
  const auto fit = std::find_if(report.calibration.fits.begin(), report.calibration.fits.end(),
                                [](const auto& f) { return f.op == "all_reduce" && f.group_size == 2; });
  REQUIRE(fit != report.calibration.fits.end());
  for (const auto& sample : fastest) {
    const auto bytes = sample.first;  // not a structured binding: CAPTURE's lambda takes it by reference
    const auto seconds = sample.second;
    const double predicted = fit->latency.seconds() + static_cast<double>(bytes) / fit->bandwidth.bytes_per_s;
    CAPTURE(bytes);
    CHECK(predicted == doctest::Approx(seconds).epsilon(0.10));
    MESSAGE(fmt::format("all_reduce {} B: recorded {:.1f} us, fitted {:.1f} us ({:+.1f}%)", bytes, seconds * 1e6,
                        predicted * 1e6, (predicted / seconds - 1) * 100));
  }
}

TEST_CASE("unusable traces are errors naming the file; odd events are warnings") {
  const auto dir = fs::temp_directory_path() / "trainsim-trace-test";
  fs::create_directories(dir);
  SUBCASE("truncated gzip") {
    std::ifstream in(trace_path("trace_filter_sampled_rank-0.json.gz"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto path = (dir / "truncated.json.gz").string();
    std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    CHECK_THROWS_WITH_AS(trace::read_trace(path), doctest::Contains(path.c_str()), SpecError);
  }
  SUBCASE("not a Kineto trace") {
    const auto path = write_trace("not-kineto.json", {{"name", "x"}});
    CHECK_THROWS_WITH_AS(trace::read_trace(path), doctest::Contains("traceEvents"), SpecError);
  }
  SUBCASE("traceEvents not a list") {
    const auto path = write_trace("events-object.json", {{"traceEvents", {{"a", 1}}}});
    CHECK_THROWS_WITH_AS(trace::read_trace(path), doctest::Contains("/traceEvents"), SpecError);
  }
  SUBCASE("missing file") {
    CHECK_THROWS_AS(trace::read_trace((dir / "absent.json").string()), IoError);
  }
  SUBCASE("events without times, of unknown kinds, or not objects") {
    auto trace = one_step_trace(0, 300, 0);
    trace["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"ts", "soon"}, {"dur", 3}});
    trace["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"ts", 1e300}, {"dur", 3}});
    trace["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"ts", 5}, {"dur", -3}});
    trace["traceEvents"].push_back({{"ph", "Q"}, {"name", "odd"}});
    trace["traceEvents"].push_back(42);
    const auto t = trace::read_trace(write_trace("odd.json", trace));
    CHECK(t.gpu.size() == 3);
    CHECK(t.steps.size() == 1);
    CHECK_FALSE(t.warnings.empty());
  }
}

TEST_CASE("the profiler's [memory] events give each step's recorded allocated and reserved peaks") {
  // PyTorch's profiler with profile_memory=True writes an instant event per allocation and free with
  // the caching allocator's totals ("Total Allocated", "Total Reserved"); a CPU's (Device Type 0)
  // and those outside the step do not count
  auto trace = one_step_trace(0, 50, 0);
  const auto memory = [](double ts, int device_type, std::int64_t allocated, std::int64_t reserved) {
    return json{{"ph", "i"},
                {"cat", "cpu_instant_event"},
                {"name", "[memory]"},
                {"pid", 1},
                {"tid", 1},
                {"s", "t"},
                {"ts", kBaseUs + ts},
                {"args",
                 {{"Device Type", device_type},
                  {"Device Id", 0},
                  {"Addr", 1},
                  {"Bytes", 512},
                  {"Total Allocated", allocated},
                  {"Total Reserved", reserved}}}};
  };
  trace["traceEvents"].push_back(memory(10, 1, 1000, 2 << 20));
  trace["traceEvents"].push_back(memory(100, 1, 5000, 4 << 20));
  trace["traceEvents"].push_back(memory(200, 1, 3000, 4 << 20));
  trace["traceEvents"].push_back(memory(150, 0, 900000, 900000));  // the CPU's
  trace["traceEvents"].push_back(memory(500, 1, 7000, 8 << 20));   // after the step
  const auto t = trace::read_trace(write_trace("memory.json", trace));
  CHECK(t.memory.size() == 4);
  const auto r = trace::summarize({t});
  REQUIRE(r.steps.size() == 1);
  REQUIRE(r.steps[0].peak_allocated.has_value());
  CHECK(*r.steps[0].peak_allocated == 5000);
  CHECK(*r.steps[0].peak_reserved == 4 << 20);
  // a trace without them reports none
  const auto plain = trace::summarize({trace::read_trace(write_trace("plain.json", one_step_trace(0, 50, 0)))});
  CHECK_FALSE(plain.steps[0].peak_allocated.has_value());
}

TEST_CASE("a trace whose rank is an empty string says the rank is unknown, never 'rank -1'") {
  auto trace = one_step_trace(0, 50, 0);
  trace["distributedInfo"]["rank"] = "";
  const auto t = trace::read_trace(write_trace("empty-rank.json", trace));
  CHECK(t.rank == -1);
  REQUIRE_FALSE(t.warnings.empty());
  CHECK(t.warnings.back() == "distributedInfo rank is \"\", not a rank number: unknown");
}

TEST_CASE("fractional timestamps are read to the nanosecond, not through a double") {
  // a double holds 1.7e15 microseconds to 0.25 us: 1700000000000000.001 and .999 would read as
  // 1700000000000000 and 1700000000000001
  CHECK(trace::decimal_microseconds_as_ns("1700000000000000.001") == 1'700'000'000'000'000'001);
  CHECK(trace::decimal_microseconds_as_ns("1700000000000000.999") == 1'700'000'000'000'000'999);
  CHECK(trace::decimal_microseconds_as_ns("12.5") == 12'500);
  CHECK(trace::decimal_microseconds_as_ns("0.0004") == 0);  // below a nanosecond: rounded
  CHECK(trace::decimal_microseconds_as_ns("0.0005") == 1);
  CHECK(trace::decimal_microseconds_as_ns("-2.25") == -2'250);
  CHECK(trace::decimal_microseconds_as_ns("1.5e3") == 1'500'000);
  CHECK(trace::decimal_microseconds_as_ns("1.700000000000000001E+15") == 1'700'000'000'000'000'001);
  CHECK(trace::decimal_microseconds_as_ns("0.000") == 0);
  CHECK(trace::decimal_microseconds_as_ns("100000000000000000000.0") == std::nullopt);   // past int64 ns
  CHECK(trace::decimal_microseconds_as_ns("1.2345678901234567890123") == std::nullopt);  // past a uint64
  CHECK(trace::decimal_microseconds_as_ns("1e999") == std::nullopt);
  CHECK(trace::decimal_microseconds_as_ns("abc") == std::nullopt);

  // the same in a trace, written as Kineto writes it (three decimals)
  const auto dir = fs::temp_directory_path() / "trainsim-trace-test";
  fs::create_directories(dir);
  const auto path = (dir / "fractional.json").string();
  std::ofstream(path) << R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 1700000000000000.001, "dur": 0.5,
     "args": {"stream": 7, "correlation": 1, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 1700000000000000.999, "dur": 1.25,
     "args": {"stream": 7, "correlation": 2, "device": 0}}]})";
  const auto t = trace::read_trace(path);
  REQUIRE(t.gpu.size() == 2);
  CHECK(t.base_ns + t.gpu[0].start_ns == 1'700'000'000'000'000'001);
  CHECK(t.gpu[1].start_ns - t.gpu[0].start_ns == 998);
  CHECK(t.gpu[0].dur_ns == 500);
  CHECK(t.gpu[1].dur_ns == 1'250);
}

namespace {

// One bf16 8192³ product (1.1 TFLOP) whose kernel lasted `kernel_us`.
std::string bf16_product_trace(const std::string& name, double kernel_us) {
  const json events = json::array(
      {complete("user_annotation", "ProfilerStep#1", 0, 10000, json::object()),
       complete("cpu_op", "aten::mm", 10, 20,
                {{"Input Dims", {{8192, 8192}, {8192, 8192}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}}),
       launch(12, 1), kernel("sm80_xmma_gemm_bf16bf16_bf16f32", 20, kernel_us, 7, 1)});
  return write_trace(name, {{"traceEvents", events}});
}

}  // namespace

TEST_CASE("calibration fits half-precision products against their own peak and refuses impossible ones") {
  const auto cluster = spec::load_cluster_spec(test::topology("dgx-a100-superpod"));
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  // 5 ms: 220 TFLOP/s, above the A100's TF32 peak (156) but within its bf16 peak (312)
  const auto report = trace::calibrate({trace::read_trace(bf16_product_trace("bf16_ok.json", 5000))}, cluster);
  CHECK(flops / 5e-3 > 156e12);
  REQUIRE(report.calibration.values.sets("kernels", "sustained_fraction"));
  spec::Tunables fitted;
  report.calibration.values.apply(fitted);
  CHECK(fitted.kernels.sustained_fraction < 1.0);
  CHECK(std::any_of(report.notes.begin(), report.notes.end(),
                    [](const std::string& n) { return n.find("1 bf16") != std::string::npos; }));
  // 2 ms: 550 TFLOP/s, above the bf16 peak: recorded on another device than -t's
  const auto fast = bf16_product_trace("bf16_impossible.json", 2000);
  CHECK_THROWS_WITH_AS(trace::calibrate({trace::read_trace(fast)}, cluster),
                       doctest::Contains("above A100-SXM4-80GB's peak of 312"), SpecError);
}
