#include "runtime/collectives/step_metadata_wire.h"

#include <bit>
#include <cmath>

#include "kernels/check.h"
#include "runtime/wire_bytes.h"

namespace troupe::runtime::collectives {
namespace {

constexpr uint32_t kMaxRanks = 65536;
constexpr uint32_t kMaxSide = 65;  // num_speculative_tokens <= 64

bool get_flag(WireReader& in, const char* field) {
  const uint8_t v = in.get<uint8_t>(field);
  TROUPE_CHECK(v <= 1, "DP-sync message: ", field, " is ", int(v), ", not 0 or 1");
  return v == 1;
}

// The draft-length summary (draft_step_summary.h). Its histogram goes sparse: a side
// (kmax + 1; 0 for none) and the nonzero cells in ascending order, each (drafted,
// accepted, count), so a message stays small whatever kmax and has one encoding.
void put_summary(std::vector<std::byte>& out, const DraftStepSummary& d) {
  put_le<int64_t>(out, d.limit);
  put_le<int64_t>(out, d.decodes);
  put_le<uint8_t>(out, d.timed ? 1 : 0);
  put_le<uint64_t>(out, std::bit_cast<uint64_t>(d.seconds));
  put_le<int64_t>(out, d.running);
  const auto side = static_cast<uint32_t>(std::lround(std::sqrt(double(d.verified.size()))));
  TROUPE_CHECK(size_t(side) * side == d.verified.size(), "a draft histogram of ",
               d.verified.size(), " cells");
  put_le<uint32_t>(out, side);
  uint32_t cells = 0;
  for (const int64_t n : d.verified) cells += n != 0;
  put_le<uint32_t>(out, cells);
  for (size_t i = 0; i < d.verified.size(); ++i) {
    if (d.verified[i] == 0) continue;
    put_le<uint8_t>(out, static_cast<uint8_t>(i / side));
    put_le<uint8_t>(out, static_cast<uint8_t>(i % side));
    put_le<int64_t>(out, d.verified[i]);
  }
}

DraftStepSummary get_summary(WireReader& in) {
  DraftStepSummary d;
  d.limit = in.get<int64_t>("draft limit");
  d.decodes = in.get<int64_t>("decodes");
  d.timed = get_flag(in, "timed");
  d.seconds = std::bit_cast<double>(in.get<uint64_t>("seconds"));
  d.running = in.get<int64_t>("running");
  const uint32_t side = in.get<uint32_t>("draft histogram side");
  TROUPE_CHECK(side <= kMaxSide, "DP-sync message: a draft histogram side of ", side,
               " (at most ", kMaxSide, ")");
  d.verified.assign(size_t(side) * side, 0);
  const uint32_t cells = in.get<uint32_t>("draft histogram cells");
  TROUPE_CHECK(cells <= d.verified.size(), "DP-sync message: ", cells,
               " draft histogram cells of ", d.verified.size());
  int64_t last = -1;
  for (uint32_t c = 0; c < cells; ++c) {
    const uint8_t drafted = in.get<uint8_t>("drafted");
    const uint8_t accepted = in.get<uint8_t>("accepted");
    const int64_t n = in.get<int64_t>("draft count");
    const int64_t at = int64_t(drafted) * side + accepted;
    TROUPE_CHECK(drafted < side && accepted <= drafted && at > last && n > 0 &&
                     n <= kMaxGroupDrafts,
                 "DP-sync message: draft histogram cell (", int(drafted), ", ", int(accepted),
                 ") of ", n, " (side ", side, ", after cell ", last, ")");
    d.verified[size_t(at)] = n;
    last = at;
  }
  return d;
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
  put_summary(out, p.draft_step);
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
  p.draft_step = get_summary(in);
  in.expect_end();
  return m;
}

}  // namespace troupe::runtime::collectives
