#include <algorithm>

#include <doctest/doctest.h>

#include "common/paths.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/reader.hpp"

using namespace trainsim;
using namespace trainsim::spec;
using nlohmann::json;

namespace {

json a100_cluster() {
  return json::parse(R"({
    "name": "t",
    "device": {"name": "A100", "peak_flops": {"bf16": "312 TFLOP/s"}, "memory": "80 GiB",
               "memory_bandwidth": "2039 GB/s", "sms": 108},
    "nodes": 4,
    "node": {"devices": 8, "fabric": {"kind": "nvswitch", "bandwidth": "300 GB/s", "latency": "3 us",
                                     "efficiency": 0.8}},
    "network": {"kind": "leaf_spine", "nics_per_node": 8, "nic_bandwidth": "200 Gb/s", "leaf_radix": 40,
                "latency": "5 us", "switch_latency": "130 ns", "efficiency": 0.96}
  })");
}

std::string error_of(const json& j) {
  try {
    read_cluster_spec(j, "t.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a leaf-spine cluster resolves its units") {
  const auto c = read_cluster_spec(a100_cluster(), "t.json");
  CHECK(c.num_devices() == 32);
  CHECK(c.device.peak_flops.at(Dtype::Bf16).flop_per_s == 312e12);
  CHECK(c.device.memory.count == 80LL << 30);
  CHECK(c.node.fabric.bandwidth.bytes_per_s == 300e9);
  CHECK(c.node.fabric.latency == microseconds(3));
  const auto& net = std::get<LeafSpineNetwork>(c.network);
  CHECK(net.nic_bandwidth.bytes_per_s == 25e9);
  CHECK(net.tiers == 2);  // 32 NICs fit under radix-40 leaves
  CHECK(!net.rail_optimized);
  CHECK(c.warnings.empty());
}

TEST_CASE("a missing SM count is assumed and said") {
  auto j = a100_cluster();
  j["device"].erase("sms");
  const auto c = read_cluster_spec(j, "t.json");
  CHECK(c.device.sms == 108);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0] == "device.sms not given: assumed 108");
}

TEST_CASE("every error of a topology is reported together, sorted by pointer") {
  auto j = a100_cluster();
  j["device"]["memory"] = "80 GiBs";
  j["nodes"] = -3;
  j["network"]["nic_bandwith"] = "200 Gb/s";
  CHECK(error_of(j) ==
        "t.json: /device/memory: unknown unit \"GiBs\" in \"80 GiBs\"; expected one of: B, KB, MB, GB, TB, PB, KiB, "
        "MiB, GiB, TiB, PiB\n"
        "t.json: /network/nic_bandwith: unknown key \"nic_bandwith\" (did you mean \"nic_bandwidth\"?)\n"
        "t.json: /nodes: -3 is out of range; expected an integer in [1, 4194304]");
}

TEST_CASE("absurd sizes are bad input") {
  auto j = a100_cluster();
  j["nodes"] = 1e30;
  CHECK(error_of(j) == "t.json: /nodes: 1e+30 is out of range; expected an integer in [1, 4194304]");
  j["nodes"] = 4194304;
  j["network"]["leaf_radix"] = 1024;
  CHECK(error_of(j) == "t.json: /nodes: 4194304 nodes of 8 devices exceed the supported maximum of 4194304 devices");
}

TEST_CASE("zero bandwidth is rejected, not divided by") {
  auto j = a100_cluster();
  j["node"]["fabric"]["bandwidth"] = 0;
  CHECK(error_of(j) ==
        "t.json: /node/fabric/bandwidth: 0 bytes/s is outside what a device's node fabric bandwidth per direction "
        "can be (10 GB/s to 2 TB/s)");
}

TEST_CASE("a fat tree too small for the cluster is rejected") {
  auto j = a100_cluster();
  j["nodes"] = 200;
  j["network"]["tiers"] = 2;
  CHECK(error_of(j) ==
        "t.json: /network/tiers: 2 tiers of radix-40 switches connect at most 800 NICs; the cluster "
        "has 1600");
}

TEST_CASE("an unknown network kind stops before reading its fields") {
  auto j = a100_cluster();
  j["network"]["kind"] = "fat_tree";
  CHECK(error_of(j) == "t.json: /network/kind: \"fat_tree\" is not valid; expected one of: leaf_spine, torus, none");
}

TEST_CASE("a torus takes its devices from dims") {
  const auto c = read_cluster_spec(json::parse(R"({
    "name": "pod",
    "device": {"name": "TPU", "peak_flops": {"bf16": 275e12}, "memory": "32 GiB", "memory_bandwidth": "1200 GB/s",
               "sms": 8},
    "network": {"kind": "torus", "dims": [4, 4, 8], "link_bandwidth": "50 GB/s", "latency": "2 us"}
  })"),
                                   "pod.json");
  CHECK(c.num_devices() == 128);
  CHECK(std::get<TorusNetwork>(c.network).wraparound == std::vector<bool>{true, true, true});
  CHECK(c.warnings == std::vector<std::string>{"network.efficiency not given: assumed 0.8 (name a link kind of the "
                                                "catalogue to take its measured figure)"});
}

