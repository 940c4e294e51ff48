// The ggml tensor types a GGUF file may hold, with their block geometry, and which of
// them troupe reads. A type is `block_elems` values stored in `block_bytes` bytes; a
// row's length (ne[0]) is a whole number of blocks.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::model {

// The numbering is ggml's (it is the type field of a GGUF tensor record).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  BF16 = 30,
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
};

// The layout of a type troupe reads, or null for any other number.
const GgmlTypeInfo* supported_ggml_type(uint32_t type);
// ggml's name of a type number ("Q4_K", ...), or "type N" when unknown: for errors.
std::string ggml_type_name(uint32_t type);
// "F32, F16, BF16, Q8_0, Q4_0, MXFP4": what the errors list as readable.
const char* supported_ggml_type_names();

}  // namespace troupe::model
