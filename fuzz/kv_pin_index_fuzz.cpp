// The disk tier's index of saved prefixes (runtime/kv_cache/pin_index.h), as a restart
// reads it from --kv-disk-dir. Contract: parse_pin_index never throws; what it accepts
// has valid names and tokens, and encodes back to an index that parses the same.
#include "fuzz/targets.h"
#include "kernels/check.h"
#include "runtime/kv_cache/pin_index.h"

namespace troupe::fuzz {

void kv_pin_index(const uint8_t* data, size_t size) {
  std::string why;
  const auto pins = runtime::parse_pin_index(as_text(data, size), &why);
  if (!pins) return;
  for (const runtime::SavedPrefix& p : *pins) {
    TROUPE_CHECK(!p.name.empty() && p.name.size() <= runtime::kMaxPinNameBytes, "bad name accepted");
    for (int32_t t : p.tokens) TROUPE_CHECK(t >= 0, "negative token accepted");
  }
  const auto again = runtime::parse_pin_index(runtime::encode_pin_index(*pins), &why);
  TROUPE_CHECK(again && *again == *pins, "the index does not round-trip: ", why);
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::kv_pin_index)
