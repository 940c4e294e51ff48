// The bytes another rank's process sends before and between steps: its PeerAddress at
// the bootstrap all-gather (runtime/dep/peer_address.h) and a DP-sync message of the step
// metadata over UCX (runtime/collectives/step_metadata_wire.h). Both decoders run on the
// same input. Contract: troupe::Error only, and whatever decodes encodes back to the very
// same bytes (the formats have one encoding per value).
#include <vector>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "runtime/collectives/step_metadata_wire.h"
#include "runtime/dep/peer_address.h"

namespace troupe::fuzz {

void peer_wire(const uint8_t* data, size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  const std::vector<std::byte> wire(p, p + size);
  try {
    const runtime::PeerAddress a = runtime::decode_peer_address(wire);
    TROUPE_CHECK(runtime::encode_peer_address(a) == wire, "a peer address that does not round-trip");
  } catch (const Error&) {
  }
  try {
    const auto m = runtime::collectives::decode_step_metadata_message(wire);
    TROUPE_CHECK(runtime::collectives::encode_step_metadata_message(m) == wire,
                 "a DP-sync message that does not round-trip");
  } catch (const Error&) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::peer_wire)
