// The disk tier's block files (runtime/kv_cache/block_file.h): what is written parses
// back to the same header and payload; any flipped byte, a cut or padded file, another
// model's tag or block geometry, and a header whose tokens do not hash to its hash are
// all rejected with a reason, never parsed into a block.
#include "runtime/kv_cache/block_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "runtime/kv_cache/block_hash.h"
#include "support/test_paths.h"

namespace troupe::runtime {
namespace {

const BlockFileGeometry kGeometry{0x1234, 4, 37};  // odd payload size: byte tail checksummed

BlockFileHeader header() {
  BlockFileHeader h;
  h.parent_hash = kRootBlockHash;
  h.tokens = {5, 6, 7, 8};
  h.hash = block_hash(h.parent_hash, h.tokens);
  return h;
}

std::vector<std::byte> payload() {
  std::vector<std::byte> p(37);
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::byte(i * 7 + 1);
  return p;
}

TEST(BlockFile, RoundTrips) {
  const auto file = encode_block_file(kGeometry, header(), payload());
  EXPECT_EQ(int64_t(file.size()), kGeometry.file_bytes());
  std::string why;
  std::vector<std::byte> got(37);
  const auto h = parse_block_file(file, kGeometry, &why, got);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->hash, header().hash);
  EXPECT_EQ(h->parent_hash, header().parent_hash);
  EXPECT_EQ(h->tokens, header().tokens);
  EXPECT_EQ(got, payload());
}

TEST(BlockFile, EveryFlippedByteIsRejected) {
  const auto file = encode_block_file(kGeometry, header(), payload());
  for (size_t i = 0; i < file.size(); ++i) {
    auto bad = file;
    bad[i] ^= std::byte{0x40};
    std::string why;
    EXPECT_FALSE(parse_block_file(bad, kGeometry, &why)) << "byte " << i;
    EXPECT_FALSE(why.empty());
  }
}

TEST(BlockFile, CutPaddedAndForeignFilesAreRejected) {
  const auto file = encode_block_file(kGeometry, header(), payload());
  std::string why;
  for (size_t n : {size_t(0), size_t(7), size_t(48), file.size() - 1})
    EXPECT_FALSE(parse_block_file(std::span(file).first(n), kGeometry, &why)) << n;
  auto padded = file;
  padded.push_back(std::byte{0});
  EXPECT_FALSE(parse_block_file(padded, kGeometry, &why));
  EXPECT_NE(why.find("truncated or padded"), std::string::npos);
  BlockFileGeometry other = kGeometry;
  other.model_tag = 99;
  EXPECT_FALSE(parse_block_file(file, other, &why));
  EXPECT_NE(why.find("foreign"), std::string::npos);
  other = kGeometry;
  other.block_bytes = 36;
  EXPECT_FALSE(parse_block_file(file, other, &why));
  // A well-formed file whose header lies about its hash chain.
  BlockFileHeader lying = header();
  lying.hash ^= 1;
  EXPECT_FALSE(parse_block_file(encode_block_file(kGeometry, lying, payload()), kGeometry, &why));
  EXPECT_NE(why.find("hash chain"), std::string::npos);
}

// fuzz/make_corpus.py writes its seeds with its own port of hash_bytes: the valid seed
// must parse here, or the fuzzer would start with no valid file at all.
TEST(BlockFile, TheFuzzSeedWrittenByPythonParses) {
  std::ifstream in(std::string(TROUPE_TEST_DATA) +
                       "/../../fuzz/corpus/kv_block_file/valid-4-tokens-37-bytes.kvb",
                   std::ios::binary);
  ASSERT_TRUE(in);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string why;
  std::vector<std::byte> got(37);
  const auto h = parse_block_file(std::as_bytes(std::span(raw)), kGeometry, &why, got);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->tokens, header().tokens);
  EXPECT_EQ(got, payload());
}

// Format version 2: a file may carry the block's window snapshot, inside the checksum.
const BlockFileGeometry kSnapGeometry{0x1234, 4, 37, 11};

std::vector<std::byte> snapshot() {
  std::vector<std::byte> p(11);
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::byte(i * 3 + 2);
  return p;
}

TEST(BlockFile, ASnapshotRoundTripsAndIsCoveredByTheChecksum) {
  BlockFileHeader h = header();
  h.has_snapshot = true;
  const auto file = encode_block_file(kSnapGeometry, h, payload(), snapshot());
  EXPECT_EQ(int64_t(file.size()), kSnapGeometry.file_bytes(true));
  EXPECT_EQ(kSnapGeometry.file_bytes(true), kSnapGeometry.file_bytes() + 11);
  std::string why;
  std::vector<std::byte> got(37), snap;
  const auto parsed = parse_block_file(file, kSnapGeometry, &why, got, &snap);
  ASSERT_TRUE(parsed) << why;
  EXPECT_TRUE(parsed->has_snapshot);
  EXPECT_EQ(got, payload());
  EXPECT_EQ(snap, snapshot());
  for (size_t i = 0; i < file.size(); ++i) {
    auto bad = file;
    bad[i] ^= std::byte{0x01};
    EXPECT_FALSE(parse_block_file(bad, kSnapGeometry, &why)) << "byte " << i;
  }
  EXPECT_FALSE(parse_block_file(std::span(file).first(file.size() - 11), kSnapGeometry, &why));
  // A geometry that keeps no snapshots, or ones of another size, calls it foreign.
  EXPECT_FALSE(parse_block_file(file, kGeometry, &why));
  EXPECT_NE(why.find("snapshot"), std::string::npos);
  BlockFileGeometry other = kSnapGeometry;
  other.snapshot_bytes = 12;
  EXPECT_FALSE(parse_block_file(file, other, &why));
  // Without one, the file is the plain size and parses under both geometries.
  const auto plain = encode_block_file(kSnapGeometry, header(), payload());
  EXPECT_EQ(int64_t(plain.size()), kSnapGeometry.file_bytes());
  snap.assign(3, std::byte{1});
  const auto p = parse_block_file(plain, kSnapGeometry, &why, got, &snap);
  ASSERT_TRUE(p) << why;
  EXPECT_FALSE(p->has_snapshot);
  EXPECT_TRUE(snap.empty());
  EXPECT_TRUE(parse_block_file(plain, kGeometry, &why));
}

TEST(BlockFile, FormatVersion1IsForeign) {
  auto file = encode_block_file(kGeometry, header(), payload());
  file[7] = std::byte{1};
  std::string why;
  EXPECT_FALSE(parse_block_file(file, kGeometry, &why));
  EXPECT_NE(why.find("format version"), std::string::npos);
}

TEST(BlockFile, NameIsTheHash) {
  EXPECT_EQ(block_file_name(0xabcdefull), "0000000000abcdef.kvb");
}

}  // namespace
}  // namespace troupe::runtime
