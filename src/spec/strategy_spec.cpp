#include "trainsim/spec/strategy_spec.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr std::array<Choice<Schedule>, 5> kSchedules{{{"gpipe", Schedule::GPipe},
                                                      {"1f1b", Schedule::OneFOneB},
                                                      {"interleaved", Schedule::Interleaved},
                                                      {"zb-h1", Schedule::ZbH1},
                                                      {"dualpipev", Schedule::DualPipeV}}};
constexpr std::array<Choice<Recompute>, 5> kRecompute{{{"none", Recompute::None},
                                                       {"selective", Recompute::Selective},
                                                       {"full", Recompute::Full},
                                                       {"op", Recompute::Op},
                                                       {"dots", Recompute::Dots}}};
// Megatron-Core's names (transformer_config.py recompute_modules)
constexpr std::array<Choice<RecomputeModule>, 7> kRecomputeModules{{{"core_attn", RecomputeModule::CoreAttn},
                                                                    {"layernorm", RecomputeModule::Layernorm},
                                                                    {"mlp", RecomputeModule::Mlp},
                                                                    {"moe", RecomputeModule::Moe},
                                                                    {"moe_act", RecomputeModule::MoeAct},
                                                                    {"shared_experts", RecomputeModule::SharedExperts},
                                                                    {"mla_up_proj", RecomputeModule::MlaUpProj}}};
constexpr std::array<Choice<RecomputeMethod>, 2> kRecomputeMethods{
    {{"block", RecomputeMethod::Block}, {"uniform", RecomputeMethod::Uniform}}};
constexpr std::array<Choice<AttentionImpl>, 7> kAttention{{{"flash", AttentionImpl::Flash},
                                                           {"flash3", AttentionImpl::Flash3},
                                                           {"cudnn", AttentionImpl::Cudnn},
                                                           {"unfused", AttentionImpl::Unfused},
                                                           {"flash1", AttentionImpl::Flash1},
                                                           {"triton", AttentionImpl::Triton},
                                                           {"flash2", AttentionImpl::Flash}}};
constexpr std::array<Choice<OptimizerImpl>, 3> kOptimizerImpls{
    {{"fused", OptimizerImpl::Fused}, {"foreach", OptimizerImpl::Foreach}, {"for_loop", OptimizerImpl::ForLoop}}};
constexpr std::array<Choice<BackwardPrefetch>, 3> kBackwardPrefetch{
    {{"pre", BackwardPrefetch::Pre}, {"post", BackwardPrefetch::Post}, {"none", BackwardPrefetch::None}}};
constexpr std::array<Choice<Zero3Gather>, 3> kZero3Gather{
    {{"unit", Zero3Gather::Unit}, {"module", Zero3Gather::Module}, {"parameter", Zero3Gather::Parameter}}};
constexpr std::array<Choice<LaunchMode>, 3> kLaunch{
    {{"eager", LaunchMode::Eager}, {"compiled", LaunchMode::Compiled}, {"cuda_graphs", LaunchMode::CudaGraphs}}};
constexpr std::array<Choice<CpComm>, 2> kCpComm{{{"all_gather", CpComm::AllGather}, {"ring", CpComm::Ring}}};
constexpr std::array<Choice<bool>, 2> kAllocators{{{"caching", true}, {"static", false}}};
constexpr std::array<Choice<bool>, 2> kGradKernels{{{"separate", false}, {"fused", true}}};
constexpr std::array<Choice<bool>, 2> kDispatchers{{{"alltoall", false}, {"deepep", true}}};
constexpr std::array<Choice<bool>, 4> kSwitch{{{"on", true}, {"off", false}, {"true", true}, {"false", false}}};
constexpr std::array<Choice<ParallelDim>, 5> kDims{{{"tp", ParallelDim::Tp},
                                                    {"cp", ParallelDim::Cp},
                                                    {"ep", ParallelDim::Ep},
                                                    {"dp", ParallelDim::Dp},
                                                    {"pp", ParallelDim::Pp}}};

constexpr std::array<Choice<Framework>, 8> kFrameworks{{{"megatron-core", Framework::MegatronCore},
                                                        {"megatron-2021", Framework::Megatron2021},
                                                        {"nemo", Framework::Nemo},
                                                        {"torchtitan", Framework::TorchTitan},
                                                        {"deepspeed", Framework::DeepSpeed},
                                                        {"deepspeed-2021", Framework::DeepSpeed2021},
                                                        {"composer", Framework::Composer},
                                                        {"maxtext", Framework::MaxText}}};
