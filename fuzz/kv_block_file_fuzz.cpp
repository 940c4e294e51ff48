// A disk tier block file (runtime/kv_cache/block_file.h, format version 2: with or
// without a window snapshot section) as found in --kv-disk-dir at start-up or at a
// lookup: the bytes are the whole file. It is parsed against fixed geometries (the
// seeds' 4 tokens, 37 bytes, tag 0x1234, snapshots of 11 bytes or none) and against the
// geometry its own header claims (capped, so a huge claim is not an allocation), payload
// and snapshot copied out. Contract: no exception at all (a bad file is a nullopt and a
// reason), and a file that parses has as many tokens as the geometry, tokens that hash to
// its hash, and a snapshot exactly when its header says so, of the geometry's size.
#include <cstring>
#include <vector>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "runtime/kv_cache/block_file.h"
#include "runtime/kv_cache/block_hash.h"

namespace troupe::fuzz {
namespace {

void parse_as(std::span<const std::byte> file, const runtime::BlockFileGeometry& g) {
  std::string why;
  std::vector<std::byte> payload(size_t(g.block_bytes)), snapshot;
  const auto h = runtime::parse_block_file(file, g, &why, payload, &snapshot);
  if (!h) {
    TROUPE_CHECK(!why.empty(), "a rejected block file without a reason");
    return;
  }
  TROUPE_CHECK(int64_t(h->tokens.size()) == g.block_size, "parsed token count mismatch");
  TROUPE_CHECK(runtime::block_hash(h->parent_hash, h->tokens) == h->hash, "hash chain not checked");
  TROUPE_CHECK(int64_t(snapshot.size()) == (h->has_snapshot ? g.snapshot_bytes : 0),
               "snapshot section of the wrong size");
  TROUPE_CHECK(int64_t(file.size()) == g.file_bytes(h->has_snapshot), "file size not checked");
}

}  // namespace

void kv_block_file(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  parse_as(file, {0x1234, 4, 37, 0});
  parse_as(file, {0x1234, 4, 37, 11});
  if (size < 40) return;
  uint64_t tag, bs, bytes, snap;
  std::memcpy(&tag, data + 8, 8);
  std::memcpy(&bs, data + 16, 8);
  std::memcpy(&bytes, data + 24, 8);
  std::memcpy(&snap, data + 32, 8);
  if (bs >= 1 && bs <= 4096 && bytes <= (1u << 20) && snap <= (1u << 20))
    parse_as(file, {tag, int64_t(bs), int64_t(bytes), int64_t(snap)});
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::kv_block_file)
