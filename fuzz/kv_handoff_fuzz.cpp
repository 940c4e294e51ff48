// A KV hand-off as another engine's process sends it (runtime/kv_transfer/
// kv_handoff_wire.h): framing, then whether this engine (the v41-tiny preset, 16-token
// blocks) can continue it, then loading its slot state. Contract: troupe::Error only from
// the decoder; what decodes encodes back to the same bytes; check_kv_handoff never
// throws, and a hand-off it accepts loads without error.
#include <vector>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "model/config.h"
#include "runtime/kv_cache/paged_kv.h"
#include "runtime/kv_cache/slot_state.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"

namespace troupe::fuzz {

void kv_handoff(const uint8_t* data, size_t size) {
  static const model::ModelConfig m = model::preset_config("v41-tiny");
  static runtime::PagedKvStorage storage(m, 16, 4, 1);
  const auto* p = reinterpret_cast<const std::byte*>(data);
  const std::vector<std::byte> wire(p, p + size);
  runtime::KvHandoff h;
  try {
    h = runtime::decode_kv_handoff(wire);
  } catch (const Error&) {
    return;
  }
  TROUPE_CHECK(runtime::encode_kv_handoff(h) == wire, "a KV hand-off that does not round-trip");
  const runtime::KvHandoffShape shape = runtime::KvHandoffShape::of(m, 16, 3);
  if (!runtime::check_kv_handoff(h, shape, m).empty()) return;
  runtime::SlotStateView slot;
  TROUPE_CHECK(runtime::parse_slot_state(h.slot_state(), m, slot).empty(), "checked, then unparsable");
  storage.load_slot_state(0, slot);
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::kv_handoff)