// (names first, then aliases: a value's name is its first spelling)
constexpr std::array<Choice<Fp8Recipe>, 5> kFp8{{{"off", Fp8Recipe::Off},
                                                 {"tensorwise", Fp8Recipe::Tensorwise},
                                                 {"rowwise", Fp8Recipe::Rowwise},
                                                 {"blockwise", Fp8Recipe::Blockwise},
                                                 {"on", Fp8Recipe::Tensorwise}}};
constexpr std::array<Choice<LossImpl>, 6> kLoss{{{"vocab_parallel", LossImpl::VocabParallel},
                                                 {"upcast", LossImpl::Upcast},
                                                 {"fused", LossImpl::Fused},
                                                 {"fused_inplace", LossImpl::FusedInplace},
                                                 {"loss_parallel", LossImpl::LossParallel},
                                                 {"fused_linear", LossImpl::FusedLinear}}};
constexpr std::array<Choice<Dtype>, 3> kReduceDtypes{
    {{"fp32", Dtype::Fp32}, {"bf16", Dtype::Bf16}, {"fp16", Dtype::Fp16}}};

constexpr IntRange kDegree{1, 1 << 20};

std::string_view on_off(bool value) {
  return value ? "on" : "off";
}

std::string reduce_dtype_text(const std::optional<Dtype>& dtype) {
  return dtype ? std::string(dtype_name(*dtype)) : std::string("training");
}

bool read_switch(Reader& r, std::string_view key, bool fallback) {
  const auto* value = r.value(key);
  if (!value) return fallback;
  // Accept JSON booleans as well as the inline spelling "on"/"off".
  if (value->is_boolean()) return value->get<bool>();
  const auto parsed = r.optional_choice<bool>(key, kSwitch);
  return parsed.value_or(fallback);
}

std::vector<ParallelDim> read_order(Reader& r, std::vector<ParallelDim> fallback) {
  if (!r.has("order")) return fallback;
  const std::string text = r.string("order");
  std::vector<ParallelDim> order;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('-', start), text.size());
    const std::string_view token(text.data() + start, end - start);
    const auto it = std::find_if(kDims.begin(), kDims.end(), [&](const auto& c) { return c.name == token; });
    if (it == kDims.end()) {
      r.error_at("order", fmt::format("\"{}\" is not a parallel dimension; expected a permutation such as "
                                      "\"tp-cp-dp-pp\" (ep may be added)",
                                      token));
      return fallback;
    }
    if (std::find(order.begin(), order.end(), it->value) != order.end()) {
      r.error_at("order", fmt::format("\"{}\" appears twice in \"{}\"", token, text));
      return fallback;
    }
    order.push_back(it->value);
    start = end + 1;
  }
  for (const auto dim : {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Dp, ParallelDim::Pp}) {
    if (std::find(order.begin(), order.end(), dim) == order.end()) {
      r.error_at("order", fmt::format("\"{}\" lacks {}; expected a permutation of tp, cp, dp, pp (and optionally ep)",
                                      text, parallel_dim_name(dim)));
      return fallback;
    }
  }
  return order;
}

std::string_view grad_kernel_text(bool fused) {
  return choice_name<bool>(kGradKernels, fused);
}

