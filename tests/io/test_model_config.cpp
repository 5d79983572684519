// Hugging Face config.json parsing: published Llama-2 / Llama-3.1 configs, round trip, and errors naming the key.
#include "test_errors.h"
#include "core/io/model_config.h"
#include "model_config_checks.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "test_paths.h"

namespace draftlab {
namespace {

using nlohmann::json;

// meta-llama/Llama-2-7b-hf config.json as published.
const char* kLlama2_7B = R"({
  "_name_or_path": "meta-llama/Llama-2-7b-hf",
  "architectures": [
    "LlamaForCausalLM"
  ],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

// meta-llama/Meta-Llama-3.1-8B-Instruct config.json as published.
const char* kLlama31_8B_Instruct = R"({
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [
    128001,
    128008,
    128009
  ],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3",
  "use_cache": true,
  "vocab_size": 128256
})";

// mistralai/Mistral-7B-v0.1 config.json as published: same keys as Llama plus sliding_window.
const char* kMistral_7B = R"({
  "architectures": [
    "MistralForCausalLM"
  ],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  testing::expect_same_config(a, b);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
}

// to_hf_json -> text -> parse_hf_config gives the same config back.
void expect_round_trip(const ModelConfig& c) {
  const json written = c.to_hf_json("bfloat16");
  EXPECT_EQ(written.at("architectures"), json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(written.at("model_type"), "llama");
  EXPECT_EQ(written.at("torch_dtype"), "bfloat16");
  expect_same(parse_hf_config(json::parse(written.dump(2)), "roundtrip.json"), c);
}

TEST(ModelConfig, Llama2_7B) {
  const ModelConfig c = parse_hf_config(json::parse(kLlama2_7B), "llama2/config.json");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.head_dim, 128);  // derived: 4096 / 32
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // absent: transformers' default
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
  expect_round_trip(c);
}

TEST(ModelConfig, Llama31_8B_InstructWithLlama3RopeScalingAndEosList) {
  const ModelConfig c = parse_hf_config(json::parse(kLlama31_8B_Instruct), "llama31/config.json");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  expect_round_trip(c);
  // A list of ids stays a list.
  EXPECT_TRUE(c.to_hf_json().at("eos_token_id").is_array());
}

TEST(ModelConfig, MistralStyleConfigAndOldStyleLinearScaling) {
  const ModelConfig m = parse_hf_config(json::parse(kMistral_7B), "mistral/config.json");
  EXPECT_EQ(m.num_key_value_heads, 8);
  EXPECT_EQ(m.max_position_embeddings, 32768);

  json j = json::parse(kLlama2_7B);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const ModelConfig linear = parse_hf_config(j, "linear.json");
  EXPECT_EQ(linear.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(linear.rope_scaling.factor, 2.0);
  expect_round_trip(linear);
}

TEST(ModelConfig, ExplicitHeadDimNeedNotEqualHiddenOverHeads) {
  json j = json::parse(kLlama2_7B);
  j["head_dim"] = 96;
  j["tie_word_embeddings"] = true;
  j["rms_norm_eps"] = 1e-6;
  const ModelConfig c = parse_hf_config(j, "head_dim.json");
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_TRUE(c.tie_word_embeddings);
  expect_round_trip(c);
}

// PARD's field (AMD-AGI/PARD writes pard_token and spd_type into a parallel draft's config.json): read, kept
// through a round trip, range-checked; absent in an ordinary model.
TEST(ModelConfig, PardTokenOfAParallelDraft) {
  json j = json::parse(kLlama2_7B);
  EXPECT_EQ(parse_hf_config(j, "plain.json").pard_token, -1);
  EXPECT_FALSE(parse_hf_config(j, "plain.json").to_hf_json().contains("pard_token"));
  j["pard_token"] = 31999;
  j["spd_type"] = "pard";
  const ModelConfig c = parse_hf_config(j, "pard.json");
  EXPECT_EQ(c.pard_token, 31999);
  EXPECT_EQ(c.to_hf_json().at("spd_type"), "pard");
  EXPECT_EQ(parse_hf_config(c.to_hf_json(), "again.json").pard_token, 31999);
  j["pard_token"] = 32000;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "pard.json"); }, {"pard.json", "pard_token", "32000)", "32000"});
}

