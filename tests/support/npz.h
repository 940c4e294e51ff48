// Minimal reader for numpy .npz archives written by np.savez (stored, uncompressed
// zip entries of .npy arrays; little-endian f4 / i8 / f8). Test-only support for the
// golden per-layer dumps.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::testing {

struct NpyArray {
  std::string dtype;           // "<f4", "<i8", "<f8"
  std::vector<int64_t> shape;
  std::vector<double> values;  // converted, row-major
};

inline std::map<std::string, NpyArray> read_npz(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto u16 = [&](size_t o) { uint16_t v; std::memcpy(&v, &buf[o], 2); return v; };
  auto u32 = [&](size_t o) { uint32_t v; std::memcpy(&v, &buf[o], 4); return v; };
  std::map<std::string, NpyArray> out;
  size_t off = 0;
  while (off + 30 <= buf.size() && u32(off) == 0x04034b50) {
    if (u16(off + 8) != 0) throw std::runtime_error("npz: compressed entries are not supported");
    const size_t name_len = u16(off + 26), extra_len = u16(off + 28);
    std::string name(&buf[off + 30], name_len);
    size_t data = off + 30 + name_len + extra_len;
    // .npy: magic(6) major minor, header len (u16 for v1), python-dict header.
    const size_t hlen = buf[data + 6] == 1 ? u16(data + 8) : u32(data + 8);
    const size_t hstart = data + (buf[data + 6] == 1 ? 10 : 12);
    std::string header(&buf[hstart], hlen);
    NpyArray a;
    const auto d = header.find("'descr': '") + 10;
    a.dtype = header.substr(d, header.find('\'', d) - d);
    const auto s0 = header.find('(', header.find("'shape'")) + 1;
    const std::string dims = header.substr(s0, header.find(')', s0) - s0);
    int64_t numel = 1;
    for (size_t p = 0; p < dims.size();) {
      const size_t q = dims.find(',', p);
      const std::string tok = dims.substr(p, q == std::string::npos ? std::string::npos : q - p);
      if (tok.find_first_of("0123456789") != std::string::npos) {
        a.shape.push_back(std::stoll(tok));
        numel *= a.shape.back();
      }
      if (q == std::string::npos) break;
      p = q + 1;
    }
    const char* raw = &buf[hstart + hlen];
    const size_t item = a.dtype == "<f4" ? 4 : 8;
    a.values.resize(numel);
    for (int64_t i = 0; i < numel; ++i) {
      if (a.dtype == "<f4") { float v; std::memcpy(&v, raw + 4 * i, 4); a.values[i] = v; }
      else if (a.dtype == "<f8") { double v; std::memcpy(&v, raw + 8 * i, 8); a.values[i] = v; }
      else if (a.dtype == "<i8") { int64_t v; std::memcpy(&v, raw + 8 * i, 8); a.values[i] = double(v); }
      else throw std::runtime_error("npz: unsupported dtype " + a.dtype);
    }
    off = (hstart + hlen) + numel * item;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
    out[name] = std::move(a);
  }
  return out;
}

}  // namespace troupe::testing