// Each key a preset sets, with its value in `s` and the preset's, as the strategy writes them.
struct KeyTexts {
  std::string_view key;
  std::string given;
  std::string preset;
};
std::vector<KeyTexts> preset_key_texts(const StrategySpec& s, const FrameworkPreset& p) {
  const auto text = [](auto value) { return std::string(value); };
  return {
      {"zero", std::to_string(s.zero), std::to_string(p.zero)},
      {"tp_overlap", text(on_off(s.tp_overlap)), text(on_off(p.tp_overlap))},
      {"grad_reduce_dtype", reduce_dtype_text(s.grad_reduce_dtype), reduce_dtype_text(p.grad_reduce_dtype)},
      {"overlap_grad_reduce", text(on_off(s.overlap_grad_reduce)), text(on_off(p.overlap_grad_reduce_at(s.zero)))},
      {"overlap_param_gather", text(on_off(s.overlap_param_gather)), text(on_off(p.overlap_param_gather))},
      {"compile", text(on_off(s.compile)), text(on_off(p.compile))},
      {"loss", text(loss_name(s.loss)), text(loss_name(p.loss_at(s.tp)))},
      {"repeat_kv", text(on_off(s.repeat_kv)), text(on_off(p.repeat_kv))},
      {"fp8_param_gather", text(on_off(s.fp8_param_gather)), text(on_off(p.fp8_param_gather))},
      {"sp_saves_gathered", text(on_off(s.sp_saves_gathered)), text(on_off(p.sp_saves_gathered))},
      {"limit_all_gathers", text(on_off(s.limit_all_gathers)), text(on_off(p.limit_all_gathers))},
      {"backward_prefetch", text(backward_prefetch_name(s.backward_prefetch)),
       text(backward_prefetch_name(p.backward_prefetch))},
      {"allocator", s.caching_allocator ? "caching" : "static", p.caching_allocator ? "caching" : "static"},
      {"remat_to_fit", text(on_off(s.remat_to_fit)), text(on_off(p.remat_to_fit))},
      {"fsdp_version", std::to_string(s.fsdp_version), std::to_string(p.fsdp_version)},
      {"zero3_gather", text(zero3_gather_name(s.zero3_gather)), text(zero3_gather_name(p.zero3_gather))},
      {"zero3_sync", text(on_off(s.zero3_sync)), text(on_off(p.zero3_sync))},
      {"zero3_list_io", text(on_off(s.zero3_list_io)), text(on_off(p.zero3_list_io))},
      {"zero3_persistence_threshold", std::to_string(s.zero3_persistence_threshold),
       std::to_string(p.zero3_persistence_threshold)},
      {"zero3_max_reuse_distance", std::to_string(s.zero3_max_reuse_distance),
       std::to_string(p.zero3_max_reuse_distance)},
      {"optimizer_impl", text(optimizer_impl_name(s.optimizer_impl)), text(optimizer_impl_name(p.optimizer_impl))},
      {"bias_grad", text(grad_kernel_text(s.bias_grad_fused)), text(grad_kernel_text(p.bias_grad_fused))},
      {"norm_grad", text(grad_kernel_text(s.norm_grad_fused)), text(grad_kernel_text(p.norm_grad_fused))},
  };
}

// DeepSpeed's ways with ZeRO-3 (StrategySpec::zero3_gather and the keys after it): given, or the
// preset's (listed as assumed under ZeRO-3 where they are not PyTorch FSDP's).
template <typename Assume>
void read_zero3_keys(Reader& r, StrategySpec& s, const FrameworkPreset& preset, const Assume& assume) {
  constexpr std::array<std::string_view, 5> kKeys{"zero3_gather", "zero3_sync", "zero3_list_io",
                                                  "zero3_persistence_threshold", "zero3_max_reuse_distance"};
  for (const auto key : kKeys)
    if (r.has(key) && s.zero != 3)
      r.error_at(key, fmt::format("applies under zero=3 (it sets how ZeRO-3 gathers parameters); zero is {}", s.zero));
  s.zero3_gather = r.choice_or<Zero3Gather>("zero3_gather", preset.zero3_gather, kZero3Gather);
  s.zero3_sync = read_switch(r, "zero3_sync", preset.zero3_sync);
  s.zero3_list_io = read_switch(r, "zero3_list_io", preset.zero3_list_io);
  s.zero3_persistence_threshold =
      r.integer_or("zero3_persistence_threshold", preset.zero3_persistence_threshold, {0, std::int64_t{1} << 40});
  s.zero3_max_reuse_distance =
      r.integer_or("zero3_max_reuse_distance", preset.zero3_max_reuse_distance, {0, std::int64_t{1} << 40});
  if (s.zero != 3) return;
  if (!r.has("zero3_gather") && s.zero3_gather != Zero3Gather::Unit)
    assume("zero3_gather", zero3_gather_name(s.zero3_gather));
  if (!r.has("zero3_sync") && s.zero3_sync) assume("zero3_sync", on_off(true));
  if (!r.has("zero3_list_io") && s.zero3_list_io) assume("zero3_list_io", on_off(true));
  if (!r.has("zero3_persistence_threshold") && s.zero3_persistence_threshold > 0)
    assume("zero3_persistence_threshold", std::to_string(s.zero3_persistence_threshold));
}

