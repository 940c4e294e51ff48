// GGUF (v2 and v3, little-endian) reader: the header, every metadata key-value pair, the
// tensor table and where each tensor's bytes lie. A file is mmapped; parse() reads a byte
// span in place (the fuzz target and tests use it). Every count, length and offset is
// checked against the bytes that are actually there before anything is allocated or a
// pointer formed, so a truncated or hostile file is a troupe::Error naming the file and
// the field, never a crash or an allocation the file's size does not justify.
//
//   [ "GGUF" | version u32 | tensor_count u64 | kv_count u64 ]
//   [ kv_count x (key: string, type u32, value) ]
//   [ tensor_count x (name: string, n_dims u32, ne[n_dims] u64, ggml type u32, offset u64) ]
//   [ padding to general.alignment (32 when absent) ]
//   [ data section: tensor i at data + offset_i (offset_i % alignment == 0) ]
//
// A string is a u64 length and that many bytes (no terminator).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "model/gguf_types.h"

namespace troupe::model {

// GGUF's metadata value types (the numbers are the format's).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* to_string(GgufType t);

// An array's elements, kept by kind: integers and bools as int64 (a u64 element above
// INT64_MAX is rejected), floats as double, strings as strings. Arrays of arrays are
// rejected (no model metadata uses them).
struct GgufArray {
  GgufType elem = GgufType::U8;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  size_t size() const;
};

struct GgufValue {
  // u64 for unsigned types, int64 for signed ones, double for F32/F64.
  using Variant_ = std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray>;
  GgufType type = GgufType::U8;
  Variant_ value;
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;        // ne[0] is contiguous (a row), then rows, planes, ...
  uint64_t offset = 0;            // from the data section's start
  const uint8_t* data = nullptr;  // into the mapping (or the parsed span)
  int64_t nbytes = 0;
  int64_t numel() const;
  int64_t rows() const { return ne.empty() || ne[0] == 0 ? 0 : numel() / ne[0]; }
};

class GgufFile {
 public:
  static GgufFile open(const std::string& path);
  // Reads bytes in place (they must outlive the result); source names it in errors.
  static GgufFile parse(std::span<const uint8_t> bytes, const std::string& source);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& source() const { return source_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensor* find_tensor(const std::string& name) const;

  // For a loader that rewrites tensors in place (model/llama_weights.cpp's row groups): the
  // bytes can be rewritten only where they are this process's own anonymous copy (open()'s
  // default read), not TROUPE_GGUF_MMAP=1's file mapping nor parse()'s span.
  bool rewritable() const;
  // Runs edit with the whole mapping writable (one mprotect each way, so its 2 MiB pages
  // stay whole), then read-only again. edit gets each tensor's bytes from writable_data
  // and marks what it rewrote; a rewritten tensor is no longer GGUF bytes, and a later
  // reader asking rewritten() must not take it as such. Needs rewritable().
  void edit_in_place(const std::function<void()>& edit) const;
  uint8_t* writable_data(const GgufTensor& t) const;  // inside edit_in_place only
  void mark_rewritten(const GgufTensor& t) const;
  bool rewritten(const GgufTensor& t) const;

  // Typed reads; a missing key or another type is an error naming the key and the file.
  std::string get_string(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;  // any integer type, >= 0
  uint64_t get_uint_or(const std::string& key, uint64_t fallback) const;
  double get_float(const std::string& key) const;   // F32 or F64
  double get_float_or(const std::string& key, double fallback) const;
  const GgufArray& get_array(const std::string& key) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::string source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
  friend class GgufParser;
};

}  // namespace troupe::model
