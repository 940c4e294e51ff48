// A GGUF v3 writer for the files tests and benchmarks make themselves: metadata in the
// order set, tensors in the order added, each at the next multiple of the alignment.
// Tensors are given as f32 values and stored in any type troupe reads (quantized here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf_types.h"

namespace troupe::model {

class GgufWriter {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);

  // ne[0] first (the row length), as in the file; values.size() must be their product.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                  const std::vector<float>& values);
  // Already-encoded bytes (tests that build blocks by hand).
  void add_raw_tensor(const std::string& name, uint32_t type, std::vector<int64_t> ne,
                      std::vector<uint8_t> bytes);

  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const;  // throws troupe::Error on I/O failure

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
  };
  void put_key(const std::string& key, uint32_t type);
  uint64_t alignment() const;
  std::vector<uint8_t> kv_;  // the encoded key-value pairs
  uint64_t kv_count_ = 0;
  uint64_t alignment_ = 32;
  std::vector<Tensor> tensors_;
};

// Encodes f32 values as a tensor of the given type (n a multiple of its block).
std::vector<uint8_t> encode_ggml(GgmlType type, const std::vector<float>& values);

}  // namespace troupe::model
