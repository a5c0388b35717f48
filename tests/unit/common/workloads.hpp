#pragma once
// Small workloads built in code, for fast lowering and engine tests.
#include <nlohmann/json.hpp>

#include "trainsim/spec/workload_spec.hpp"

namespace trainsim::test {

inline spec::WorkloadSpec tiny_gpt(int layers = 8, std::int64_t global_batch = 32, std::int64_t seq = 512) {
  const nlohmann::json j = {
      {"name", "tiny-gpt"},
      {"model",
       {{"kind", "transformer"},
        {"layers", layers},
        {"hidden", 1024},
        {"heads", 16},
        {"ffn_hidden", 4096},
        {"vocab", 32000},
        {"mlp", "gelu"}}},
      {"training", {{"seq_len", seq}, {"global_batch", global_batch}, {"dtype", "bf16"}, {"optimizer", "adam"}}}};
  return spec::read_workload_spec(j, "tiny-gpt");
}

// GPT-3's layer shape (h = 12288, 96 heads) with fewer layers.
inline spec::WorkloadSpec gpt3_layers(int layers, std::int64_t global_batch) {
  const nlohmann::json j = {
      {"name", "gpt3-layers"},
      {"model",
       {{"kind", "transformer"},
        {"layers", layers},
        {"hidden", 12288},
        {"heads", 96},
        {"ffn_hidden", 49152},
        {"vocab", 51200},
        {"mlp", "gelu"}}},
      {"training", {{"seq_len", 2048}, {"global_batch", global_batch}, {"dtype", "bf16"}, {"optimizer", "adam"}}}};
  return spec::read_workload_spec(j, "gpt3-layers");
}

inline spec::WorkloadSpec tiny_moe() {
  const nlohmann::json j = {
      {"name", "tiny-moe"},
      {"model",
       {{"kind", "transformer"},
        {"layers", 4},
        {"hidden", 1024},
        {"heads", 16},
        {"kv_heads", 4},
        {"ffn_hidden", 4096},
        {"vocab", 32000},
        {"mlp", "swiglu"},
        {"bias", false},
        {"norm", "rmsnorm"},
        {"position", "rope"},
        {"tied_embeddings", false},
        {"dropout", false},
        {"moe", {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 2048}}}}},
      {"training", {{"seq_len", 1024}, {"global_batch", 32}, {"dtype", "bf16"}, {"optimizer", "adam"}}}};
  return spec::read_workload_spec(j, "tiny-moe");
}

}  // namespace trainsim::test
