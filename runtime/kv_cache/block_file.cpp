#include "runtime/kv_cache/block_file.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "runtime/kv_cache/block_hash.h"

namespace troupe::runtime {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'P', 'K', 'V', 'B', 0, 2};
constexpr uint64_t kChecksumSeed = 0x6b76626c6f636b31ull;  // "kvblock1"
constexpr size_t kFixedHeader = 56;

void put64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

std::vector<std::byte> encode_block_file(const BlockFileGeometry& g, const BlockFileHeader& h,
                                         std::span<const std::byte> payload,
                                         std::span<const std::byte> snapshot) {
  const bool snap = !snapshot.empty();
  std::vector<std::byte> f(size_t(g.file_bytes(snap)));
  std::memcpy(f.data(), kMagic, 8);
  put64(f.data() + 8, g.model_tag);
  put64(f.data() + 16, uint64_t(g.block_size));
  put64(f.data() + 24, uint64_t(g.block_bytes));
  put64(f.data() + 32, snap ? uint64_t(g.snapshot_bytes) : 0);
  put64(f.data() + 40, h.hash);
  put64(f.data() + 48, h.parent_hash);
  const size_t payload_at = kFixedHeader + 4 * size_t(g.block_size);
  std::memcpy(f.data() + kFixedHeader, h.tokens.data(), 4 * size_t(g.block_size));
  std::memcpy(f.data() + payload_at, payload.data(), size_t(g.block_bytes));
  if (snap)
    std::memcpy(f.data() + payload_at + size_t(g.block_bytes), snapshot.data(),
                size_t(g.snapshot_bytes));
  const size_t body = f.size() - 8;
  put64(f.data() + body, hash_bytes(kChecksumSeed, {f.data(), body}));
  return f;
}

std::optional<BlockFileHeader> parse_block_file(std::span<const std::byte> file,
                                                const BlockFileGeometry& g, std::string* why,
                                                std::span<std::byte> payload_out,
                                                std::vector<std::byte>* snapshot_out) {
  auto fail = [&](std::string what) -> std::optional<BlockFileHeader> {
    *why = std::move(what);
    return std::nullopt;
  };
  if (g.block_size <= 0 || g.block_bytes < 0 || g.snapshot_bytes < 0)
    return fail("bad expected geometry");
  if (file.size() < kFixedHeader || std::memcmp(file.data(), kMagic, 6) != 0)
    return fail("not a troupe KV block file (magic)");
  if (std::memcmp(file.data(), kMagic, 8) != 0)
    return fail("foreign: another format version of the block file");
  if (get64(file.data() + 8) != g.model_tag)
    return fail("foreign: written for another model, block layout or replay mode");
  if (get64(file.data() + 16) != uint64_t(g.block_size) ||
      get64(file.data() + 24) != uint64_t(g.block_bytes))
    return fail("foreign: another block size or block byte count");
  const uint64_t snapshot_bytes = get64(file.data() + 32);
  if (snapshot_bytes != 0 && (g.snapshot_bytes == 0 || snapshot_bytes != uint64_t(g.snapshot_bytes)))
    return fail("foreign: a window snapshot of another size");
  const bool snap = snapshot_bytes != 0;
  if (file.size() != size_t(g.file_bytes(snap)))
    return fail("truncated or padded: " + std::to_string(file.size()) + " bytes, expected " +
                std::to_string(g.file_bytes(snap)));
  const size_t body = file.size() - 8;
  if (hash_bytes(kChecksumSeed, file.first(body)) != get64(file.data() + body))
    return fail("checksum mismatch (corrupt)");
  BlockFileHeader h;
  h.hash = get64(file.data() + 40);
  h.parent_hash = get64(file.data() + 48);
  h.has_snapshot = snap;
  h.tokens.resize(size_t(g.block_size));
  std::memcpy(h.tokens.data(), file.data() + kFixedHeader, 4 * size_t(g.block_size));
  if (block_hash(h.parent_hash, h.tokens) != h.hash)
    return fail("hash chain mismatch: the tokens do not hash to the block's hash");
  const size_t payload_at = kFixedHeader + 4 * size_t(g.block_size);
  if (!payload_out.empty()) {
    if (payload_out.size() != size_t(g.block_bytes)) return fail("payload buffer size mismatch");
    std::memcpy(payload_out.data(), file.data() + payload_at, size_t(g.block_bytes));
  }
  if (snapshot_out != nullptr) {
    const std::byte* at = file.data() + payload_at + size_t(g.block_bytes);
    snapshot_out->assign(at, at + (snap ? size_t(g.snapshot_bytes) : 0));
  }
  return h;
}

std::string block_file_name(uint64_t hash) {
  char name[32];
  std::snprintf(name, sizeof name, "%016" PRIx64 ".kvb", hash);
  return name;
}

}  // namespace troupe::runtime
