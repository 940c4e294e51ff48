// safetensors: hand-built files, writer round trips, header validation, multi-file
// checkpoints with and without an index, and a small fuzz (truncations, byte flips).
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "kernels/check.h"
#include "tests/model/temp_dir.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

using Bytes = std::vector<uint8_t>;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// A file from a literal header and data section; declared_len overrides the length prefix.
std::string raw_file(const std::string& header, size_t data_bytes, int64_t declared_len = -1) {
  const uint64_t n = declared_len < 0 ? header.size() : uint64_t(declared_len);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out += char(i * 7 + 1);
  return out;
}

std::string open_error(const std::string& path) {
  try {
    Checkpoint::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsHandBuiltFile) {
  test::TempDir dir;
  // Two F32 values then an I64 (data not sorted by name; metadata ignored).
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string file = raw_file(header, 0);
  const float a[2] = {1.5f, -2.0f};
  const int64_t b = -7;
  file.append(reinterpret_cast<const char*>(a), 8).append(reinterpret_cast<const char*>(&b), 8);
  write_file(dir.file("m.safetensors"), file);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  ASSERT_EQ(ckpt.tensors().size(), 2u);
  const TensorInfo& ta = ckpt.get("a", {DType::F32}, {2});
  EXPECT_EQ(ta.nbytes, 8);
  float got[2];
  std::memcpy(got, ta.data, 8);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -2.0f);
  int64_t gb = 0;
  std::memcpy(&gb, ckpt.get("b", {DType::I64}, {1}).data, 8);
  EXPECT_EQ(gb, -7);
  EXPECT_FALSE(ckpt.has("__metadata__"));
}

TEST(Safetensors, WriterRoundTripAndDeterministicBytes) {
  test::TempDir dir;
  SafetensorsWriter w;
  w.add("z.f32", DType::F32, {2, 3}, Bytes(24, 0x11));
  w.add("a.bf16", DType::BF16, {5}, Bytes(10, 0x22));
  w.add("m.empty", DType::I8, {0, 4}, {});
  w.add("m.scalar", DType::I64, {}, Bytes(8, 0x33));
  w.add("e4m3", DType::F8_E4M3, {3}, {1, 2, 3});
  w.write(dir.file("x.safetensors"));
  w.write(dir.file("y.bin"));
  const std::string bytes = read_file(dir.file("x.safetensors"));
  EXPECT_EQ(bytes, read_file(dir.file("y.bin")));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);  // data section 8-aligned
  const std::string header = bytes.substr(8, n);
  EXPECT_LT(header.find("\"a.bf16\""), header.find("\"z.f32\""));        // keys sorted
  EXPECT_NE(header.find("\"data_offsets\":[0,24]"), std::string::npos);  // order added
  EXPECT_NE(header.find("\"data_offsets\":[24,34]"), std::string::npos);
  EXPECT_EQ(bytes.size(), 8 + n + 24 + 10 + 0 + 8 + 3);

  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.tensors().size(), 5u);
  const TensorInfo& t = ckpt.get("z.f32", {DType::F32}, {2, 3});
  EXPECT_EQ(t.file, dir.file("x.safetensors"));
  EXPECT_EQ(Bytes(t.data, t.data + t.nbytes), Bytes(24, 0x11));
  EXPECT_EQ(ckpt.get("m.empty", {DType::I8}, {0, 4}).nbytes, 0);
  EXPECT_EQ(ckpt.get("m.scalar", {DType::I64}, {}).numel(), 1);
  EXPECT_EQ(Bytes(ckpt.find("e4m3")->data, ckpt.find("e4m3")->data + 3), (Bytes{1, 2, 3}));
}

// The pathname /proc/self/maps gives the mapping that holds p ("" for anonymous memory).
std::string mapping_of(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, path);
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (lo <= at && at < hi) return path;
  }
  return "(not mapped)";
}

