#pragma once
// How the job is parallelised (docs/cli.md "Strategy"): a JSON file or an inline
// "tp=8,pp=8,dp=16,zero=1,..." list, read by the same reader.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/spec/framework.hpp"
#include "trainsim/spec/pipeline_layout.hpp"

namespace trainsim::spec {

enum class Schedule { GPipe, OneFOneB, Interleaved, ZbH1, DualPipeV };
// What the backward recomputes instead of keeping (docs/model.md "Checkpointing policies"):
// nothing; Megatron's selective recomputation of `recompute_modules` (the attention core by
// default); every layer's whole forward (full, per block); TorchTitan's per-op policy (op: the
// outputs of every other matmul and of attention kept, the rest recomputed).
enum class Recompute { None, Selective, Full, Op, Dots };
// Megatron-Core's --recompute-modules (megatron/core/transformer/transformer_config.py).
enum class RecomputeModule { CoreAttn, Layernorm, Mlp, Moe, MoeAct, SharedExperts, MlaUpProj };
// Megatron-LM's --recompute-method with --recompute-num-layers N: the first N layers of each chunk
// recomputed (block), or every layer in groups of N, each group's input kept (uniform).
enum class RecomputeMethod { Block, Uniform };
// Fused attention kernels (causal half computed, scores never stored): FlashAttention-2 ("flash",
// PyTorch's SDPA), FlashAttention-3 (Hopper), cuDNN fused attention (Transformer Engine's default
// on Hopper); or the unfused softmax(Q·Kᵀ)·V of Megatron-LM before them (batched GEMMs and
// memory-bound softmax over a·s²).
// FlashAttention v1 ("flash1", flash-attn 1.x: llm-foundry's attn_impl "flash" until 2024) and its
// Triton port (flash_attn_triton, llm-foundry's default attn_impl "triton" through 2023) at rates of its
// own (kernels.triton_*, fitted on llm-foundry's steps: docs/model.md "Attention kernels of 2023").
enum class AttentionImpl { Flash, Flash3, Cudnn, Unfused, Flash1, Triton };
inline bool is_fused(AttentionImpl a) {
  return a != AttentionImpl::Unfused;
}
// How context-parallel ranks get the keys and values of the other sequence chunks: one all-gather
// before attention (Llama 3) or ring attention, K/V blocks passed around the ring while each block's
// attention computes (Liu et al. 2023).
enum class CpComm { AllGather, Ring };
// Process-group dimensions in rank order, innermost first (Megatron: tp, cp, dp, pp).
enum class ParallelDim { Tp, Cp, Ep, Dp, Pp };

// Keys a framework preset filled in ("key", "value"), for the report. Not part of a strategy's
// identity: two strategies with the same values are equal however their keys were given.
struct AssumedKeys {
  std::vector<std::pair<std::string, std::string>> keys;
  bool contains(std::string_view key) const;
  friend bool operator==(const AssumedKeys&, const AssumedKeys&) { return true; }
};

// Keys the strategy gave that a named framework preset would have set otherwise: the given value
// wins; the report says so, with the preset's value beside it.
struct PresetOverride {
  std::string key;
  std::string given;
  std::string preset;
};
struct PresetOverrides {
  std::vector<PresetOverride> keys;
  friend bool operator==(const PresetOverrides&, const PresetOverrides&) { return true; }
};

struct StrategySpec {
  int tp = 1;
  bool sp = false;
  int pp = 1;
  int vpp = 1;
  int cp = 1;
  CpComm cp_comm = CpComm::AllGather;
  int ep = 1;
  // Expert tensor parallelism: absent, the experts split over the tp group as the dense layers do;
  // 1 with tp > 1, Megatron-Core's MoE parallel folding: experts whole, the expert-parallel group
  // folded over the tensor-parallel ranks (ep a multiple of tp, ep/tp of the data-parallel ones).
  std::optional<int> etp;
  // The shared experts compute while the routed tokens are dispatched (Megatron-LM's
  // --moe-shared-expert-overlap) instead of after the combine.
  bool ep_overlap = false;
  // How routed tokens travel to their experts and back (`dispatcher`): `alltoall` (Megatron-Core's
  // --moe-token-dispatcher-type alltoall: every routed copy straight to its expert's rank) or
  // `deepep` (the flex dispatcher with DeepEP or HybridEP, --moe-flex-dispatcher-backend: a token
  // crosses the network once per scale-up domain that holds one of its experts, to the peer with its
  // own local rank, which forwards the copies over NVLink; docs/model.md "Mixture of experts").
  bool deepep_dispatch = false;
  // Combined 1F1B (Megatron-Core's --overlap-moe-expert-parallel-comm): a forward and a backward
  // pass of adjacent micro-batches run together, each one's dispatch and combine all-to-alls beside
  // the other's compute.
  bool overlap_moe_comm = false;
  std::optional<std::int64_t> dp;  // derived from the device count when absent
  int zero = 0;
  // ZeRO shards over groups of this many of the dp·cp ranks and replicates across the groups (HSDP,
  // FSDP's hybrid sharding); absent: one group of all dp·cp ranks.
  std::optional<std::int64_t> zero_group;
  std::int64_t mb = 1;
  Schedule schedule = Schedule::OneFOneB;
  Recompute recompute = Recompute::None;
  // With recompute=full: recompute only the first N layers of each model chunk (Megatron-LM's
  // --recompute-method block --recompute-num-layers N); absent: every layer.
  std::optional<int> recompute_layers;
  RecomputeMethod recompute_method = RecomputeMethod::Block;  // how recompute_layers counts
  // With recompute=full: every n-th layer of each model chunk, the n-th, 2n-th, ... (TorchTitan's
  // layer policy, selective_ac_option = "n"); absent: every layer.
  std::optional<int> recompute_period;
  // With recompute=selective: the parts of each layer recomputed; empty: the attention core
  // (Megatron-Core's default ["core_attn"]).
  std::vector<RecomputeModule> recompute_modules;
  // The first N transformer layers copy what they saved for the backward to pinned host memory after
  // their forward and back before their backward (Megatron-LM --cpu-offloading
  // --cpu-offloading-num-layers N: Transformer Engine's AsyncDoubleBufferGroupOffloadHandler); 0: none.
  int offload_layers = 0;
  // absent: the framework's kernel for the device (resolve_job fills it in)
  std::optional<AttentionImpl> attention;
  std::optional<int> first_stage_layers;
  std::optional<int> last_stage_layers;
  // What each virtual stage holds (Megatron-Core's --pipeline-model-parallel-layout); it sets vpp
  // to its stages ÷ pp when vpp is not given. Absent: the layers split evenly, or by the two above.
  std::optional<PipelineLayout> pipeline_layout;
  std::optional<std::int64_t> gpus;
  // Hosts (trays) of each node (scale-up domain) the job takes, Slurm's --segment on a block
  // topology: the job's devices fill `segment` hosts of each domain, the rest of the domain stays
  // idle; absent: domains filled whole (docs/model.md "Scale-up domains").
  std::optional<int> segment;
  std::vector<ParallelDim> order{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Dp, ParallelDim::Pp};
  // What the framework does (docs/model.md "Frameworks"); a preset sets the keys not given.
  Framework framework = Framework::MegatronCore;
  // TP collectives of sequence parallelism pipelined with the GEMM they feed or drain
  // (Megatron-Core --tp-comm-overlap, TorchTitan AsyncTP); needs sp.
  bool tp_overlap = false;
  std::optional<Dtype> grad_reduce_dtype;  // absent: the training dtype's gradients
  bool overlap_grad_reduce = false;        // data-parallel reductions during the last backward
  bool overlap_param_gather = false;       // ZeRO-1/2 parameter all-gathers during the forward
  // FP8 GEMMs; absent: on (tensorwise) when training.dtype is fp8, else off (resolve_job fills it in)
  std::optional<Fp8Recipe> fp8;
  // Element-wise kernels fused (torch.compile, or the fused kernels Megatron and Transformer Engine
  // ship) or run op by op in eager PyTorch.
  bool compile = true;
  // ZeRO-3/FSDP: free the gathered parameters after each forward and gather them again for the
  // backward (FSDP2's reshard_after_forward); absent: on, off under pipeline parallelism
  // (TorchTitan's default policy). Under a pipeline schedule with it off, parameters stay gathered
  // and gradients unreduced until the last micro-batch (torch.distributed.pipelining).
  std::optional<bool> reshard_after_forward;
  // How the loss over the vocabulary runs (its memory at the head's peak).
  LossImpl loss = LossImpl::VocabParallel;
  // K and V copied to the query heads' count before attention, which saves the copies (TorchTitan's
  // Llama: repeat_kv before SDPA) instead of the kv_heads-wide tensors (Transformer Engine).
  bool repeat_kv = false;
  // The weights kept in FP8 (Megatron's --fp8-param-gather: Transformer Engine's FP8 parameters,
  // all-gathered as such by the distributed optimizer) instead of bf16 beside an FP8 copy: on Hopper
  // 1 byte per parameter plus its FP8 transpose, not 2 plus 2; on Blackwell (fp8_gemm_layouts all,
  // no transpose) 1, not 2 plus 1. Needs an FP8 recipe.
  bool fp8_param_gather = false;
  // Each weight's FP8 transpose (the backward's data-gradient operand where FP8 GEMMs take only the
  // TN layout) kept from its cast to the backward: Transformer Engine's cache (is_first_microbatch),
  // the default. Off: built from the FP8 weight just before each backward data GEMM and freed after
  // it (ROCm Transformer Engine's keep_fp8_weight_transpose_cache=False, Megatron-Core's default
  // there; Megatron's disable_parameter_transpose_cache with FP8 parameters, fp8_param_gather):
  // one weight's transpose at a time instead of the stage's, for a transpose kernel per micro-batch.
  // (Megatron's flag over bf16 weights also recasts them every micro-batch: not modelled.)
  bool fp8_transpose_cache = true;
  // Sequence parallelism's all-gathers of an FP8 GEMM's operand carried in FP8, 1 byte per element:
  // the normalised input before QKV and fc1, and in the backward the output gradient before out_proj's
  // and fc2's data gradients (Transformer Engine quantizes before gather_along_first_dim, every
  // recipe; torchao's Float8ColwiseParallel and Float8RowwiseParallel, tensorwise scaling only). The
  // reduce-scatters carry the GEMMs' bf16 outputs. Absent: on under fp8=tensorwise or blockwise,
  // off under rowwise (TorchTitan's rowwise recipe keeps the plain DTensor styles); fp8_tp_gather_of.
  std::optional<bool> fp8_tp_gather;
  // Under SP the linear layers keep their all-gathered inputs for the backward (PyTorch's DTensor
  // sequence parallelism, TorchTitan) instead of the sequence shard, all-gathered again in the
  // backward (Megatron-LM, Korthikanti et al.).
  bool sp_saves_gathered = false;
  // How kernels are launched; absent: compiled where the framework's compile is torch.compile and
  // compile is on, else eager (launch_of).
  std::optional<LaunchMode> launch;
  // FSDP1's rate limiter (FullyShardedDataParallel(limit_all_gathers=True)): the host blocks before
  // an all-gather until the parameters gathered two units earlier are freed, so at most two units'
  // parameters are gathered at once and the host runs at most that far ahead of the device.
  bool limit_all_gathers = false;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::Pre;
  // How device memory is handed out (`allocator`): `caching` (PyTorch's CUDA caching allocator,
  // which reserves beyond the live tensors: memory.fragmentation of the transient memory and the
  // loss's cached block) or `static` (a compiler assigns every buffer of the step ahead of time,
  // as XLA does: the reserve is the live tensors).
  bool caching_allocator = true;
  // Where the step's live tensors would exceed the device, the compiler rematerialises more of the
  // forward in the backward until they fit (`remat_to_fit`): XLA's HloRematerialization pass, which
  // the TPU compiler runs with the device's memory as its limit (MaxText's default). Modelled as
  // whole layers fully recomputed, the first `remat_layers` of every model chunk, as few as fit.
  // Off, a plan that does not fit does not run (PyTorch raises out-of-memory).
  bool remat_to_fit = false;
  // Resolved from the memory model, not read: the layers per model chunk that remat_to_fit
  // recomputes beyond the checkpointing policy (model::apply_remat_to_fit).
  int remat_layers = 0;
  // ZeRO-3 as PyTorch's FSDP implements it, which sets the memory-bound copies around its
  // collectives (docs/model.md "Frameworks"): 1, FullyShardedDataParallel's FlatParameter (each
  // unit all-gathered into one flat buffer the modules view; the unsharded gradient cast to the
  // reduce dtype and pre-divided before its reduce-scatter); 2, fully_shard's per-parameter
  // DTensors (each all-gather copied out into the parameters on the compute stream; the gradients
  // concatenated into the reduce-scatter input in the reduce dtype).
  int fsdp_version = 2;
  // How ZeRO-3 gathers a unit's parameters and reduce-scatters its gradients (`zero3_gather`):
  // `unit`, one collective per unit and dtype (FSDP1's FlatParameter, FSDP2's foreach all-gather);
  // `module`, one gather per module (a linear layer, a norm) of its tensors, coalesced, and the
  // unit's gradients reduced at once (DeepSpeed's stage 3 since 0.4: fetch_sub_module's
  // all_gather_coalesced); `parameter`, one per parameter tensor, in the module's order (DeepSpeed
  // 0.3's stage 3: partition_parameters.py _allgather_param and _reduce_scatter_gradient).
  Zero3Gather zero3_gather = Zero3Gather::Unit;
  // ZeRO-3's gathers synchronous (`zero3_sync`): the host synchronizes the device before each
  // parameter's all-gather and waits for the gathers of a module before launching it, so no gather
  // overlaps compute and nothing is prefetched (DeepSpeed 0.3: torch.cuda.synchronize() in
  // _allgather_param, comm_stream.synchronize() in _synchronize_communication).
  bool zero3_sync = false;
  // ZeRO-3's collectives through torch.distributed's tensor-list calls (`zero3_list_io`): each
  // all-gather writes, and each reduce-scatter reads, one tensor per rank of the group, which the
  // host slices in Python and PyTorch copies to or from a flat buffer one copy each (ProcessGroupNCCL
  // allgather/reduce_scatter with flatten_for_scatter_gather): the group's size in eager launches
  // per collective (DeepSpeed 0.3; _all_gather_base and reduce_scatter_tensor avoid it).
  bool zero3_list_io = false;
  // Parameter tensors of fewer elements are not partitioned (`zero3_persistence_threshold`): kept
  // whole on every rank, never gathered (DeepSpeed's stage3_param_persistence_threshold, 1e5 since
  // 0.3.13). Their gradients are still reduced.
  std::int64_t zero3_persistence_threshold = 0;
  // Under zero3_sync, a recomputed layer's module keeps its parameters from its recomputation to its
  // backward when fewer elements than this are gathered in between (`zero3_max_reuse_distance`,
  // DeepSpeed's stage3_max_reuse_distance, 1e9); else it is gathered again.
  std::int64_t zero3_max_reuse_distance = 1'000'000'000;
  OptimizerImpl optimizer_impl = OptimizerImpl::Fused;
  // How the backward computes a linear layer's bias gradient (`bias_grad`, models with biases):
  // `separate`, a reduction kernel of its own over the output gradient (PyTorch autograd's addmm
  // backward, Megatron-LM's `grad_output.sum(dim=0)`), or `fused` into the weight-gradient GEMM's
  // epilogue (Transformer Engine: cuBLASLt's BGRADB, or its FP8 cast kernel).
  bool bias_grad_fused = true;
  // How the backward computes a norm's weight gradient (`norm_grad`): `separate`, a kernel of its
  // own that reads the norm's input and output gradient again (PyTorch's native LayerNorm and
  // RMSNorm, Apex's FusedLayerNorm, Inductor's generated reductions), or `fused` into the input-
  // gradient kernel as per-block partial sums (Transformer Engine's normalization kernels).
  bool norm_grad_fused = true;
  AssumedKeys assumed;
  PresetOverrides overrides;  // only where `framework` was given
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
std::string_view framework_name(Framework framework);
std::string_view fp8_recipe_name(Fp8Recipe recipe);
std::string_view loss_name(LossImpl loss);
// The attention kernel a framework runs on a device of `arch` when the strategy does not say.
AttentionImpl framework_attention(Framework framework, DeviceArch arch);
// The attention kernel of a resolved job's strategy.
inline AttentionImpl attention_of(const StrategySpec& s) {
  return s.attention.value_or(AttentionImpl::Flash);
}
// Whether the layer at `index` of its model chunk is recomputed whole: by full recomputation, or by
// the compiler to fit (remat_layers).
inline bool recomputes_layer(const StrategySpec& s, int index) {
  if (index < s.remat_layers) return true;  // the compiler's, to fit (remat_to_fit)
  if (s.recompute != Recompute::Full) return false;
  if (s.recompute_period) return (index + 1) % *s.recompute_period == 0;
  if (s.recompute_method == RecomputeMethod::Uniform) return true;
  return !s.recompute_layers || index < *s.recompute_layers;
}
// Layers per checkpointed group under full recomputation: Megatron's uniform method's N, else 1.
inline int recompute_group(const StrategySpec& s) {
  return s.recompute == Recompute::Full && s.recompute_method == RecomputeMethod::Uniform && s.recompute_layers
             ? std::max(1, *s.recompute_layers)
             : 1;
}
// The modules selective recomputation recomputes (the attention core unless the strategy lists some).
std::vector<RecomputeModule> recompute_modules_of(const StrategySpec& s);
std::string_view recompute_module_name(RecomputeModule module);
inline int expert_tp_of(const StrategySpec& s) {
  return s.etp.value_or(s.tp);
}
// MoE parallel folding: the expert-parallel group spans the tensor-parallel ranks.
inline bool ep_folded(const StrategySpec& s) {
  return s.tp > 1 && expert_tp_of(s) == 1;
}
// The expert-parallel ranks outside the tensor-parallel group (the Ep dimension of the placement).
inline int ep_outer(const StrategySpec& s) {
  return ep_folded(s) ? std::max(1, s.ep / s.tp) : s.ep;
}
LaunchMode launch_of(const StrategySpec& s);
std::string_view launch_name(LaunchMode mode);
std::string_view optimizer_impl_name(OptimizerImpl impl);
std::string_view backward_prefetch_name(BackwardPrefetch prefetch);
std::string_view zero3_gather_name(Zero3Gather gather);
inline bool reshard_after_forward_of(const StrategySpec& s) {
  return s.reshard_after_forward.value_or(s.pp == 1);
}
inline Fp8Recipe fp8_of(const StrategySpec& s) {
  return s.fp8.value_or(Fp8Recipe::Off);
}
inline bool fp8_tp_gather_of(const StrategySpec& s) {
  const auto recipe = fp8_of(s);
  return s.fp8_tp_gather.value_or(recipe == Fp8Recipe::Tensorwise || recipe == Fp8Recipe::Blockwise);
}
std::string_view cp_comm_name(CpComm comm);
std::string_view dispatcher_name(bool deepep);  // `dispatcher`: alltoall or deepep
std::string_view parallel_dim_name(ParallelDim dim);
std::string order_text(const std::vector<ParallelDim>& order);

}  // namespace trainsim::spec
