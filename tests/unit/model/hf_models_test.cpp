// Hugging Face configs read as models, against the parameter counts their authors publish.
//
// Independent truth: each config below is written from the published config.json of the model
// (the values, not a download), and its expected count from the model card or paper: Llama 3.1
// 8B / 70B / 405B (Meta's model cards: 8.03B, 70.6B, 405.9B as the hub lists them), Mixtral 8×7B
// (Mistral AI: 46.7B total, 12.9B active), Qwen2.5-72B (Qwen: 72.7B), Qwen3-235B-A22B (Qwen:
// 235B total, 22B activated), DeepSeek-V3 (DeepSeek-AI 2024: 671B total, 37B activated), GPT-2
// (OpenAI's 124M checkpoint: 124,439,808 with its 1,024 positions). A count published to three or
// more digits is held within 0.5%; one published to two digits ("37B") within half its last digit.
#include <cmath>
#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "common/jobs.hpp"
#include "common/paths.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/params.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using nlohmann::json;

namespace hf_models_test {

const json kLlama31_8b = {
    {"architectures", {"LlamaForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
    {"bos_token_id", 128000}, {"eos_token_id", 128001}, {"hidden_act", "silu"}, {"hidden_size", 4096},
    {"initializer_range", 0.02}, {"intermediate_size", 14336}, {"max_position_embeddings", 131072},
    {"mlp_bias", false}, {"model_type", "llama"}, {"num_attention_heads", 32}, {"num_hidden_layers", 32},
    {"num_key_value_heads", 8}, {"pretraining_tp", 1}, {"rms_norm_eps", 1e-05},
    {"rope_scaling",
     {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
      {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}}},
    {"rope_theta", 500000.0}, {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"},
    {"transformers_version", "4.43.0.dev0"}, {"use_cache", true}, {"vocab_size", 128256}};

json llama31(int hidden, int ffn, int heads, int layers) {
  auto c = kLlama31_8b;
  c["hidden_size"] = hidden;
  c["intermediate_size"] = ffn;
  c["num_attention_heads"] = heads;
  c["num_hidden_layers"] = layers;
  return c;
}

const json kMixtral = {
    {"architectures", {"MixtralForCausalLM"}}, {"attention_dropout", 0.0}, {"bos_token_id", 1}, {"eos_token_id", 2},
    {"hidden_act", "silu"}, {"hidden_size", 4096}, {"initializer_range", 0.02}, {"intermediate_size", 14336},
    {"max_position_embeddings", 32768}, {"model_type", "mixtral"}, {"num_attention_heads", 32},
    {"num_experts_per_tok", 2}, {"num_hidden_layers", 32}, {"num_key_value_heads", 8}, {"num_local_experts", 8},
    {"output_router_logits", false}, {"rms_norm_eps", 1e-05}, {"rope_theta", 1000000.0},
    {"router_aux_loss_coef", 0.02}, {"sliding_window", nullptr}, {"tie_word_embeddings", false},
    {"torch_dtype", "bfloat16"}, {"transformers_version", "4.36.0.dev0"}, {"use_cache", true}, {"vocab_size", 32000}};

const json kQwen25_72b = {
    {"architectures", {"Qwen2ForCausalLM"}}, {"attention_dropout", 0.0}, {"bos_token_id", 151643},
    {"eos_token_id", 151643}, {"hidden_act", "silu"}, {"hidden_size", 8192}, {"initializer_range", 0.02},
    {"intermediate_size", 29568}, {"max_position_embeddings", 131072}, {"max_window_layers", 80},
    {"model_type", "qwen2"}, {"num_attention_heads", 64}, {"num_hidden_layers", 80}, {"num_key_value_heads", 8},
    {"rms_norm_eps", 1e-05}, {"rope_theta", 1000000.0}, {"sliding_window", 131072}, {"tie_word_embeddings", false},
    {"torch_dtype", "bfloat16"}, {"transformers_version", "4.43.1"}, {"use_cache", true},
    {"use_sliding_window", false}, {"vocab_size", 152064}};

const json kQwen3_235b = {
    {"architectures", {"Qwen3MoeForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
    {"bos_token_id", 151643}, {"decoder_sparse_step", 1}, {"eos_token_id", 151645}, {"head_dim", 128},
    {"hidden_act", "silu"}, {"hidden_size", 4096}, {"initializer_range", 0.02}, {"intermediate_size", 12288},
    {"max_position_embeddings", 40960}, {"max_window_layers", 94}, {"mlp_only_layers", json::array()},
    {"model_type", "qwen3_moe"}, {"moe_intermediate_size", 1536}, {"norm_topk_prob", true},
    {"num_attention_heads", 64}, {"num_experts", 128}, {"num_experts_per_tok", 8}, {"num_hidden_layers", 94},
    {"num_key_value_heads", 4}, {"output_router_logits", false}, {"rms_norm_eps", 1e-06}, {"rope_scaling", nullptr},
    {"rope_theta", 1000000.0}, {"router_aux_loss_coef", 0.001}, {"sliding_window", nullptr},
    {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}, {"transformers_version", "4.51.0"},
    {"use_cache", true}, {"use_sliding_window", false}, {"vocab_size", 151936}};

const json kDeepseekV3 = {
    {"architectures", {"DeepseekV3ForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
    {"aux_loss_alpha", 0.001}, {"bos_token_id", 0}, {"eos_token_id", 1}, {"ep_size", 1},
    {"first_k_dense_replace", 3}, {"hidden_act", "silu"}, {"hidden_size", 7168}, {"initializer_range", 0.02},
    {"intermediate_size", 18432}, {"kv_lora_rank", 512}, {"max_position_embeddings", 163840},
    {"model_type", "deepseek_v3"}, {"moe_intermediate_size", 2048}, {"moe_layer_freq", 1}, {"n_group", 8},
    {"n_routed_experts", 256}, {"n_shared_experts", 1}, {"norm_topk_prob", true}, {"num_attention_heads", 128},
    {"num_experts_per_tok", 8}, {"num_hidden_layers", 61}, {"num_key_value_heads", 128},
    {"num_nextn_predict_layers", 1}, {"q_lora_rank", 1536}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64},
    {"quantization_config",
     {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}},
    {"rms_norm_eps", 1e-06},
    {"rope_scaling",
     {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 40}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
      {"original_max_position_embeddings", 4096}, {"type", "yarn"}}},
    {"rope_theta", 10000}, {"routed_scaling_factor", 2.5}, {"scoring_func", "sigmoid"}, {"seq_aux", true},
    {"tie_word_embeddings", false}, {"topk_group", 4}, {"topk_method", "noaux_tc"}, {"torch_dtype", "bfloat16"},
    {"transformers_version", "4.33.1"}, {"use_cache", true}, {"v_head_dim", 128}, {"vocab_size", 129280}};

const json kGpt2 = {{"activation_function", "gelu_new"}, {"architectures", {"GPT2LMHeadModel"}},
                    {"attn_pdrop", 0.1}, {"bos_token_id", 50256}, {"embd_pdrop", 0.1}, {"eos_token_id", 50256},
                    {"initializer_range", 0.02}, {"layer_norm_epsilon", 1e-05}, {"model_type", "gpt2"},
                    {"n_ctx", 1024}, {"n_embd", 768}, {"n_head", 12}, {"n_layer", 12}, {"n_positions", 1024},
                    {"resid_pdrop", 0.1}, {"summary_activation", nullptr}, {"summary_first_dropout", 0.1},
                    {"summary_proj_to_labels", true}, {"summary_type", "cls_index"}, {"summary_use_proj", true},
                    {"vocab_size", 50257}};

spec::WorkloadSpec read(const test::ScratchDir& dir, const json& config, std::int64_t seq_len = 8192) {
  const auto path = dir.file("config.json");
  std::ofstream(path) << config.dump(2);
  return spec::load_workload_spec(path, {.seq_len = seq_len, .global_batch = 16});
}

// Within half a unit of the published figure's last digit, or 0.5% when that is tighter.
void check_count(double counted, double published, double last_digit) {
  CHECK(std::abs(counted - published) <= std::max(0.005 * published, last_digit / 2));
}

TEST_CASE("published parameter counts from Hugging Face configs") {
  test::ScratchDir dir("trainsim-hf");
  struct Case {
    const char* name;
    json config;
    double total, total_digit;
    double active, active_digit;  // 0: dense
    bool active_without_input_embedding = false;
  };
  const Case cases[] = {
      {"Llama 3.1 8B", kLlama31_8b, 8.03e9, 0.01e9, 0, 0},
      {"Llama 3.1 70B", llama31(8192, 28672, 64, 80), 70.6e9, 0.1e9, 0, 0},
      {"Llama 3.1 405B", llama31(16384, 53248, 128, 126), 405.9e9, 0.1e9, 0, 0},
      {"Mixtral 8x7B", kMixtral, 46.7e9, 0.1e9, 12.9e9, 0.1e9},
      {"Qwen2.5-72B", kQwen25_72b, 72.7e9, 0.1e9, 0, 0},
      {"Qwen3-235B-A22B", kQwen3_235b, 235e9, 1e9, 22e9, 1e9},
      // DeepSeek counts activated parameters without the input embedding (a lookup, no compute):
      // 37.55B with it would round to 38B; V2's "21B activated" fits either way
      {"DeepSeek-V3", kDeepseekV3, 671e9, 1e9, 37e9, 1e9, true},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    // the published figures are the main model's: DeepSeek-V3's multi-token prediction module aside
    auto w = read(dir, c.config);
    w.model.mtp_layers = 0;
    const auto counts = model::count_params(w.model, w.training.seq_len);
    MESSAGE(c.name, ": ", counts.total() / 1e9, "B total, ", counts.active() / 1e9, "B active");
    check_count(counts.total(), c.total, c.total_digit);
    if (c.active > 0)
      check_count(counts.active() - (c.active_without_input_embedding ? counts.embedding : 0), c.active,
                  c.active_digit);
  }
  // DeepSeek-V3's checkpoint with its multi-token prediction module: 685B, of which 14B the module's
  // (its MoE layer, projection and norms, and copies of the embedding and the output layer, which
  // training shares with the main model; Hugging Face model card)
  const auto v3 = model::count_params(read(dir, kDeepseekV3).model, 8192);
  REQUIRE(v3.mtp_modules == 1);
  check_count(v3.total() + v3.embedding + v3.output, 685e9, 1e9);
  // (14B is 685B less 671B, each rounded: within 1B)
  check_count(v3.mtp() + v3.embedding + v3.output, 14e9, 2e9);
  // GPT-2's 124M checkpoint, exactly (its 1,024 learned positions)
  CHECK(model::count_params(read(dir, kGpt2, 1024).model, 1024).total() == 124'439'808);
}

TEST_CASE("Hugging Face configs: what is read, what is warned about, what is refused") {
  test::ScratchDir dir("trainsim-hf");
  const auto v3 = read(dir, kDeepseekV3);
  REQUIRE(v3.model.mla.has_value());
  CHECK(v3.model.mla->kv_lora_rank == 512);
  CHECK(v3.model.head_dim == 192);
  CHECK(v3.model.moe->dense_layers == 3);
  CHECK(v3.model.moe->shared_experts == 1);
  // node-limited routing (noaux_tc): 8 groups, the best 4; greedy routing picks from every expert
  CHECK(v3.model.moe->groups == 8);
  CHECK(v3.model.moe->group_top_k == 4);
  auto greedy = kDeepseekV3;
  greedy["topk_method"] = "greedy";
  CHECK(read(dir, greedy).model.moe->groups == 1);
  // noaux_tc balances by a bias on the scores (DeepSeek-V3); greedy with its auxiliary loss
  CHECK(v3.model.moe->balancing == spec::Balancing::AuxFree);
  CHECK(read(dir, greedy).model.moe->balancing == spec::Balancing::AuxLoss);
  auto uneven = kDeepseekV3;
  uneven["n_group"] = 3;
  CHECK_THROWS_WITH_AS(read(dir, uneven), doctest::Contains("/n_group: 3 does not divide the 256 experts"), SpecError);
  // Qwen2's biases: on q, k and v, not on the output projection nor the MLP
  const auto qwen = read(dir, kQwen25_72b);
  CHECK_FALSE(qwen.model.bias);
  CHECK(qwen.model.qkv_bias);
  CHECK(v3.name == dir.path().filename().string());  // a config.json is named by its folder
  // the multi-token prediction module is read (num_nextn_predict_layers); rope scaling, token ids
  // and routing details are silent
  CHECK(v3.model.mtp_layers == 1);
  REQUIRE(v3.warnings.size() == 2);  // dtype and optimizer assumed
  for (const auto& warning : v3.warnings) CHECK(warning.find("num_nextn_predict_layers") == std::string::npos);
  // Mistral's sliding window changes attention's cost and is not modelled
  auto mistral = kMixtral;
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 4096;
  const auto m = read(dir, mistral);
  CHECK_FALSE(m.model.moe.has_value());
  CHECK(m.warnings.at(0).find("sliding_window") != std::string::npos);
  // an unknown family, a missing key, a contradiction: bad input naming the key
  auto unknown = kMixtral;
  unknown["model_type"] = "falcon";
  CHECK_THROWS_WITH_AS(read(dir, unknown), doctest::Contains("/model_type: \"falcon\" is not a supported family"),
                       SpecError);
  auto missing = kLlama31_8b;
  missing.erase("num_hidden_layers");
  CHECK_THROWS_WITH_AS(read(dir, missing), doctest::Contains("/num_hidden_layers: missing"), SpecError);
  auto contradictory = kLlama31_8b;
  contradictory["num_key_value_heads"] = 5;
  CHECK_THROWS_WITH_AS(read(dir, contradictory), doctest::Contains("/num_key_value_heads: 5 does not divide"),
                       SpecError);
  // without the training side: say which flags are missing
  const auto path = dir.file("config.json");
  std::ofstream(path) << kLlama31_8b.dump();
  CHECK_THROWS_WITH_AS(spec::load_workload_spec(path), doctest::Contains("give --seq-len and --global-batch"),
                       SpecError);
  // the wrapper: the config beside it, the training settings inside it
  std::ofstream(dir.file("wrapper.json")) << json{
      {"hf_config", "config.json"},
      {"training", {{"seq_len", 4096}, {"global_batch", 64}, {"dtype", "bf16"}, {"optimizer", "adamw"}}}}
                                                 .dump();
  const auto wrapped = spec::load_workload_spec(dir.file("wrapper.json"));
  CHECK(wrapped.training.seq_len == 4096);
  CHECK(wrapped.warnings.empty());
  CHECK(model::count_params(wrapped.model, 4096).total() ==
        doctest::Approx(model::count_params(read(dir, kLlama31_8b).model, 8192).total()));
}

TEST_CASE("FLOPs per token: 6N (6·N_active for MoE) plus attention") {
  test::ScratchDir dir("trainsim-hf");
  for (const auto& config : {kLlama31_8b, kQwen25_72b, kMixtral, kQwen3_235b, kDeepseekV3}) {
    const auto w = read(dir, config, 4096);
    CAPTURE(w.model.layers);
    const auto job = test::make_job("dgx-h100-superpod", w, "gpus=8");
    const auto counts = model::count_params(w.model, w.training.seq_len);
    // every weight but the input embedding's multiplies each token, forward and backward, and a
    // multi-token prediction module's layer and the output layer again (DeepSeek-V3's one); the
    // attention core's Q·Kᵀ and P·V are 2·s·heads·(d_qk + d_v) per token forward, full square
    const double d_qk = static_cast<double>(w.model.head_dim);
    const double d_v = w.model.mla ? static_cast<double>(w.model.mla->v_head_dim) : d_qk;
    const double attention = 3.0 * 2 * static_cast<double>(w.training.seq_len) * w.model.heads * (d_qk + d_v);
    const double output = static_cast<double>(w.model.vocab) * static_cast<double>(w.model.hidden);
    const double expected = 6 * (counts.active() - counts.embedding + w.model.mtp_layers * output) +
                            (w.model.layers + w.model.mtp_layers) * attention;
    CHECK(model::step_flops(job).per_token == doctest::Approx(expected).epsilon(0.01));
  }
}

}  // namespace hf_models_test
