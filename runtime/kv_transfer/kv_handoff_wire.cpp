#include "runtime/kv_transfer/kv_handoff_wire.h"

#include <cstring>

#include "kernels/check.h"
#include "runtime/wire_bytes.h"

namespace troupe::runtime {
namespace {

constexpr char kMagic[4] = {'T', 'R', 'K', 'H'};
constexpr uint32_t kVersion = 1;

}  // namespace

std::vector<std::byte> encode_kv_handoff(const KvHandoff& h) {
  std::vector<std::byte> out;
  out.reserve(96 + 4 * h.tokens.size() + h.region.size());
  for (char c : kMagic) out.push_back(std::byte(c));
  put_le<uint32_t>(out, kVersion);
  put_le<uint32_t>(out, uint32_t(h.tokens.size()));
  for (int32_t t : h.tokens) put_le<int32_t>(out, t);
  put_le<int64_t>(out, h.num_prompt_tokens);
  put_le<int64_t>(out, h.num_cached_tokens);
  put_le<uint32_t>(out, uint32_t(h.text.size()));
  for (char c : h.text) out.push_back(std::byte(c));
  put_le<int64_t>(out, h.text_tokens);
  put_le<uint64_t>(out, h.streamed_text_bytes);
  for (int64_t v : {h.shape.block_size, h.shape.block_bytes, h.shape.layers, h.shape.window,
                    h.shape.window_row_bytes, h.shape.rows_mode})
    put_le<int64_t>(out, v);
  put_le<int64_t>(out, h.num_blocks);
  put_le<uint64_t>(out, h.region.size());
  const auto* p = reinterpret_cast<const std::byte*>(h.region.data());
  out.insert(out.end(), p, p + h.region.size());
  return out;
}

KvHandoff decode_kv_handoff(const std::vector<std::byte>& wire) {
  WireReader in(wire, "KV hand-off");
  TROUPE_CHECK(std::memcmp(in.take(4, "magic"), kMagic, 4) == 0,
               "KV hand-off: bad magic (not a troupe KV hand-off)");
  const uint32_t version = in.get<uint32_t>("version");
  TROUPE_CHECK(version == kVersion, "KV hand-off: version ", version, ", this build reads ", kVersion);
  KvHandoff h;
  const uint32_t n = in.get<uint32_t>("token count");
  TROUPE_CHECK(n <= kMaxHandoffTokens, "KV hand-off: ", n, " tokens");
  const std::byte* t = in.take(size_t(n) * 4, "tokens");  // checked before allocating
  h.tokens.resize(n);
  for (uint32_t i = 0; i < n; ++i, t += 4)
    h.tokens[i] = int32_t(uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 |
                          uint32_t(t[3]) << 24);
  h.num_prompt_tokens = in.get<int64_t>("num_prompt_tokens");
  h.num_cached_tokens = in.get<int64_t>("num_cached_tokens");
  const uint32_t text = in.get<uint32_t>("text size");
  TROUPE_CHECK(text <= kMaxHandoffTextBytes, "KV hand-off: a text of ", text, " bytes");
  const std::byte* chars = in.take(text, "text");
  h.text.assign(reinterpret_cast<const char*>(chars), text);
  h.text_tokens = in.get<int64_t>("text_tokens");
  h.streamed_text_bytes = in.get<uint64_t>("streamed_text_bytes");
  for (int64_t* v : {&h.shape.block_size, &h.shape.block_bytes, &h.shape.layers, &h.shape.window,
                     &h.shape.window_row_bytes, &h.shape.rows_mode})
    *v = in.get<int64_t>("shape");
  h.num_blocks = in.get<int64_t>("num_blocks");
  const uint64_t size = in.get<uint64_t>("region size");
  TROUPE_CHECK(size <= wire.size(), "KV hand-off: a region of ", size, " bytes in ", wire.size());
  const std::byte* p = in.take(size_t(size), "region");
  h.region.assign(reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + size);
  in.expect_end();
  return h;
}

}  // namespace troupe::runtime
