// Chakra execution traces: hand-made traces whose replay follows by hand, Chakra's own feeder test
// trace (tests/reference/traces/chakra/, PROVENANCE.md), and every way a file can be bad.
#include <zlib.h>

#include <fstream>

#include <doctest/doctest.h>
#include <google/protobuf/util/delimited_message_util.h>

#include "common/paths.hpp"
#include "et_def.pb.h"
#include "trainsim/trace/chakra.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
namespace pb = ChakraProtoMsg;

namespace {

pb::Node node(std::uint64_t id, pb::NodeType type, std::uint64_t micros, std::vector<std::uint64_t> deps = {}) {
  pb::Node n;
  n.set_id(id);
  n.set_name(fmt::format("n{}", id));
  n.set_type(type);
  n.set_duration_micros(micros);
  for (const auto d : deps) n.add_data_deps(d);
  auto* cpu = n.add_attr();
  cpu->set_name("is_cpu_op");
  cpu->set_bool_val(false);
  return n;
}

void int_attr(pb::Node& n, const char* name, std::int64_t value) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(value);
}

pb::Node collective(std::uint64_t id, std::uint64_t micros, std::vector<std::uint64_t> deps, std::int64_t bytes,
                    const char* group = "0") {
  auto n = node(id, pb::COMM_COLL_NODE, micros, std::move(deps));
  int_attr(n, "comm_type", pb::ALL_REDUCE);
  int_attr(n, "comm_size", bytes);
  auto* g = n.add_attr();
  g->set_name("pg_name");
  g->set_string_val(group);
  return n;
}

