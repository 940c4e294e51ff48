// The TCP API's framing (docs/serve.md, "TCP API"): every message, both ways, is a
// 4-byte big-endian payload length followed by that many bytes of one msgpack map.
//
//   std::string bytes = encode_frame({{"type", "abort"}, {"id", 7}});
//   uint32_t n = frame_length(header);          // the 4 bytes read first
//   FrameDecode d = decode_payload(payload);    // the n bytes after them
//
// Messages are handled as nlohmann::json values inside troupe, so a submit frame goes
// through the same request checks as an HTTP body (net/openai); msgpack-c does the wire.
// Pure logic, no sockets: the server, the example client and the tests share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::net::tcp {

constexpr size_t kFrameHeaderBytes = 4;
// Nesting deeper than this in one payload is refused (a malformed frame, not a crash).
constexpr size_t kMaxNesting = 32;

// The payload length in a frame header; `header` holds kFrameHeaderBytes bytes.
uint32_t frame_length(const unsigned char* header);

// Header + msgpack payload of `message` (any JSON value; protocol messages are maps).
// Binary strings are not produced: JSON strings become msgpack str.
std::string encode_frame(const nlohmann::json& message);

// One payload -> its value, or why it is not a single well-formed msgpack map.
struct FrameDecode {
  std::optional<nlohmann::json> message;  // a JSON object when set
  std::string error;                      // set when message is not
};
FrameDecode decode_payload(std::string_view payload);

}  // namespace troupe::net::tcp