namespace {
json multislice(int slices) {
  auto j = json::parse(R"({
    "name": "slices",
    "device": {"name": "TPU", "peak_flops": {"bf16": 275e12}, "memory": "32 GiB", "memory_bandwidth": "1200 GB/s",
               "sms": 8},
    "network": {"kind": "torus", "dims": [4, 4], "link_bandwidth": "50 GB/s", "latency": "2 us", "efficiency": 0.9,
                "dcn": {"chips_per_host": 4, "nics_per_host": 2, "nic_bandwidth": "100 Gb/s", "latency": "20 us",
                        "efficiency": 0.9}}
  })");
  j["network"]["slices"] = slices;
  return j;
}
}  // namespace

TEST_CASE("slices of a torus joined by the data-centre network") {
  const auto c = read_cluster_spec(multislice(3), "t.json");
  CHECK(c.num_devices() == 48);
  const auto& t = std::get<TorusNetwork>(c.network);
  CHECK(t.slices == 3);
  CHECK(t.slice_devices() == 16);
  REQUIRE(t.dcn);
  CHECK(t.dcn->chips_per_host == 4);
  CHECK(t.dcn->nic_bandwidth.bytes_per_s == doctest::Approx(12.5e9));

  auto j = multislice(2);
  j["network"].erase("dcn");
  CHECK(error_of(j) ==
        "t.json: /network/dcn: missing; 2 slices are joined by the data-centre network: give its NICs, such as "
        "{\"link\": \"dcn-200\", \"chips_per_host\": 8, \"nics_per_host\": 4}");
  j = multislice(2);
  j["network"]["dcn"]["chips_per_host"] = 3;
  CHECK(error_of(j) == "t.json: /network/dcn/chips_per_host: hosts of 3 chips do not divide a slice of 16 chips");
  j = multislice(2);
  j["network"]["dcn"]["link"] = "ici-v5p";
  CHECK(error_of(j).find("/network/dcn/link") != std::string::npos);
  j = multislice(17);
  j["network"]["dims"] = {64, 64, 64};
  CHECK(error_of(j) ==
        "t.json: /network/slices: 17 slices of 262144 chips exceed the supported maximum of 4194304 "
        "devices");
}

