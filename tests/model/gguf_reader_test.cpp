// The GGUF reader on files built byte by byte here (a builder independent of GgufWriter):
// every metadata value type, alignment and data offsets, and each kind of bad file, which
// must be a troupe::Error that says what is wrong (never a crash or a huge allocation).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/llama_config.h"
#include "model/temp_dir.h"

namespace troupe::model {
namespace {

// Little-endian bytes of a GGUF file, field by field.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    uint8_t x[sizeof(T)];
    std::memcpy(x, &v, sizeof(T));
    b.insert(b.end(), x, x + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
  }
  Bytes& key(const std::string& k, uint32_t type) { return str(k).put<uint32_t>(type); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Bytes& pad_to(size_t align) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
};

GgufFile parse(const Bytes& x) { return GgufFile::parse(x.b, "test.gguf"); }

void expect_error(const Bytes& x, const std::string& needle) {
  try {
    parse(x);
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GgufReader, ReadsEveryMetadataValueType) {
  Bytes x;
  x.header(0, 14);
  x.key("u8", 0).put<uint8_t>(200);
  x.key("i8", 1).put<int8_t>(-100);
  x.key("u16", 2).put<uint16_t>(60000);
  x.key("i16", 3).put<int16_t>(-30000);
  x.key("u32", 4).put<uint32_t>(4000000000u);
  x.key("i32", 5).put<int32_t>(-2000000000);
  x.key("f32", 6).put<float>(1.5f);
  x.key("bool", 7).put<uint8_t>(1);
  x.key("string", 8).str("héllo");
  x.key("strings", 9).put<uint32_t>(8).put<uint64_t>(3).str("a").str("").str("ccc");
  x.key("u64", 10).put<uint64_t>(1ull << 40);
  x.key("i64", 11).put<int64_t>(-(1ll << 40));
  x.key("f64", 12).put<double>(-0.25);
  x.key("i16s", 9).put<uint32_t>(3).put<uint64_t>(2).put<int16_t>(-1).put<int16_t>(7);
  const GgufFile f = parse(x);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 14u);
  EXPECT_EQ(f.get_uint("u8"), 200u);
  EXPECT_EQ(std::get<int64_t>(f.find("i8")->value), -100);
  EXPECT_EQ(f.get_uint("u16"), 60000u);
  EXPECT_EQ(std::get<int64_t>(f.find("i16")->value), -30000);
  EXPECT_EQ(f.get_uint("u32"), 4000000000u);
  EXPECT_EQ(std::get<int64_t>(f.find("i32")->value), -2000000000);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(std::get<bool>(f.find("bool")->value), true);
  EXPECT_EQ(f.get_string("string"), "héllo");
  EXPECT_EQ(f.get_array("strings").strings, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_uint("u64"), 1ull << 40);
  EXPECT_EQ(std::get<int64_t>(f.find("i64")->value), -(1ll << 40));
  EXPECT_EQ(f.get_float("f64"), -0.25);
  EXPECT_EQ(f.get_array("i16s").ints, (std::vector<int64_t>{-1, 7}));
  EXPECT_EQ(f.find("i16")->type, GgufType::I16);
  // Typed reads name the key when the type is wrong or the key is missing.
  EXPECT_THROW(f.get_string("u8"), Error);
  EXPECT_THROW(f.get_uint("i8"), Error);
  EXPECT_THROW(f.get_float("missing"), Error);
  EXPECT_EQ(f.get_uint_or("missing", 9), 9u);
}

// Two tensors with a 64-byte alignment: the data section starts at the next multiple of
// 64 after the header, and each tensor's bytes are where its offset says.
Bytes two_tensor_file(uint32_t alignment = 64) {
  Bytes x;
  x.header(2, 1).key("general.alignment", 4).put<uint32_t>(alignment);
  x.tensor("a", {3}, 0, 0);                   // 3 x f32 = 12 bytes
  x.tensor("b", {32, 2}, 8, alignment);       // 2 q8_0 blocks = 68 bytes
  x.pad_to(alignment);
  for (float v : {1.0f, 2.0f, 3.0f}) x.put<float>(v);
  x.pad_to(alignment);
  for (int i = 0; i < 68; ++i) x.put<uint8_t>(uint8_t(i));
  return x;
}

TEST(GgufReader, PlacesTensorsByAlignmentAndOffset) {
  const Bytes x = two_tensor_file();
  const GgufFile f = parse(x);
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensor& a = *f.find_tensor("a");
  const GgufTensor& b = *f.find_tensor("b");
  EXPECT_EQ((a.data - x.b.data()) % 64, 0);
  float a1;
  std::memcpy(&a1, a.data + 4, 4);
  EXPECT_EQ(a1, 2.0f);
  EXPECT_EQ(a.nbytes, 12);
  EXPECT_EQ(b.type, GgmlType::Q8_0);
  EXPECT_EQ(b.ne, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(b.rows(), 2);
  EXPECT_EQ(b.nbytes, 68);
  EXPECT_EQ(b.data - a.data, 64);
  EXPECT_EQ(b.data[67], 67);
  EXPECT_EQ(f.find_tensor("c"), nullptr);
}

TEST(GgufReader, EveryTruncationIsAnError) {
  const Bytes full = two_tensor_file();
  for (size_t n = 0; n < full.b.size(); ++n) {
    Bytes cut;
    cut.b.assign(full.b.begin(), full.b.begin() + n);
    EXPECT_THROW(parse(cut), Error) << n;
  }
  EXPECT_NO_THROW(parse(full));
}

TEST(GgufReader, BadHeadersSayWhatIsWrong) {
  Bytes magic;
  magic.b = {'G', 'G', 'M', 'L', 3, 0, 0, 0};
  expect_error(magic, "not a GGUF file");
  expect_error(Bytes().header(0, 0, 1), "GGUF version 1 is not supported");
  expect_error(Bytes().header(0, 0, 4), "GGUF version 4");
  // Counts no file of this size could hold: refused before anything is reserved.
  expect_error(Bytes().header(1ull << 62, 0), "tensor_count");
  expect_error(Bytes().header(0, ~0ull), "metadata_kv_count");
  // One metadata pair after a header announcing it: (bytes of the pair, expected message).
  const std::vector<std::pair<Bytes, std::string>> bad_kvs = {
      {Bytes().put<uint64_t>(1ull << 60).put<uint64_t>(0), "longer than 1 GiB"},
      {Bytes().put<uint64_t>(1000).put<uint32_t>(0).put<uint64_t>(0), "truncated"},
      {Bytes().key("a", 9).put<uint32_t>(10).put<uint64_t>(1ull << 61), "array length"},
      {Bytes().key("a", 9).put<uint32_t>(9).put<uint64_t>(0), "array of arrays"},
      {Bytes().key("a", 13).put<uint32_t>(0), "unknown value type 13"},
      {Bytes().key("a", 7).put<uint8_t>(2).put<uint32_t>(0), "bool byte 2"},
      {Bytes().key("general.alignment", 4).put<uint32_t>(3), "not a power of two"},
      {Bytes().key("general.alignment", 10).put<uint64_t>(32), "general.alignment must be a u32"},
  };
  for (const auto& [kv, needle] : bad_kvs) {
    Bytes x;
    x.header(0, 1).b.insert(x.b.end(), kv.b.begin(), kv.b.end());
    expect_error(x, needle);
  }
  Bytes twice;
  twice.header(0, 2).key("a", 4).put<uint32_t>(1).key("a", 4).put<uint32_t>(2);
  expect_error(twice, "'a' repeats");
}

TEST(GgufReader, BadTensorRecordsSayWhatIsWrong) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes) {
    Bytes x;
    x.header(1, 0).tensor("t", ne, type, offset).pad_to(32);
    x.b.resize(x.b.size() + data_bytes, 0);
    return x;
  };
  expect_error(one({2, 2}, 12, 0, 1000), "type Q4_K, which troupe does not read");
  expect_error(one({2, 2}, 200, 0, 1000), "type type 200");
  expect_error(one({1, 1, 1, 1, 1}, 0, 0, 1000), "5 dimensions");
  expect_error(one({16}, 8, 0, 1000), "not a multiple of Q8_0's block of 32");
  expect_error(one({1ull << 40, 1ull << 20}, 0, 0, 1000), "more than 2^48 elements");
  expect_error(one({4}, 0, 8, 1000), "not a multiple of the alignment 32");
  expect_error(one({300}, 0, 0, 1000), "truncated: tensor 't' needs bytes [0, 1200)");
  expect_error(one({4}, 0, ~0ull - 31, 1000), "truncated: tensor 't'");
  Bytes overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad_to(32);
  overlap.b.resize(overlap.b.size() + 128, 0);
  expect_error(overlap, "'a' and 'b' overlap");
  Bytes dup;
  dup.header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_to(32);
  dup.b.resize(dup.b.size() + 64, 0);
  expect_error(dup, "'a' appears twice");
}

TEST(GgufReader, WriterOutputReadsBack) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("general.alignment", 128);
  w.set_strings("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
  w.set_f32s("scores", {0.5f, -1.0f});
  w.set_i32s("types", {1, 2, 3});
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) - 30.0f;
  w.add_tensor("x", GgmlType::F16, {32, 2}, v);
  w.add_tensor("y", GgmlType::F32, {5}, {1, 2, 3, 4, 5});
  const std::vector<uint8_t> bytes = w.bytes();
  const GgufFile f = GgufFile::parse(bytes, "w.gguf");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").strings.size(), 3u);
  EXPECT_EQ(f.get_array("scores").floats, (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(f.get_array("types").ints, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ((f.find_tensor("y")->data - bytes.data()) % 128, 0);
  EXPECT_EQ(f.find_tensor("x")->nbytes, 128);

  test::TempDir dir;
  w.write(dir.file("w.gguf"));
  const GgufFile g = GgufFile::open(dir.file("w.gguf"));
  EXPECT_EQ(g.tensors().size(), 2u);
  float y4;
  std::memcpy(&y4, g.find_tensor("y")->data + 16, 4);
  EXPECT_EQ(y4, 5.0f);
  EXPECT_THROW(GgufFile::open(dir.file("absent.gguf")), Error);
}

TEST(GgufReader, LlamaConfigRejectsOtherArchitecturesAndBadValues) {
  auto config_of = [](const std::string& arch, uint32_t heads) {
    GgufWriter w;
    w.set_string("general.architecture", arch);
    w.set_u32("llama.context_length", 64);
    w.set_u32("llama.embedding_length", 64);
    w.set_u32("llama.block_count", 1);
    w.set_u32("llama.feed_forward_length", 96);
    w.set_u32("llama.attention.head_count", heads);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_u32("llama.vocab_size", 10);
    const auto b = w.bytes();
    return llama_config_from_gguf(GgufFile::parse(b, "c.gguf"));
  };
  EXPECT_EQ(config_of("llama", 4).head_dim, 16);
  EXPECT_EQ(config_of("llama", 4).kv_heads, 4);
  try {
    config_of("gemma", 4);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("architecture 'gemma' is not supported"), std::string::npos);
  }
  EXPECT_THROW(config_of("llama", 5), Error);   // 64 % 5 != 0
  EXPECT_THROW(config_of("llama", 0), Error);
}

}  // namespace
}  // namespace troupe::model
