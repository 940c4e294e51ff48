// The TCP API (net/tcp): the bytes are a client's stream of frames (4-byte big-endian
// length, msgpack payload); each whole frame is decoded and parsed as a submit or abort,
// and the server's answer is encoded as Connection::on_frame would (error frame, id key).
// Contract: nothing thrown while handling a connection may escape it (issue 9), so no
// exception is expected here at all; a bad frame is an error frame.
#include "fuzz/targets.h"
#include "net/tcp/frame.h"
#include "net/tcp/protocol.h"

namespace troupe::fuzz {
namespace {

using namespace net::tcp;

constexpr std::string_view kApiKey;  // the daemon's default: no key

void on_frame(std::string_view payload) {
  FrameDecode d = decode_payload(payload);
  if (!d.message) return (void)encode_frame(error_message(nullptr, d.error));
  Command c = parse_command(*d.message, tiny_serving_info(), tiny_tokenizer(), kApiKey);
  if (const auto* err = std::get_if<CommandError>(&c))
    return (void)encode_frame(error_message(err->id, err->message));
  const json& id = std::holds_alternative<AbortCommand>(c) ? std::get<AbortCommand>(c).id
                                                           : std::get<SubmitCommand>(c).id;
  (void)id_key(id);  // the connection's table of requests in flight
  (void)encode_frame(error_message(id, "no request with this id is in flight"));
}

}  // namespace

void tcp_frame(const uint8_t* data, size_t size) {
  while (size >= kFrameHeaderBytes) {
    const uint32_t n = frame_length(data);
    data += kFrameHeaderBytes;
    size -= kFrameHeaderBytes;
    if (n > size) return;  // the rest of the frame never arrives
    on_frame(as_text(data, n));
    data += n;
    size -= n;
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::tcp_frame)