TEST_CASE("the slices a TPU pod can form, and which of their dimensions wrap around") {
  const auto slice = [](const std::string& link, json dims, json wraparound = nullptr) {
    json j = {{"name", "s"}, {"device", "tpu-v5p"}, {"network", {{"kind", "torus"}, {"link", link}, {"dims", dims}}}};
    if (!wraparound.is_null()) j["network"]["wraparound"] = wraparound;
    return j;
  };
  const auto wraps = [](const json& j) {
    return std::get<TorusNetwork>(read_cluster_spec(j, test::topology("tpu-v5p-pod")).network).wraparound;
  };
  // v5p: whole 4x4x4 cubes close every ring through the optical switches; part-cube slices are meshes
  CHECK(wraps(slice("ici-v5p", {4, 4, 8})) == std::vector<bool>{true, true, true});
  CHECK(wraps(slice("ici-v5p", {2, 4, 4})) == std::vector<bool>{false, false, false});
  CHECK(wraps(slice("ici-v5p", {16, 24, 16})) == std::vector<bool>{true, true, true});
  const auto error = [](const json& j) {
    try {
      read_cluster_spec(j, "t.json");
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(slice("ici-v5p", {6, 8, 8})) ==
        "t.json: /network/dims: on ici-v5p, a slice larger than one 4x4x4 cube is whole cubes: 6x8x8 is not");
  CHECK(error(slice("ici-v5p", {16, 16, 32})) ==
        "t.json: /network/dims: on ici-v5p, a pod forms slices of at most 16x16x24: 16x16x32 cannot be formed");
  CHECK(error(slice("ici-v5p", {2, 4, 4}, true))
            .find("/network/wraparound: on ici-v5p, a 2x4x4 slice has no "
                  "wraparound links along dimension 0") != std::string::npos);
  // v6e: only an axis of the pod's full 16 wraps; per dimension as the file says, within that
  CHECK(wraps(slice("ici-v6e", {8, 16})) == std::vector<bool>{false, true});
  CHECK(wraps(slice("ici-v6e", {8, 16}, json::array({false, false}))) == std::vector<bool>{false, false});
  CHECK(error(slice("ici-v6e", {8, 16}, json::array({true}))).find("one boolean per dimension (2)") !=
        std::string::npos);
}

TEST_CASE("every shipped topology reads without error") {
  REQUIRE(test::shipped("topologies").size() >= 6);
  for (const auto& path : test::shipped("topologies")) {
    CAPTURE(path);
    const auto c = load_cluster_spec(path);
    CHECK(c.warnings.empty());
    CHECK(c.num_devices() >= 8);
  }
  CHECK(load_cluster_spec(test::topology("dgx-a100-superpod")).num_devices() == 4480);
  CHECK(load_cluster_spec(test::topology("h100-roce-llama3")).num_devices() == 24576);
  CHECK(load_cluster_spec(test::topology("tpu-v4-pod")).num_devices() == 4096);
}

TEST_CASE("a unit slip is an error naming the likely unit; an unusual figure a warning") {
  auto j = a100_cluster();
  j["network"]["nic_bandwidth"] = 400;  // a bare number is bytes per second
  CHECK(error_of(j) == "t.json: /network/nic_bandwidth: 400 bytes/s is outside what a NIC's bandwidth can be "
                       "(1 Gb/s to 3.2 Tb/s): did you mean \"400 Gb/s\"?");
  j["network"]["nic_bandwidth"] = "400 GB/s";  // bytes for bits: 8x too fast, but possible
  const auto c = read_cluster_spec(j, "t.json");
  const auto warned = std::any_of(c.warnings.begin(), c.warnings.end(), [](const std::string& w) {
    return w == "/network/nic_bandwidth: 400 GB/s is unusual for a NIC's bandwidth (usually 10 Gb/s to 800 Gb/s): "
                "did you mean \"400 Gb/s\"?";
  });
  CHECK(warned);
  j["network"]["nic_bandwidth"] = "400 Gb/s";
  const auto fine = read_cluster_spec(j, "t.json");
  CHECK(std::none_of(fine.warnings.begin(), fine.warnings.end(),
                     [](const std::string& w) { return w.find("nic_bandwidth") != std::string::npos; }));
}

TEST_CASE("a what-if topology keeps figures beyond today's hardware, with a warning; zero stays an error") {
  auto j = a100_cluster();
  j["network"]["nic_bandwidth"] = "1000000 GB/s";  // an ideal network, to bound what a better fabric gives
  CHECK(error_of(j) == "t.json: /network/nic_bandwidth: 1000000 GB/s is outside what a NIC's bandwidth can be "
                       "(1 Gb/s to 3.2 Tb/s); a what-if study beyond today's hardware says so with \"what_if\": true "
                       "at the top of the file");
  j["what_if"] = true;
  const auto c = read_cluster_spec(j, "t.json");
  const auto& network = std::get<LeafSpineNetwork>(c.network);
  CHECK(network.nic_bandwidth.bytes_per_s == doctest::Approx(1e15));  // 10^6 GB/s kept as given, not clamped
  REQUIRE(c.warnings.size() == 2);
  CHECK(c.warnings[0] == "t.json: a what-if topology (\"what_if\": true): figures beyond what hardware can be are "
                         "kept as given");
  CHECK(c.warnings[1] == "/network/nic_bandwidth: 1000000 GB/s is outside what a NIC's bandwidth can be (1 Gb/s to "
                         "3.2 Tb/s): kept, the file is a what-if study (\"what_if\": true)");
  // a rate of zero is no study: still an error
  j["network"]["nic_bandwidth"] = "0 Gb/s";
  CHECK(error_of(j).find("0 Gb/s is outside what a NIC's bandwidth can be") != std::string::npos);
  j["what_if"] = "yes";
  CHECK(error_of(j).find("/what_if") != std::string::npos);
}

TEST_CASE("a device's host link: a catalogue link's line rate times its efficiency, or a figure, not both") {
  // devices/links/pcie5.json: 63 GB/s per direction, 0.87 of it in a measured host-to-device copy
  const auto h100 = load_device_file(test::source_path("devices/h100-sxm5-80gb.json"));
  CHECK(h100.host_link == "pcie5");
  REQUIRE(h100.host_bandwidth);
  CHECK(h100.host_bandwidth->bytes_per_s == doctest::Approx(63e9 * 0.87));
  auto j = a100_cluster();
  CHECK_FALSE(read_cluster_spec(j, "t.json").device.host_bandwidth);
  j["device"]["host_bandwidth"] = "25 GB/s";
  CHECK(read_cluster_spec(j, "t.json").device.host_bandwidth->bytes_per_s == 25e9);
  j["device"]["host_link"] = "pcie4";
  CHECK(error_of(j) ==
        "t.json: /device/host_bandwidth: give host_link (a catalogue link) or host_bandwidth (a "
        "figure), not both");
  j["device"].erase("host_bandwidth");
  j["device"]["host_link"] = "pcie9";
  CHECK(doctest::String(error_of(j).c_str()) == doctest::Contains("/device/host_link: unknown link \"pcie9\""));
}