// A checkpoint that fits in memory is copied at load into this process's anonymous memory
// (model/file_copy.h: 2 MiB pages where the kernel gives them), byte for byte the file;
// TROUPE_MMAP_POPULATE=0 maps the file instead.
TEST(Safetensors, ACheckpointThatFitsIsCopiedOntoAnonymousPages) {
  test::TempDir dir;
  Bytes values(3 << 20);  // over one 2 MiB page
  for (size_t i = 0; i < values.size(); ++i) values[i] = uint8_t(i * 131 + (i >> 12));
  SafetensorsWriter w;
  w.add("w", DType::U8, {int64_t(values.size())}, values);
  w.write(dir.file("m.safetensors"));
  for (const bool lazy : {false, true}) {
    SCOPED_TRACE(lazy ? "TROUPE_MMAP_POPULATE=0" : "default");
    if (lazy) ::setenv("TROUPE_MMAP_POPULATE", "0", 1);
    std::optional<Checkpoint> ckpt;
    try {
      ckpt.emplace(Checkpoint::open(dir.path()));
    } catch (...) {
      ::unsetenv("TROUPE_MMAP_POPULATE");
      throw;
    }
    ::unsetenv("TROUPE_MMAP_POPULATE");
    const TensorInfo& t = ckpt->get("w", {DType::U8}, {int64_t(values.size())});
    EXPECT_EQ(Bytes(t.data, t.data + t.nbytes), values);
    const std::string where = mapping_of(t.data + t.nbytes - 1);
    if (lazy) EXPECT_EQ(where, std::filesystem::canonical(dir.file("m.safetensors")).string());
    else EXPECT_EQ(where, "");
  }
}

TEST(Safetensors, WriterRejectsBadEntries) {
  SafetensorsWriter w;
  EXPECT_THROW(w.add("x", DType::F32, {2}, Bytes(7)), Error);
  w.add("x", DType::F32, {2}, Bytes(8));
  EXPECT_THROW(w.add("x", DType::F32, {2}, Bytes(8)), Error);
  EXPECT_THROW(w.write("/nonexistent-dir/x.safetensors"), Error);
}

TEST(Safetensors, GetChecksDtypeAndShapeAndNamesTheTensor) {
  test::TempDir dir;
  SafetensorsWriter w;
  w.add("layers.0.attn.wkv.scale", DType::U8, {4, 8}, Bytes(32));
  w.write(dir.file("m.safetensors"));
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_NO_THROW(ckpt.get("layers.0.attn.wkv.scale", {DType::F8_E8M0, DType::U8}, {4, 8}));
  auto message = [&](std::initializer_list<DType> d, std::vector<int64_t> shape,
                     const std::string& name) {
    try {
      ckpt.get(name, d, shape);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string dtype_err = message({DType::F8_E8M0}, {4, 8}, "layers.0.attn.wkv.scale");
  EXPECT_NE(dtype_err.find("'layers.0.attn.wkv.scale'"), std::string::npos) << dtype_err;
  EXPECT_NE(dtype_err.find("expected F8_E8M0 [4, 8], found U8 [4, 8]"), std::string::npos)
      << dtype_err;
  const std::string shape_err = message({DType::U8}, {8, 4}, "layers.0.attn.wkv.scale");
  EXPECT_NE(shape_err.find("expected U8 [8, 4], found U8 [4, 8]"), std::string::npos) << shape_err;
  const std::string missing = message({DType::U8}, {1}, "nope");
  EXPECT_NE(missing.find("'nope' is missing"), std::string::npos) << missing;
}

struct BadHeader {
  const char* what;
  std::string header;
  size_t data_bytes;
  int64_t declared_len;  // -1: the true length
  const char* expect;    // substring of the error
};

TEST(Safetensors, BadHeadersAreErrors) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const BadHeader cases[] = {
      {"unknown dtype", R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, -1,
       "unknown dtype"},
      {"negative shape", R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0, -1,
       "non-negative"},
      {"float shape", R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, -1,
       "non-negative"},
      {"end past data", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 7, -1,
       "outside"},
      {"begin after end", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 8, -1,
       "outside"},
      {"size mismatch", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, -1,
       "needs 12"},
      {"overlap", "{" + ok_entry + R"(,"u":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})", 8,
       -1, "overlap"},
      {"huge shape",
       R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, -1,
       "too large"},
      {"missing offsets", R"({"t":{"dtype":"F32","shape":[2]}})", 8, -1, "data_offsets"},
      {"not an object", R"([1,2,3])", 0, -1, "not a JSON object"},
      {"entry not an object", R"({"t":3})", 0, -1, "not an object"},
      {"invalid JSON", R"({"t":{"dtype":"F32",)", 0, -1, "not valid JSON"},
      {"duplicate name", "{" + ok_entry + "," + ok_entry + "}", 8, -1, "twice"},
      {"length past file end", "{" + ok_entry + "}", 8, 1000, "header length"},
      {"length over 100 MB", "{" + ok_entry + "}", 8, int64_t(200) << 20, "header length"},
      {"length huge", "{" + ok_entry + "}", 8, INT64_MAX, "header length"},
  };
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  for (const auto& c : cases) {
    write_file(path, raw_file(c.header, c.data_bytes, c.declared_len));
    const std::string err = open_error(path);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": '" << err << "'";
  }
  write_file(path, "abc");
  EXPECT_NE(open_error(path).find("too short"), std::string::npos);
}

TEST(Safetensors, FolderErrors) {
  test::TempDir dir;
  EXPECT_NE(open_error(dir.file("missing")).find("does not exist"), std::string::npos);
  EXPECT_NE(open_error(dir.path()).find("no *.safetensors"), std::string::npos);
}

TEST(Safetensors, DuplicateAcrossFilesIsAnError) {
  test::TempDir dir;
  SafetensorsWriter a, b;
  a.add("shared", DType::U8, {1}, {1});
  b.add("shared", DType::U8, {1}, {2});
  b.add("other", DType::U8, {1}, {3});
  a.write(dir.file("a.safetensors"));
  b.write(dir.file("b.safetensors"));
  const std::string err = open_error(dir.path());
  EXPECT_NE(err.find("'shared' is in two files"), std::string::npos) << err;
}

TEST(Safetensors, IndexJsonSelectsFiles) {
  test::TempDir dir;
  SafetensorsWriter a, b, stray;
  a.add("x", DType::U8, {1}, {1});
  b.add("y", DType::U8, {1}, {2});
  stray.add("x", DType::U8, {1}, {9});  // not named by the index: never opened
  a.write(dir.file("part-1.safetensors"));
  b.write(dir.file("part-2.safetensors"));
  stray.write(dir.file("stray.safetensors"));
  std::ofstream(dir.file("model.safetensors.index.json"))
      << R"({"metadata":{},"weight_map":{"x":"part-1.safetensors","y":"part-2.safetensors"}})";
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.tensors().size(), 2u);
  EXPECT_EQ(*ckpt.get("x", {DType::U8}, {1}).data, 1);
  std::ofstream(dir.file("model.safetensors.index.json"))
      << R"({"weight_map":{"x":"part-2.safetensors","y":"part-2.safetensors"}})";
  EXPECT_NE(open_error(dir.path()).find("'x' is not in part-2.safetensors"), std::string::npos);
  std::ofstream(dir.file("model.safetensors.index.json")) << R"({"weight_map":[]})";
  EXPECT_NE(open_error(dir.path()).find("index"), std::string::npos);
}

