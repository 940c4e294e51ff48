#include "model/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "kernels/check.h"
#include "kernels/quant.h"
#include "model/gguf.h"
#include "model/gguf_dequant.h"

namespace troupe::model {
namespace {

// resize + memcpy rather than insert: g++ 12 -O3 reports a false -Wstringop-overflow on
// the insert of a few bytes into an empty vector.
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_u16(std::vector<uint8_t>& out, uint16_t v) { put<uint16_t>(out, v); }

}  // namespace

std::vector<uint8_t> encode_ggml(GgmlType type, const std::vector<float>& values) {
  const GgmlTypeInfo* info = supported_ggml_type(static_cast<uint32_t>(type));
  TROUPE_CHECK(info != nullptr, "encode_ggml: unsupported type");
  const int64_t n = static_cast<int64_t>(values.size());
  TROUPE_CHECK(n % info->block_elems == 0, "encode_ggml: ", n, " values are not whole ",
               info->name, " blocks");
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(n / info->block_elems * info->block_bytes));
  switch (type) {
    case GgmlType::F32:
      for (float v : values) put<float>(out, v);
      break;
    case GgmlType::F16:
      for (float v : values) put_u16(out, f32_to_f16(v));
      break;
    case GgmlType::BF16:
      for (float v : values) put_u16(out, kernels::bf16_encode(v));
      break;
    case GgmlType::Q8_0:
      out.resize(static_cast<size_t>(n / 32 * 34));
      quantize_q8_0(values.data(), n, out.data());
      break;
    case GgmlType::Q4_0:
      out.resize(static_cast<size_t>(n / 32 * 18));
      quantize_q4_0(values.data(), n, out.data());
      break;
    case GgmlType::MXFP4: {
      // kernels' mxfp4 quantizer: codes packed even-low, scales apart; ggml keeps a
      // block's scale first and pairs element i with i + 16.
      std::vector<uint8_t> q(static_cast<size_t>(n / 2)), s(static_cast<size_t>(n / 32));
      kernels::quantize_mxfp4(values.data(), n, q.data(), s.data());
      for (int64_t b = 0; b < n / 32; ++b) {
        out.push_back(s[b]);
        auto code = [&](int64_t i) { return (q[(b * 32 + i) / 2] >> (4 * (i & 1))) & 0x0F; };
        for (int64_t i = 0; i < 16; ++i)
          out.push_back(static_cast<uint8_t>(code(i) | (code(i + 16) << 4)));
      }
      break;
    }
  }
  return out;
}

void GgufWriter::put_key(const std::string& key, uint32_t type) {
  put_string(kv_, key);
  put<uint32_t>(kv_, type);
  ++kv_count_;
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  put_key(key, uint32_t(GgufType::U32));
  put<uint32_t>(kv_, v);
  if (key == "general.alignment") alignment_ = v;
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  put_key(key, uint32_t(GgufType::I32));
  put<int32_t>(kv_, v);
}
void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  put_key(key, uint32_t(GgufType::U64));
  put<uint64_t>(kv_, v);
}
void GgufWriter::set_f32(const std::string& key, float v) {
  put_key(key, uint32_t(GgufType::F32));
  put<float>(kv_, v);
}
void GgufWriter::set_f64(const std::string& key, double v) {
  put_key(key, uint32_t(GgufType::F64));
  put<double>(kv_, v);
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  put_key(key, uint32_t(GgufType::BOOL));
  put<uint8_t>(kv_, v ? 1 : 0);
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  put_key(key, uint32_t(GgufType::STRING));
  put_string(kv_, v);
}
void GgufWriter::set_strings(const std::string& key, const std::vector<std::string>& v) {
  put_key(key, uint32_t(GgufType::ARRAY));
  put<uint32_t>(kv_, uint32_t(GgufType::STRING));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_string(kv_, s);
}
void GgufWriter::set_i32s(const std::string& key, const std::vector<int32_t>& v) {
  put_key(key, uint32_t(GgufType::ARRAY));
  put<uint32_t>(kv_, uint32_t(GgufType::I32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put<int32_t>(kv_, x);
}
void GgufWriter::set_f32s(const std::string& key, const std::vector<float>& v) {
  put_key(key, uint32_t(GgufType::ARRAY));
  put<uint32_t>(kv_, uint32_t(GgufType::F32));
  put<uint64_t>(kv_, v.size());
  for (float x : v) put<float>(kv_, x);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                            const std::vector<float>& values) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  TROUPE_CHECK(n == static_cast<int64_t>(values.size()), "GgufWriter: tensor '", name, "' has ",
               values.size(), " values for ", n, " elements");
  add_raw_tensor(name, static_cast<uint32_t>(type), std::move(ne), encode_ggml(type, values));
}

void GgufWriter::add_raw_tensor(const std::string& name, uint32_t type, std::vector<int64_t> ne,
                                std::vector<uint8_t> bytes) {
  tensors_.push_back({name, type, std::move(ne), std::move(bytes)});
}

uint64_t GgufWriter::alignment() const { return alignment_ == 0 ? 1 : alignment_; }

std::vector<uint8_t> GgufWriter::bytes() const {
  const uint64_t a = alignment();
  auto align = [a](uint64_t x) { return (x + a - 1) / a * a; };
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_count_);
  out.insert(out.end(), kv_.begin(), kv_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, offset);
    offset = align(offset + t.bytes.size());
  }
  for (const Tensor& t : tensors_) {
    out.resize(align(out.size()), 0);
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) TROUPE_FAIL("cannot write '" << path << "'");
}

}  // namespace troupe::model
