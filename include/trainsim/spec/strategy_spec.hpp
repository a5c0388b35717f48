#pragma once
// How the job is parallelised (docs/cli.md "Strategy"): a JSON file or an inline
// "tp=8,pp=8,dp=16,zero=1,..." list, read by the same reader.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trainsim::spec {

enum class Schedule { GPipe, OneFOneB, Interleaved, ZbH1 };
enum class Recompute { None, Selective, Full };
// Fused attention kernels (causal half computed, scores never stored): FlashAttention-2 ("flash",
// PyTorch's SDPA), FlashAttention-3 (Hopper), cuDNN fused attention (Transformer Engine's default
// on Hopper); or the unfused softmax(Q·Kᵀ)·V of Megatron-LM before them (batched GEMMs and
// memory-bound softmax over a·s²).
enum class AttentionImpl { Flash, Flash3, Cudnn, Unfused };
inline bool is_fused(AttentionImpl a) {
  return a != AttentionImpl::Unfused;
}
// How context-parallel ranks get the keys and values of the other sequence chunks: one all-gather
// before attention (Llama 3) or ring attention, K/V blocks passed around the ring while each block's
// attention computes (Liu et al. 2023).
enum class CpComm { AllGather, Ring };
// Process-group dimensions in rank order, innermost first (Megatron: tp, cp, dp, pp).
enum class ParallelDim { Tp, Cp, Ep, Dp, Pp };

struct StrategySpec {
  int tp = 1;
  bool sp = false;
  int pp = 1;
  int vpp = 1;
  int cp = 1;
  CpComm cp_comm = CpComm::AllGather;
  int ep = 1;
  // The shared experts compute while the routed tokens are dispatched (Megatron-LM's
  // --moe-shared-expert-overlap) instead of after the combine.
  bool ep_overlap = false;
  std::optional<std::int64_t> dp;  // derived from the device count when absent
  int zero = 0;
  std::int64_t mb = 1;
  Schedule schedule = Schedule::OneFOneB;
  Recompute recompute = Recompute::None;
  AttentionImpl attention = AttentionImpl::Flash;
  std::optional<int> first_stage_layers;
  std::optional<int> last_stage_layers;
  std::optional<std::int64_t> gpus;
  std::vector<ParallelDim> order{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Dp, ParallelDim::Pp};
  friend bool operator==(const StrategySpec&, const StrategySpec&) = default;
};

StrategySpec read_strategy_spec(const nlohmann::json& json, const std::string& source);
// "tp=8,pp=2,sp=on" -> the JSON object {"tp": 8, "pp": 2, "sp": "on"}; malformed items are SpecErrors.
nlohmann::json parse_inline_strategy(std::string_view text, const std::string& source);
// A path to a JSON file, or an inline list when the argument contains '=' and is not a file.
StrategySpec load_strategy_spec(const std::string& argument, std::string& source);

// The inline list that reads back as `strategy` ("tp=8,sp=on,pp=8,dp=16,zero=1,mb=1,..."); keys at
// their defaults are left out where that is unambiguous.
std::string strategy_text(const StrategySpec& strategy);

std::string_view schedule_name(Schedule schedule);
std::string_view recompute_name(Recompute recompute);
std::string_view attention_name(AttentionImpl attention);
std::string_view cp_comm_name(CpComm comm);
std::string_view parallel_dim_name(ParallelDim dim);
std::string order_text(const std::vector<ParallelDim>& order);

}  // namespace trainsim::spec
