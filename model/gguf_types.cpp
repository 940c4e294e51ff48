#include "model/gguf_types.h"

#include <array>

namespace troupe::model {
namespace {

constexpr std::array<GgmlTypeInfo, 6> kSupported{{
    {GgmlType::F32, "F32", 1, 4},
    {GgmlType::F16, "F16", 1, 2},
    {GgmlType::BF16, "BF16", 1, 2},
    {GgmlType::Q8_0, "Q8_0", 32, 34},   // f16 d, 32 x int8
    {GgmlType::Q4_0, "Q4_0", 32, 18},   // f16 d, 16 bytes of nibbles
    {GgmlType::MXFP4, "MXFP4", 32, 17}, // e8m0 scale, 16 bytes of E2M1 nibbles
}};

// Names of the ggml types troupe does not read, so an error says which one a file has.
// Index = type number; empty where ggml has no type (removed or never assigned).
constexpr std::array<const char*, 40> kAllNames{{
    "F32",     "F16",    "Q4_0",    "Q4_1",   "",        "",       "Q5_0",    "Q5_1",
    "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",   "Q4_K",    "Q5_K",   "Q6_K",    "Q8_K",
    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",  "IQ4_NL",  "IQ3_S",  "IQ2_S",   "IQ4_XS",
    "I8",      "I16",    "I32",     "I64",    "F64",     "IQ1_M",  "BF16",    "",
    "",        "",       "TQ1_0",   "TQ2_0",  "",        "",       "",        "MXFP4",
}};

}  // namespace

const GgmlTypeInfo* supported_ggml_type(uint32_t type) {
  for (const auto& t : kSupported)
    if (static_cast<uint32_t>(t.type) == type) return &t;
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  if (type < kAllNames.size() && kAllNames[type][0] != '\0') return kAllNames[type];
  return "type " + std::to_string(type);
}

const char* supported_ggml_type_names() { return "F32, F16, BF16, Q8_0, Q4_0, MXFP4"; }

}  // namespace troupe::model