// The framework keys: given ones as given, the others from the framework's preset (recorded as
// assumed); given ones that differ from a named preset's are recorded as overrides.
void read_framework_keys(Reader& r, StrategySpec& s) {
  s.framework = r.choice_or<Framework>("framework", Framework::MegatronCore, kFrameworks);
  const auto& preset = framework_preset(s.framework);
  const auto assume = [&](std::string_view key, std::string_view value) {
    s.assumed.keys.emplace_back(std::string(key), std::string(value));
  };
  // an on/off key as given, or the preset's value, then listed as assumed when `listed`
  const auto preset_switch = [&](std::string_view key, bool preset_value, bool listed = true) {
    const bool value = read_switch(r, key, preset_value);
    if (!r.has(key) && listed) assume(key, on_off(value));
    return value;
  };
  if (r.has("zero")) {
    s.zero = static_cast<int>(r.integer_or("zero", 0, {0, 3}));
  } else {
    s.zero = preset.zero;
    if (preset.zero != 0) assume("zero", std::to_string(preset.zero));
  }
  s.zero_group = r.optional_integer("zero_group", {1, std::int64_t{1} << 22});
  s.tp_overlap = preset_switch("tp_overlap", preset.tp_overlap);
  if (r.has("grad_reduce_dtype")) {
    s.grad_reduce_dtype = r.optional_choice<Dtype>("grad_reduce_dtype", kReduceDtypes);
  } else {
    s.grad_reduce_dtype = preset.grad_reduce_dtype;
    assume("grad_reduce_dtype", reduce_dtype_text(s.grad_reduce_dtype));
  }
  s.overlap_grad_reduce = preset_switch("overlap_grad_reduce", preset.overlap_grad_reduce_at(s.zero));
  s.overlap_param_gather = preset_switch("overlap_param_gather", preset.overlap_param_gather);
  s.fp8 = r.optional_choice<Fp8Recipe>("fp8", kFp8);
  if (r.has("reshard_after_forward")) s.reshard_after_forward = read_switch(r, "reshard_after_forward", true);
  // (fused kernels are the norm: only an eager preset is worth listing)
  s.compile = preset_switch("compile", preset.compile, !preset.compile);
  s.loss = r.choice_or<LossImpl>("loss", preset.loss_at(s.tp), kLoss);
  if (!r.has("loss")) assume("loss", loss_name(s.loss));
  s.repeat_kv = preset_switch("repeat_kv", preset.repeat_kv, preset.repeat_kv);
  s.fp8_param_gather = read_switch(r, "fp8_param_gather", preset.fp8_param_gather);
  s.fp8_transpose_cache = read_switch(r, "fp8_transpose_cache", true);
  if (r.has("fp8_tp_gather")) s.fp8_tp_gather = read_switch(r, "fp8_tp_gather", true);
  s.sp_saves_gathered = read_switch(r, "sp_saves_gathered", preset.sp_saves_gathered);
  s.launch = r.optional_choice<LaunchMode>("launch", kLaunch);
  s.limit_all_gathers = preset_switch("limit_all_gathers", preset.limit_all_gathers, preset.limit_all_gathers);
  s.backward_prefetch = r.choice_or<BackwardPrefetch>("backward_prefetch", preset.backward_prefetch, kBackwardPrefetch);
  if (!r.has("backward_prefetch") && s.zero == 3 && preset.backward_prefetch != BackwardPrefetch::Pre)
    assume("backward_prefetch", backward_prefetch_name(s.backward_prefetch));
  if (r.has("backward_prefetch") && s.zero != 3)
    r.error_at("backward_prefetch",
               fmt::format("applies under zero=3 (it times FSDP's parameter gathers); zero is {}", s.zero));
  s.caching_allocator = r.choice_or<bool>("allocator", preset.caching_allocator, kAllocators);
  if (!r.has("allocator") && !preset.caching_allocator) assume("allocator", "static");
  s.remat_to_fit = read_switch(r, "remat_to_fit", preset.remat_to_fit);
  s.fsdp_version = static_cast<int>(r.integer_or("fsdp_version", preset.fsdp_version, {1, 2}));
  if (!r.has("fsdp_version") && s.zero == 3) assume("fsdp_version", std::to_string(s.fsdp_version));
  read_zero3_keys(r, s, preset, assume);
  s.optimizer_impl = r.choice_or<OptimizerImpl>("optimizer_impl", preset.optimizer_impl, kOptimizerImpls);
  if (!r.has("optimizer_impl") && preset.optimizer_impl != OptimizerImpl::Fused)
    assume("optimizer_impl", optimizer_impl_name(s.optimizer_impl));
  s.bias_grad_fused = r.choice_or<bool>("bias_grad", preset.bias_grad_fused, kGradKernels);
  if (!r.has("bias_grad") && !preset.bias_grad_fused) assume("bias_grad", grad_kernel_text(false));
  s.norm_grad_fused = r.choice_or<bool>("norm_grad", preset.norm_grad_fused, kGradKernels);
  if (!r.has("norm_grad") && !preset.norm_grad_fused) assume("norm_grad", grad_kernel_text(false));
  if (!r.has("framework")) return;
  for (auto& [key, given, by_preset] : preset_key_texts(s, preset))
    if (r.has(key) && given != by_preset)
      s.overrides.keys.push_back({.key = std::string(key), .given = std::move(given), .preset = std::move(by_preset)});
}

