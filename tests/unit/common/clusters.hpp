#pragma once
// Small clusters built in code, for topology and cost tests.
#include <nlohmann/json.hpp>

#include "trainsim/spec/cluster_spec.hpp"

namespace trainsim::test {

// DGX-A100-like nodes on a leaf/spine fabric; `extra` is merged into "network".
inline spec::ClusterSpec fat_tree_cluster(int nodes, int leaf_radix, bool rail_optimized, int tiers,
                                          nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json j = {
      {"name", "test-fat-tree"},
      {"device",
       {{"name", "A100"},
        {"peak_flops", {{"bf16", "312 TFLOP/s"}, {"fp32", "19.5 TFLOP/s"}}},
        {"memory", "80 GiB"},
        {"memory_bandwidth", "2039 GB/s"},
        {"sms", 108}}},
      {"nodes", nodes},
      {"node",
       {{"devices", 8},
        {"fabric", {{"kind", "nvswitch"}, {"bandwidth", "300 GB/s"}, {"latency", "0.2 us"}, {"efficiency", 0.79}}}}},
      {"network",
       {{"kind", "leaf_spine"},
        {"nics_per_node", 8},
        {"nic_bandwidth", "200 Gb/s"},
        {"leaf_radix", leaf_radix},
        {"tiers", tiers},
        {"rail_optimized", rail_optimized},
        {"latency", "5 us"},
        {"switch_latency", "130 ns"},
        {"efficiency", 0.96}}}};
  for (const auto& [k, v] : extra.items()) j["network"][k] = v;
  return spec::read_cluster_spec(j, "test");
}

// A 275 TFLOP/s TPU-like chip.
inline nlohmann::json tpu_device() {
  return {{"name", "TPU"},
          {"peak_flops", {{"bf16", "275 TFLOP/s"}}},
          {"memory", "32 GiB"},
          {"memory_bandwidth", "1200 GB/s"},
          {"sms", 8}};
}

inline spec::ClusterSpec torus_cluster(std::vector<int> dims, bool wraparound) {
  nlohmann::json j = {{"name", "test-torus"},
                      {"device", tpu_device()},
                      {"network",
                       {{"kind", "torus"},
                        {"dims", dims},
                        {"link_bandwidth", "50 GB/s"},
                        {"wraparound", wraparound},
                        {"latency", "2 us"},
                        {"efficiency", 0.9}}}};
  return spec::read_cluster_spec(j, "test");
}

// `slices` tori of `dims` chips (50 GB/s ICI links at 0.9, 2 us a hop), joined over hosts of 4 chips
// with two 100 Gb/s NICs each (0.9, 20 us NIC to NIC).
inline spec::ClusterSpec multislice_cluster(std::vector<int> dims, int slices) {
  nlohmann::json j = {{"name", "test-multislice"},
                      {"device", tpu_device()},
                      {"network",
                       {{"kind", "torus"},
                        {"dims", dims},
                        {"link_bandwidth", "50 GB/s"},
                        {"latency", "2 us"},
                        {"efficiency", 0.9},
                        {"slices", slices},
                        {"dcn",
                         {{"chips_per_host", 4},
                          {"nics_per_host", 2},
                          {"nic_bandwidth", "100 Gb/s"},
                          {"latency", "20 us"},
                          {"efficiency", 0.9}}}}}};
  return spec::read_cluster_spec(j, "test");
}

}  // namespace trainsim::test
