#include "runtime/collectives/step_metadata_wire.h"

#include "kernels/check.h"
#include "runtime/wire_bytes.h"

namespace troupe::runtime::collectives {
namespace {

constexpr uint32_t kMaxRanks = 65536;

bool get_flag(WireReader& in, const char* field) {
  const uint8_t v = in.get<uint8_t>(field);
  TROUPE_CHECK(v <= 1, "DP-sync message: ", field, " is ", int(v), ", not 0 or 1");
  return v == 1;
}

}  // namespace

std::vector<std::byte> encode_step_metadata_message(const StepMetadataMessage& m) {
  std::vector<std::byte> out;
  out.reserve(62 + 8 * m.payload.tokens.size());
  put_le<int32_t>(out, m.from);
  put_le<int32_t>(out, m.to);
  put_le<int64_t>(out, m.step);
  put_le<int32_t>(out, m.round);
  const StepMetadata& p = m.payload;
  put_le<int64_t>(out, p.step_min);
  put_le<int64_t>(out, p.step_max);
  put_le<uint32_t>(out, static_cast<uint32_t>(p.tokens.size()));
  for (const int64_t t : p.tokens) put_le<int64_t>(out, t);
  put_le<uint8_t>(out, p.any_work ? 1 : 0);
  put_le<int64_t>(out, p.placement_ready);
  put_le<uint8_t>(out, p.any_failed ? 1 : 0);
  put_le<uint8_t>(out, p.any_draft ? 1 : 0);
  put_le<int64_t>(out, p.draft_placement_ready);
  return out;
}

StepMetadataMessage decode_step_metadata_message(const std::vector<std::byte>& wire) {
  WireReader in(wire, "DP-sync message");
  StepMetadataMessage m;
  m.from = in.get<int32_t>("from");
  m.to = in.get<int32_t>("to");
  m.step = in.get<int64_t>("step");
  m.round = in.get<int32_t>("round");
  StepMetadata& p = m.payload;
  p.step_min = in.get<int64_t>("step_min");
  p.step_max = in.get<int64_t>("step_max");
  const uint32_t n = in.get<uint32_t>("rank count");
  TROUPE_CHECK(n <= kMaxRanks, "DP-sync message: ", n, " ranks (at most ", kMaxRanks, ")");
  for (uint32_t i = 0; i < n; ++i) p.tokens.push_back(in.get<int64_t>("tokens"));
  p.any_work = get_flag(in, "any_work");
  p.placement_ready = in.get<int64_t>("placement_ready");
  p.any_failed = get_flag(in, "any_failed");
  p.any_draft = get_flag(in, "any_draft");
  p.draft_placement_ready = in.get<int64_t>("draft_placement_ready");
  in.expect_end();
  return m;
}

}  // namespace troupe::runtime::collectives