// "core_attn+mlp": each a Megatron-Core module name, none twice.
std::vector<RecomputeModule> read_recompute_modules(Reader& r) {
  std::vector<RecomputeModule> modules;
  if (!r.has("recompute_modules")) return modules;
  const std::string text = r.string("recompute_modules");
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('+', start), text.size());
    const std::string_view token(text.data() + start, end - start);
    const auto it = std::find_if(kRecomputeModules.begin(), kRecomputeModules.end(),
                                 [&](const auto& c) { return c.name == token; });
    if (it == kRecomputeModules.end()) {
      std::string names;
      for (const auto& c : kRecomputeModules) names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
      r.error_at("recompute_modules",
                 fmt::format("\"{}\" is not a module selective recomputation knows; expected names joined by '+' "
                             "from: {}",
                             token, names));
      return {};
    }
    if (std::find(modules.begin(), modules.end(), it->value) != modules.end()) {
      r.error_at("recompute_modules", fmt::format("\"{}\" appears twice in \"{}\"", token, text));
      return {};
    }
    modules.push_back(it->value);
    start = end + 1;
  }
  return modules;
}

// The JSON value an inline "key=value" item stands for: an integer when it is one, else a string.
nlohmann::json inline_value(std::string_view text) {
  std::int64_t integer = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (ec == std::errc() && end == text.data() + text.size()) return integer;
  if (ec == std::errc::result_out_of_range) {
    // Keep the magnitude so that the range check can report it.
    double value = 0;
    const auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (dec == std::errc() && dend == text.data() + text.size()) return value;
  }
  return std::string(text);
}

}  // namespace

std::string_view schedule_name(Schedule schedule) {
  return choice_name<Schedule>(kSchedules, schedule);
}
std::string_view recompute_name(Recompute recompute) {
  return choice_name<Recompute>(kRecompute, recompute);
}
std::string_view recompute_module_name(RecomputeModule module) {
  return choice_name<RecomputeModule>(kRecomputeModules, module);
}
std::vector<RecomputeModule> recompute_modules_of(const StrategySpec& s) {
  if (s.recompute_modules.empty()) return {RecomputeModule::CoreAttn};
  return s.recompute_modules;
}
std::string_view attention_name(AttentionImpl attention) {
  return choice_name<AttentionImpl>(kAttention, attention);
}
std::string_view framework_name(Framework framework) {
  return choice_name<Framework>(kFrameworks, framework);
}
std::string_view fp8_recipe_name(Fp8Recipe recipe) {
  return choice_name<Fp8Recipe>(kFp8, recipe);
}
std::string_view loss_name(LossImpl loss) {
  return choice_name<LossImpl>(kLoss, loss);
}
std::string_view optimizer_impl_name(OptimizerImpl impl) {
  return choice_name<OptimizerImpl>(kOptimizerImpls, impl);
}
std::string_view backward_prefetch_name(BackwardPrefetch prefetch) {
  return choice_name<BackwardPrefetch>(kBackwardPrefetch, prefetch);
}
std::string_view zero3_gather_name(Zero3Gather gather) {
  return choice_name<Zero3Gather>(kZero3Gather, gather);
}
std::string_view launch_name(LaunchMode mode) {
  return choice_name<LaunchMode>(kLaunch, mode);
}
LaunchMode launch_of(const StrategySpec& s) {
  if (s.launch) return *s.launch;
  return s.compile && framework_preset(s.framework).compile_is_torch_compile ? LaunchMode::Compiled : LaunchMode::Eager;
}
std::string_view dispatcher_name(bool deepep) {
  return choice_name<bool>(kDispatchers, deepep);
}

std::string_view cp_comm_name(CpComm comm) {
  return choice_name<CpComm>(kCpComm, comm);
}
AttentionImpl framework_attention(Framework framework, DeviceArch arch) {
  switch (framework) {
    case Framework::Megatron2021:
    case Framework::DeepSpeed2021:
      return AttentionImpl::Unfused;
    case Framework::TorchTitan:
    case Framework::DeepSpeed:
    case Framework::Composer:
    case Framework::MaxText:
      return AttentionImpl::Flash;
    case Framework::MegatronCore:
    case Framework::Nemo:
      break;
  }
  return arch == DeviceArch::Hopper || arch == DeviceArch::Blackwell ? AttentionImpl::Cudnn : AttentionImpl::Flash;
}

