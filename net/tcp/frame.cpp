#include "net/tcp/frame.h"

#include <msgpack.hpp>

#include <stdexcept>

namespace troupe::net::tcp {
namespace {

using nlohmann::json;
using Packer = msgpack::packer<msgpack::sbuffer>;

void pack(Packer& pk, const json& v) {
  switch (v.type()) {
    case json::value_t::null:
    case json::value_t::discarded:
      pk.pack_nil();
      return;
    case json::value_t::boolean:
      return v.get<bool>() ? pk.pack_true() : pk.pack_false(), void();
    case json::value_t::number_integer:
      pk.pack(v.get<int64_t>());
      return;
    case json::value_t::number_unsigned:
      pk.pack(v.get<uint64_t>());
      return;
    case json::value_t::number_float:
      pk.pack(v.get<double>());
      return;
    case json::value_t::string:
      pk.pack(v.get_ref<const std::string&>());
      return;
    case json::value_t::binary:
      pk.pack_bin(uint32_t(v.get_binary().size()));
      pk.pack_bin_body(reinterpret_cast<const char*>(v.get_binary().data()),
                       uint32_t(v.get_binary().size()));
      return;
    case json::value_t::array:
      pk.pack_array(uint32_t(v.size()));
      for (const json& e : v) pack(pk, e);
      return;
    case json::value_t::object:
      pk.pack_map(uint32_t(v.size()));
      for (const auto& [k, e] : v.items()) {
        pk.pack(k);
        pack(pk, e);
      }
      return;
  }
}

// msgpack -> JSON. Map keys must be strings (JSON's rule, and the protocol's); bin and
// ext payloads have no use in the protocol and are refused.
json to_json(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return nullptr;
    case msgpack::type::BOOLEAN:
      return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER:
      return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER:
      return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return o.via.f64;
    case msgpack::type::STR:
      return std::string(o.via.str.ptr, o.via.str.size);
    case msgpack::type::ARRAY: {
      json a = json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(to_json(o.via.array.ptr[i]));
      return a;
    }
    case msgpack::type::MAP: {
      json m = json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object_kv& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) throw std::runtime_error("map keys must be strings");
        m[std::string(kv.key.via.str.ptr, kv.key.via.str.size)] = to_json(kv.val);
      }
      return m;
    }
    default:
      throw std::runtime_error("bin and ext values are not used by the protocol");
  }
}

}  // namespace

uint32_t frame_length(const unsigned char* header) {
  return uint32_t(header[0]) << 24 | uint32_t(header[1]) << 16 | uint32_t(header[2]) << 8 |
         uint32_t(header[3]);
}

std::string encode_frame(const json& message) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pack(pk, message);
  const auto n = uint32_t(buf.size());
  std::string out;
  out.reserve(kFrameHeaderBytes + buf.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(char((n >> shift) & 0xff));
  out.append(buf.data(), buf.size());
  return out;
}

FrameDecode decode_payload(std::string_view payload) {
  FrameDecode d;
  try {
    size_t off = 0;
    // No array, map or string can hold more elements than the payload has bytes: a
    // header claiming 2^32 of them fails at once instead of sizing a zone for them.
    const size_t n = payload.size();
    const msgpack::unpack_limit limit(n, n, n, n, n, kMaxNesting);
    msgpack::object_handle h = msgpack::unpack(payload.data(), payload.size(), off, nullptr,
                                               nullptr, limit);
    if (off != payload.size()) {
      d.error = "malformed frame: bytes after the msgpack value";
    } else if (h.get().type != msgpack::type::MAP) {
      d.error = "malformed frame: the payload must be a msgpack map";
    } else {
      d.message = to_json(h.get());
    }
  } catch (const std::exception& e) {
    d.error = std::string("malformed frame: ") + e.what();
  }
  return d;
}

}  // namespace troupe::net::tcp