TEST(Safetensors, OpensGoldenCheckpoint) {
  const Checkpoint ckpt = Checkpoint::open(std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7");
  EXPECT_EQ(ckpt.tensors().size(), 2939u);
  EXPECT_NO_THROW(ckpt.get("embed.weight", {DType::BF16}, {4096, 256}));
  EXPECT_NO_THROW(ckpt.get("layers.0.ffn.experts.0.w1.weight", {DType::I8, DType::U8}, {128, 128}));
}

// Truncations and byte flips of a valid file must give a checkpoint or a troupe::Error,
// never a crash; every tensor a corrupted file still yields is read end to end.
TEST(Safetensors, FuzzedFilesNeverCrash) {
  test::TempDir dir;
  SafetensorsWriter w;
  w.add("a", DType::F32, {2, 2}, Bytes(16, 1));
  w.add("bb", DType::BF16, {3}, Bytes(6, 2));
  w.add("c", DType::I64, {1}, Bytes(8, 3));
  w.write(dir.file("src.bin"));
  const std::string good = read_file(dir.file("src.bin"));
  const std::string path = dir.file("f.safetensors");
  std::mt19937 rng(1234);
  int opened = 0, rejected = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string bytes = good;
    if (iter % 3 == 0) {
      bytes.resize(rng() % good.size());
    } else {
      const int flips = 1 + int(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        // Mostly inside the length prefix and header, where the structure lives.
        const size_t at = rng() % (iter % 2 ? good.size() : std::min<size_t>(good.size(), 140));
        bytes[at] = char(rng() % 2 ? bytes[at] ^ (1 << (rng() % 8)) : rng());
      }
    }
    write_file(path, bytes);
    try {
      const Checkpoint ckpt = Checkpoint::open(path);
      uint64_t sum = 0;
      for (const auto& [name, t] : ckpt.tensors())
        for (int64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      ++opened;
      (void)sum;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(opened, 0);  // flips inside the data section leave a valid file
}

}  // namespace
}  // namespace troupe::model