bool AssumedKeys::contains(std::string_view key) const {
  return std::any_of(keys.begin(), keys.end(), [&](const auto& k) { return k.first == key; });
}

std::string_view parallel_dim_name(ParallelDim dim) {
  return choice_name<ParallelDim>(kDims, dim);
}

std::string order_text(const std::vector<ParallelDim>& order) {
  std::string out;
  for (const auto d : order) {
    if (!out.empty()) out += '-';
    out += parallel_dim_name(d);
  }
  return out;
}

namespace {
// The DeepSpeed ZeRO-3 keys that differ from the preset's, as strategy_text writes them.
std::string zero3_text(const StrategySpec& s, const FrameworkPreset& preset) {
  std::string out;
  if (s.zero3_gather != preset.zero3_gather) out += fmt::format(",zero3_gather={}", zero3_gather_name(s.zero3_gather));
  if (s.zero3_sync != preset.zero3_sync) out += fmt::format(",zero3_sync={}", on_off(s.zero3_sync));
  if (s.zero3_list_io != preset.zero3_list_io) out += fmt::format(",zero3_list_io={}", on_off(s.zero3_list_io));
  if (s.zero3_persistence_threshold != preset.zero3_persistence_threshold)
    out += fmt::format(",zero3_persistence_threshold={}", s.zero3_persistence_threshold);
  if (s.zero3_max_reuse_distance != preset.zero3_max_reuse_distance)
    out += fmt::format(",zero3_max_reuse_distance={}", s.zero3_max_reuse_distance);
  return out;
}
}  // namespace