TEST(ModelConfig, LoadFromFileAndFolder) {
  const std::string dir = testing::temp_dir() + "/cfg";
  ::mkdir(dir.c_str(), 0755);
  {
    std::ofstream out(dir + "/config.json");
    out << kLlama31_8B_Instruct;
  }
  expect_same(load_hf_config(dir + "/config.json"), parse_hf_config(json::parse(kLlama31_8B_Instruct), "x"));
  EXPECT_EQ(load_hf_config(dir).num_key_value_heads, 8);

  const std::string broken = dir + "/broken.json";
  {
    std::ofstream out(broken);
    out << "{\"hidden_size\": 4096,";
  }
  draftlab::testing::expect_error([&] { load_hf_config(broken); }, {broken, "valid JSON"});
  draftlab::testing::expect_error([&] { load_hf_config(dir + "/absent.json"); }, {dir + "/absent.json"});
}

TEST(ModelConfigErrors, MissingRequiredKeyIsNamed) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"}) {
    json j = json::parse(kLlama2_7B);
    j.erase(key);
    draftlab::testing::expect_error([&] { parse_hf_config(j, "models/x/config.json"); }, {"models/x/config.json", key, "required"});
  }
}

TEST(ModelConfigErrors, WrongTypeNamesKeyAndExpectedType) {
  json j = json::parse(kLlama2_7B);
  j["num_attention_heads"] = "32";
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"cfg.json", "num_attention_heads", "an integer", "string"});

  j = json::parse(kLlama2_7B);
  j["hidden_size"] = 4096.5;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"hidden_size", "an integer"});

  j = json::parse(kLlama2_7B);
  j["rms_norm_eps"] = "1e-5";
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"rms_norm_eps", "a number"});

  j = json::parse(kLlama2_7B);
  j["tie_word_embeddings"] = 0;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"tie_word_embeddings", "true or false"});

  j = json::parse(kLlama2_7B);
  j["eos_token_id"] = json::array({2, "</s>"});
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"eos_token_id", "an integer"});

  j = json::parse(kLlama2_7B);
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"rope_scaling.low_freq_factor", "no such key"});
}

TEST(ModelConfigErrors, UnsupportedFeaturesAreRefused) {
  json j = json::parse(kLlama2_7B);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"cfg.json", "rope_scaling", "yarn", "llama3"});

  j = json::parse(kLlama2_7B);
  j["model_type"] = "qwen2";
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"model_type", "qwen2"});

  j = json::parse(kLlama2_7B);
  j["attention_bias"] = true;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"attention_bias"});

  j = json::parse(kLlama2_7B);
  j["hidden_act"] = "gelu";
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"hidden_act", "gelu"});
}

TEST(ModelConfigErrors, ValidateChecksShapes) {
  json j = json::parse(kLlama2_7B);
  j["num_key_value_heads"] = 5;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"cfg.json", "num_key_value_heads", "divisor", "5"});

  j = json::parse(kLlama2_7B);
  j["head_dim"] = 127;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"head_dim", "even", "127"});

  j = json::parse(kLlama2_7B);
  j["vocab_size"] = 0;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"vocab_size", "positive"});

  j = json::parse(kLlama2_7B);
  j["num_hidden_layers"] = -1;
  draftlab::testing::expect_error([&] { parse_hf_config(j, "cfg.json"); }, {"num_hidden_layers", "positive"});

  ModelConfig c = parse_hf_config(json::parse(kLlama2_7B), "cfg.json");
  c.hidden_size = 0;
  draftlab::testing::expect_error([&] { c.validate("built in code"); }, {"built in code", "hidden_size"});
}

}  // namespace
}  // namespace draftlab
