// config.json of a Hugging Face folder of a LLaMA-family model (issue 15): which loader a
// folder needs, and its hyperparameters as a LlamaConfig. The classes read
// (config.json "architectures"): LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM
// (-> LlamaArch::Llama), Qwen2ForCausalLM (Qwen2), Qwen2MoeForCausalLM (Qwen2Moe). HF
// checkpoints rotate q/k halves (rotate_half), so every one of them has rope_neox.
#pragma once

#include <string>
#include <string_view>

#include "model/llama_config.h"

namespace troupe::model {

// A LLaMA-family folder: dir/config.json names one of the classes above in
// "architectures". A folder whose config.json names none (a V4.1 checkpoint's) is not;
// one naming another class that is not DeepSeek's is an error naming the class (neither
// loader reads it). No config.json, or one that does not parse: false (the V4.1
// loader reports it).
bool is_hf_llama_dir(const std::string& dir);

// config.json's text -> LlamaConfig, validated; errors name the key and `source`.
LlamaConfig llama_config_from_hf_json(std::string_view text, const std::string& source);
LlamaConfig llama_config_from_hf(const std::string& dir);  // dir/config.json

}  // namespace troupe::model