std::string strategy_text(const StrategySpec& s) {
  const StrategySpec defaults;
  const auto& preset = framework_preset(s.framework);
  std::string out;
  if (s.framework != defaults.framework) out += fmt::format("framework={},", framework_name(s.framework));
  out += fmt::format("tp={}", s.tp);
  if (s.sp) out += ",sp=on";
  if (s.tp_overlap != preset.tp_overlap) out += fmt::format(",tp_overlap={}", on_off(s.tp_overlap));
  if (s.cp != 1) out += fmt::format(",cp={}", s.cp);
  if (s.cp_comm != defaults.cp_comm) out += fmt::format(",cp_comm={}", cp_comm_name(s.cp_comm));
  if (s.ep != 1) out += fmt::format(",ep={}", s.ep);
  if (s.etp) out += fmt::format(",etp={}", *s.etp);
  if (s.ep_overlap) out += ",ep_overlap=on";
  if (s.deepep_dispatch) out += fmt::format(",dispatcher={}", dispatcher_name(true));
  if (s.overlap_moe_comm) out += ",overlap_moe_comm=on";
  out += fmt::format(",pp={}", s.pp);
  if (s.vpp != 1) out += fmt::format(",vpp={}", s.vpp);
  if (s.dp) out += fmt::format(",dp={}", *s.dp);
  if (s.gpus) out += fmt::format(",gpus={}", *s.gpus);
  if (s.segment) out += fmt::format(",segment={}", *s.segment);
  out += fmt::format(",zero={},mb={}", s.zero, s.mb);
  if (s.zero_group) out += fmt::format(",zero_group={}", *s.zero_group);
  if (s.pp > 1 || s.schedule != defaults.schedule) out += fmt::format(",schedule={}", schedule_name(s.schedule));
  out += fmt::format(",recompute={}", recompute_name(s.recompute));
  if (s.recompute_layers) out += fmt::format(",recompute_layers={}", *s.recompute_layers);
  if (s.recompute_method != defaults.recompute_method) out += ",recompute_method=uniform";
  if (s.recompute_period) out += fmt::format(",recompute_period={}", *s.recompute_period);
  if (s.offload_layers > 0) out += fmt::format(",offload_layers={}", s.offload_layers);
  if (!s.recompute_modules.empty()) {
    out += ",recompute_modules=";
    for (std::size_t i = 0; i < s.recompute_modules.size(); ++i)
      out += fmt::format("{}{}", i ? "+" : "", recompute_module_name(s.recompute_modules[i]));
  }
  if (s.attention && !s.assumed.contains("attention"))
    out += fmt::format(",attention={}", attention_name(*s.attention));
  if (s.fp8 && !s.assumed.contains("fp8")) out += fmt::format(",fp8={}", fp8_recipe_name(*s.fp8));
  if (s.grad_reduce_dtype != preset.grad_reduce_dtype)
    out += fmt::format(",grad_reduce_dtype={}", reduce_dtype_text(s.grad_reduce_dtype));
  if (s.overlap_grad_reduce != preset.overlap_grad_reduce_at(s.zero))
    out += fmt::format(",overlap_grad_reduce={}", on_off(s.overlap_grad_reduce));
  if (s.overlap_param_gather != preset.overlap_param_gather)
    out += fmt::format(",overlap_param_gather={}", on_off(s.overlap_param_gather));
  if (s.compile != preset.compile) out += fmt::format(",compile={}", on_off(s.compile));
  if (s.loss != preset.loss_at(s.tp)) out += fmt::format(",loss={}", loss_name(s.loss));
  if (s.repeat_kv != preset.repeat_kv) out += fmt::format(",repeat_kv={}", on_off(s.repeat_kv));
  if (s.sp_saves_gathered != preset.sp_saves_gathered)
    out += fmt::format(",sp_saves_gathered={}", on_off(s.sp_saves_gathered));
  if (s.fp8_param_gather != preset.fp8_param_gather)
    out += fmt::format(",fp8_param_gather={}", on_off(s.fp8_param_gather));
  if (!s.fp8_transpose_cache) out += ",fp8_transpose_cache=off";
  if (s.fp8_tp_gather) out += fmt::format(",fp8_tp_gather={}", on_off(*s.fp8_tp_gather));
  if (s.reshard_after_forward) out += fmt::format(",reshard_after_forward={}", on_off(*s.reshard_after_forward));
  if (s.launch) out += fmt::format(",launch={}", launch_name(*s.launch));
  if (s.fsdp_version != preset.fsdp_version) out += fmt::format(",fsdp_version={}", s.fsdp_version);
  if (s.limit_all_gathers != preset.limit_all_gathers)
    out += fmt::format(",limit_all_gathers={}", on_off(s.limit_all_gathers));
  out += zero3_text(s, preset);
  if (s.backward_prefetch != preset.backward_prefetch)
    out += fmt::format(",backward_prefetch={}", backward_prefetch_name(s.backward_prefetch));
  if (s.optimizer_impl != preset.optimizer_impl)
    out += fmt::format(",optimizer_impl={}", optimizer_impl_name(s.optimizer_impl));
  if (s.remat_to_fit != preset.remat_to_fit) out += fmt::format(",remat_to_fit={}", on_off(s.remat_to_fit));
  if (s.bias_grad_fused != preset.bias_grad_fused)
    out += fmt::format(",bias_grad={}", grad_kernel_text(s.bias_grad_fused));
  if (s.norm_grad_fused != preset.norm_grad_fused)
    out += fmt::format(",norm_grad={}", grad_kernel_text(s.norm_grad_fused));
  if (s.caching_allocator != preset.caching_allocator)
    out += fmt::format(",allocator={}", s.caching_allocator ? "caching" : "static");
  if (s.first_stage_layers) out += fmt::format(",first_stage_layers={}", *s.first_stage_layers);
  if (s.last_stage_layers) out += fmt::format(",last_stage_layers={}", *s.last_stage_layers);
  if (s.pipeline_layout) {  // (without the cosmetic commas an inline list would split at)
    std::string layout = s.pipeline_layout->text;
    std::erase(layout, ',');
    out += fmt::format(",pipeline_layout={}", layout);
  }
  if (s.order != defaults.order) out += fmt::format(",order={}", order_text(s.order));
  return out;
}

namespace {

// The layout sets vpp (its stages ÷ pp) when vpp is not given, and with more than one chunk per
// stage the interleaved schedule when no schedule is given, as Megatron-LM's arguments.py derives
// them; whether the layout fits pp and the model is resolve_job's to check.
void read_pipeline_layout(Reader& r, StrategySpec& s) {
  if (!r.has("pipeline_layout")) return;
  const auto text = r.string("pipeline_layout");
  try {
    s.pipeline_layout = parse_pipeline_layout(text);
  } catch (const std::invalid_argument& e) {
    r.error_at("pipeline_layout", fmt::format("\"{}\": {}", text, e.what()));
    return;
  }
  const auto stages = static_cast<int>(s.pipeline_layout->stages.size());
  if (!r.has("vpp") && stages % s.pp == 0) s.vpp = stages / s.pp;
  if (!r.has("schedule") && s.vpp > 1) s.schedule = Schedule::Interleaved;
}

}  // namespace