void write(const std::string& path, const std::vector<pb::Node>& nodes) {
  std::ofstream out(path, std::ios::binary);
  pb::GlobalMetadata meta;
  meta.set_version("0.0.4");
  REQUIRE(google::protobuf::util::SerializeDelimitedToOstream(meta, &out));
  for (const auto& n : nodes) REQUIRE(google::protobuf::util::SerializeDelimitedToOstream(n, &out));
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

double replayed_us(const std::string& dir, trace::ReplayOptions options = {}) {
  return trace::replay_chakra(trace::read_chakra_dir(dir), options).step_time_s * 1e6;
}

std::string error_of(const std::string& dir) {
  try {
    (void)trace::replay_chakra(trace::read_chakra_dir(dir), {});
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

// One member of a .tar.gz (ustar: 512-byte headers, the size in octal at byte 124).
std::string untar(const std::string& archive, const std::string& member) {
  gzFile f = gzopen(archive.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string data;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) data.append(buffer, static_cast<std::size_t>(n));
  gzclose(f);
  for (std::size_t at = 0; at + 512 <= data.size();) {
    const std::string name(data.c_str() + at);
    if (name.empty()) break;
    const auto size = std::stoull(std::string(data, at + 124, 12), nullptr, 8);
    if (name == member) return data.substr(at + 512, size);
    at += 512 + (size + 511) / 512 * 512;
  }
  FAIL("no ", member, " in ", archive);
  return {};
}

}  // namespace

TEST_CASE("two ranks around an all-reduce replay to the hand-computed step") {
  test::ScratchDir dir("chakra-two");
  // rank 0: 100 µs, the all-reduce (50 µs recorded), 30 µs; rank 1: 60 µs, the all-reduce (70 µs:
  // 20 µs of it waiting for rank 0), 30 µs
  write(dir.file("t.0.et"),
        {node(1, pb::COMP_NODE, 100), collective(2, 50, {1}, 1 << 20), node(3, pb::COMP_NODE, 30, {2})});
  write(dir.file("t.1.et"),
        {node(1, pb::COMP_NODE, 60), collective(2, 70, {1}, 1 << 20), node(3, pb::COMP_NODE, 30, {2})});
  // the collective starts when both ranks reach it and lasts its shortest recorded instance
  CHECK(replayed_us(dir.path()) == doctest::Approx(100 + 50 + 30));
  // kernels twice as fast: max(50, 30) + 50 + 15
  CHECK(replayed_us(dir.path(), {.compute_scale = 2}) == doctest::Approx(50 + 50 + 15));
  CHECK(replayed_us(dir.path(), {.network_scale = 2}) == doctest::Approx(100 + 25 + 30));
  const auto report = trace::replay_chakra(trace::read_chakra_dir(dir.path()), {});
  REQUIRE(report.ranks.size() == 2);
  CHECK(report.collectives == 1);
  CHECK(report.ranks[1].compute == 2);
  CHECK(report.ranks[1].collectives == 1);
}

TEST_CASE("a send and its receive are one transfer; an unmatched collective group is refused") {
  test::ScratchDir dir("chakra-p2p");
  auto send = node(2, pb::COMM_SEND_NODE, 20, {1});
  int_attr(send, "comm_dst", 1);
  int_attr(send, "comm_size", 4096);
  auto recv = node(1, pb::COMM_RECV_NODE, 25);
  int_attr(recv, "comm_src", 0);
  int_attr(recv, "comm_size", 4096);
  write(dir.file("t.0.et"), {node(1, pb::COMP_NODE, 10), send});
  write(dir.file("t.1.et"), {recv, node(2, pb::COMP_NODE, 5, {1})});
  CHECK(replayed_us(dir.path()) == doctest::Approx(10 + 20 + 5));

  // rank 1 holds a second collective of group 0 that rank 0 lacks
  write(dir.file("t.0.et"), {collective(1, 5, {}, 64)});
  write(dir.file("t.1.et"), {collective(1, 5, {}, 64), collective(2, 5, {1}, 64)});
  CHECK(error_of(dir.path()).find("collective #2 of group \"0\" is on ranks 1") != std::string::npos);
}

TEST_CASE("process groups come from comm_group.json") {
  test::ScratchDir dir("chakra-groups");
  write(dir.file("t.0.et"), {node(1, pb::COMP_NODE, 10), collective(2, 40, {1}, 1 << 20, "tp")});
  write(dir.file("t.1.et"), {node(1, pb::COMP_NODE, 30), collective(2, 40, {1}, 1 << 20, "tp")});
  write_text(dir.file("comm_group.json"), R"({"tp": [0, 1]})");
  CHECK(replayed_us(dir.path()) == doctest::Approx(30 + 40));
  write_text(dir.file("comm_group.json"), R"({"dp": [0, 1]})");
  CHECK(error_of(dir.path()).find("process group \"tp\", which comm_group.json does not define") != std::string::npos);
  write_text(dir.file("comm_group.json"), R"({"tp": [0, 0]})");
  CHECK(error_of(dir.path()).find("comm_group.json: /tp: expected a list of distinct ranks") != std::string::npos);
}

TEST_CASE("bad Chakra files name the file and the node") {
  test::ScratchDir dir("chakra-bad");
  const auto file = dir.file("t.0.et");
  const auto expect = [&](const std::string& what) {
    const auto e = error_of(dir.path());
    CHECK_MESSAGE(e.find(file) != std::string::npos, e);
    CHECK_MESSAGE(e.find(what) != std::string::npos, e);
  };
  // truncated: the last node's bytes cut short
  write(file, {node(1, pb::COMP_NODE, 10), node(2, pb::COMP_NODE, 10, {1})});
  {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    write_text(file, bytes.substr(0, bytes.size() - 3));
  }
  expect("corrupt or truncated protobuf after 1 nodes (the last whole one is node 1)");
  write_text(file, "this is not a protobuf message at all");
  expect("not a Chakra trace: the global metadata does not parse");
  write_text(file, "");
  expect("empty");
  auto odd = node(7, pb::COMP_NODE, 10);
  odd.set_type(static_cast<pb::NodeType>(42));
  write(file, {odd});
  expect("node 7 (\"n7\"): unknown node type 42");
  write(file, {node(1, pb::COMP_NODE, 10, {2}), node(2, pb::COMP_NODE, 10, {1})});
  expect("node 1 (\"n1\"): its dependencies form a cycle");
  write(file, {node(1, pb::COMM_COLL_NODE, 10)});
  expect("node 1 (\"n1\"): a collective without comm_type");
  write(file, {node(3, pb::COMM_SEND_NODE, 10)});
  expect("node 3 (\"n3\"): a send without its peer (comm_dst)");
  write(file, {node(1, pb::COMP_NODE, 10), node(1, pb::COMP_NODE, 10)});
  expect("node 1 (\"n1\"): a second node with this id");
  write(file, {node(1, pb::COMP_NODE, 100'000'000'000ull)});
  expect("a time out of range");
  write_text(dir.file("rank-zero.et"), "");
  CHECK(error_of(dir.path()).find("a Chakra trace is named <prefix>.<rank>.et") != std::string::npos);
}

TEST_CASE("Chakra's own feeder test trace imports and replays") {
  test::ScratchDir dir("chakra-feeder");
  const auto bytes = untar(test::reference("traces/chakra/feeder_tests_trace.tar.gz"), "tests/data/chakra.0.et");
  write_text(dir.file("chakra.0.et"), bytes);
  const auto job = trace::read_chakra_dir(dir.path());
  REQUIRE(job.ranks.size() == 1);
  const auto& t = job.ranks[0];
  // what Chakra's Python tools read from it (3,664 nodes: 3,643 COMP_NODE, 21 COMM_COLL_NODE, of
  // which 14 are the CPU operators around the collectives)
  CHECK(t.nodes.size() == 3664);
  CHECK(t.missing_nodes == 210);
  REQUIRE(job.warnings.size() == 1);
  CHECK(job.warnings[0].find("on 210 nodes the file does not hold were dropped") != std::string::npos);
  const auto report = trace::replay_chakra(job, {});
  CHECK(report.ranks[0].collectives == 7);
  CHECK(report.ranks[0].compute + report.ranks[0].host == 3664 - 7);
  // the replay is at least the longest chain of recorded durations' worth of work on one stream
  CHECK(report.step_time_s > 0.1);
  const auto faster = trace::replay_chakra(job, {.compute_scale = 2});
  CHECK(faster.step_time_s < report.step_time_s);
}

TEST_CASE("kernels costed on a device from their FLOPs and bytes: the roofline by hand") {
  test::ScratchDir dir("chakra-roofline");
  auto gemm = node(1, pb::COMP_NODE, 999);
  int_attr(gemm, "num_ops", 1'000'000'000'000);  // 1e12 FLOPs
  auto norm = node(2, pb::COMP_NODE, 999, {1});
  int_attr(norm, "tensor_size", 1'000'000'000);  // 1 GB moved, no FLOPs
  auto host = node(3, pb::COMP_NODE, 7, {2});
  host.mutable_attr(0)->set_bool_val(true);  // is_cpu_op: keeps its recorded time
  write(dir.file("t.0.et"), {gemm, norm, host});
  spec::DeviceSpec device;
  device.name = "test-device";
  device.peak_flops[spec::Dtype::Bf16] = FlopRate{1e15};
  device.memory_bandwidth = Bandwidth{2e12};
  spec::KernelTuning kernels;  // gemm_ceiling 0.82, sustained_fraction 0.84, hbm_efficiency 0.83
  const auto job = trace::read_chakra_dir(dir.path());
  const auto report = trace::replay_chakra(job, {}, {.device = &device, .kernels = kernels});
  const double gemm_s = 1e12 / (1e15 * 0.82 * 0.84);
  const double norm_s = 1e9 / (2e12 * 0.83);
  CHECK(report.step_time_s == doctest::Approx(gemm_s + norm_s + 7e-6).epsilon(1e-9));
  CHECK(report.costed_compute == 2);
  // twice the peak: the GEMM halves, the memory-bound kernel does not move
  device.peak_flops[spec::Dtype::Bf16] = FlopRate{2e15};
  const auto faster = trace::replay_chakra(job, {}, {.device = &device, .kernels = kernels});
  CHECK(faster.step_time_s == doctest::Approx(gemm_s / 2 + norm_s + 7e-6).epsilon(1e-9));
}
