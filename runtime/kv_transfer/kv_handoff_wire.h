// A KV hand-off as bytes between processes (docs/pd.md): little-endian, one encoding per
// value, so a decoded hand-off encodes back to the same bytes.
//
//   "TRKH" | version u32 | tokens: count u32, [count] i32 | num_prompt_tokens i64 |
//   num_cached_tokens i64 | text: size u32, bytes | text_tokens i64 |
//   streamed_text_bytes u64 | shape: block_size, block_bytes,
//   layers, window, window_row_bytes, rows_mode (i64 each) | num_blocks i64 |
//   region: size u64, bytes
//
// decode checks only the framing (lengths against the end, sizes against limits);
// check_kv_handoff then says whether this engine can continue it.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/kv_transfer/kv_handoff.h"

namespace troupe::runtime {

inline constexpr uint32_t kMaxHandoffTokens = uint32_t(1) << 24;
inline constexpr uint32_t kMaxHandoffTextBytes = uint32_t(1) << 28;

std::vector<std::byte> encode_kv_handoff(const KvHandoff& h);
// Throws troupe::Error naming the field on bad framing: its input comes from another process.
KvHandoff decode_kv_handoff(const std::vector<std::byte>& wire);

}  // namespace troupe::runtime