StrategySpec read_strategy_spec(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw SpecError(source, "", fmt::format("expected a JSON object, got {}", describe(json)));
  Diagnostics diagnostics;
  Reader r(json, "", diagnostics);
  StrategySpec s;
  s.tp = static_cast<int>(r.integer_or("tp", 1, kDegree));
  s.sp = read_switch(r, "sp", false);
  s.pp = static_cast<int>(r.integer_or("pp", 1, kDegree));
  s.vpp = static_cast<int>(r.integer_or("vpp", 1, {1, 1024}));
  s.cp = static_cast<int>(r.integer_or("cp", 1, kDegree));
  s.cp_comm = r.choice_or<CpComm>("cp_comm", CpComm::AllGather, kCpComm);
  s.ep = static_cast<int>(r.integer_or("ep", 1, kDegree));
  if (const auto etp = r.optional_integer("etp", kDegree)) s.etp = static_cast<int>(*etp);
  s.ep_overlap = read_switch(r, "ep_overlap", false);
  s.deepep_dispatch = r.choice_or<bool>("dispatcher", false, kDispatchers);
  s.overlap_moe_comm = read_switch(r, "overlap_moe_comm", false);
  s.dp = r.optional_integer("dp", {1, std::int64_t{1} << 22});
  s.mb = r.integer_or("mb", 1, {1, 1 << 30});
  s.schedule = r.choice_or<Schedule>("schedule", Schedule::OneFOneB, kSchedules);
  s.recompute = r.choice_or<Recompute>("recompute", Recompute::None, kRecompute);
  if (const auto n = r.optional_integer("recompute_layers", {0, 10000})) s.recompute_layers = static_cast<int>(*n);
  if (const auto n = r.optional_integer("recompute_period", {1, 10000})) s.recompute_period = static_cast<int>(*n);
  s.recompute_method = r.choice_or<RecomputeMethod>("recompute_method", RecomputeMethod::Block, kRecomputeMethods);
  s.recompute_modules = read_recompute_modules(r);
  s.offload_layers = static_cast<int>(r.integer_or("offload_layers", 0, {0, 10000}));
  s.attention = r.optional_choice<AttentionImpl>("attention", kAttention);
  if (const auto f = r.optional_integer("first_stage_layers", {1, 10000})) s.first_stage_layers = static_cast<int>(*f);
  if (const auto l = r.optional_integer("last_stage_layers", {1, 10000})) s.last_stage_layers = static_cast<int>(*l);
  read_pipeline_layout(r, s);
  s.gpus = r.optional_integer("gpus", {1, std::int64_t{1} << 22});
  if (const auto segment = r.optional_integer("segment", {1, 576})) s.segment = static_cast<int>(*segment);
  s.order = read_order(r, s.order);
  read_framework_keys(r, s);
  r.sources();
  r.finish();
  diagnostics.throw_if_any(source);
  return s;
}

nlohmann::json parse_inline_strategy(std::string_view text, const std::string& source) {
  nlohmann::json out = nlohmann::json::object();
  std::vector<Diagnostic> problems;
  std::size_t start = 0;
  std::size_t index = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    const std::size_t eq = item.find('=');
    if (item.empty()) {
      problems.push_back(
          {"", fmt::format("item {} is empty; expected key=value pairs separated by commas", index + 1)});
    } else if (eq == std::string_view::npos || eq == 0) {
      problems.push_back({"", fmt::format("\"{}\" is not of the form key=value{}", item.substr(0, 40),
                                          out.contains("pipeline_layout")
                                              ? " (a pipeline_layout's commas are cosmetic: leave them out of an "
                                                "inline list)"
                                              : "")});
    } else {
      const std::string key(item.substr(0, eq));
      if (out.contains(key))
        problems.push_back({pointer_join("", key), "duplicate key"});
      else
        out[key] = inline_value(item.substr(eq + 1));
    }
    start = end + 1;
    ++index;
  }
  if (!problems.empty()) throw SpecError(source, problems);
  return out;
}

StrategySpec load_strategy_spec(const std::string& argument, std::string& source) {
  std::error_code ec;
  const bool is_file = std::filesystem::exists(argument, ec);
  if (!is_file && argument.find('=') != std::string::npos) {
    source = fmt::format("strategy \"{}\"", argument.size() > 60 ? argument.substr(0, 57) + "..." : argument);
    return read_strategy_spec(parse_inline_strategy(argument, source), source);
  }
  source = argument;
  return read_strategy_spec(load_json_file(argument), argument);
}

}  // namespace trainsim::spec
