// The fuzz entries (one per fuzz/<name>_fuzz.cpp) by name, for the regression test that
// replays fuzz/corpus/<name>/ and fuzz/regressions/<name>/ through them.
#pragma once

#include <array>
#include <string_view>

#include "fuzz/fuzz_support.h"

namespace troupe::fuzz {

void http_request(const uint8_t* data, size_t size);
void openai_body(const uint8_t* data, size_t size);
void tcp_frame(const uint8_t* data, size_t size);
void serve_config(const uint8_t* data, size_t size);
void safetensors(const uint8_t* data, size_t size);
void tokenizer_json(const uint8_t* data, size_t size);
void expert_loads_json(const uint8_t* data, size_t size);
void gguf(const uint8_t* data, size_t size);
void kv_block_file(const uint8_t* data, size_t size);
void cluster_config(const uint8_t* data, size_t size);
void peer_wire(const uint8_t* data, size_t size);
void kv_pin_index(const uint8_t* data, size_t size);
void kv_handoff(const uint8_t* data, size_t size);
void hf_config(const uint8_t* data, size_t size);
void cost_table(const uint8_t* data, size_t size);

struct Target {
  std::string_view name;  // also the folder under fuzz/corpus and fuzz/regressions
  Entry entry;
};

inline constexpr std::array<Target, 15> kTargets{{
    {"http_request", http_request},
    {"openai_body", openai_body},
    {"tcp_frame", tcp_frame},
    {"serve_config", serve_config},
    {"safetensors", safetensors},
    {"tokenizer_json", tokenizer_json},
    {"expert_loads_json", expert_loads_json},
    {"gguf", gguf},
    {"kv_block_file", kv_block_file},
    {"cluster_config", cluster_config},
    {"peer_wire", peer_wire},
    {"kv_pin_index", kv_pin_index},
    {"kv_handoff", kv_handoff},
    {"hf_config", hf_config},
    {"cost_table", cost_table},
}};

}  // namespace troupe::fuzz
