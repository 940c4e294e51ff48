#include "fuzz/fuzz_support.h"

#include <array>
#include <cstdlib>

#include "model/tokenizer.h"

namespace troupe::fuzz {
namespace {

struct KnownFinding {
  std::string_view target;
  std::string_view what;  // a substring of the exception's message
  std::string_view where;
};

// Findings in files this branch may not edit (net/tcp/*, net/http/server.cpp: issue 9's
// TCP/HTTP branches fix them). Tolerated so the default CI stays green and fuzzing keeps
// looking past them; their inputs stay in fuzz/regressions/. Once the fix is merged,
// delete the row: the regression inputs then must pass strictly (TROUPE_FUZZ_STRICT=1
// checks that before the row is gone). A known finding that is no exception (tcp_frame's
// msgpack allocation, fuzz/regressions/tcp_frame/known-oom-*) is tolerated in
// scripts/fuzz.sh instead.
constexpr std::array<KnownFinding, 1> kKnownFindings{{
    {"tcp_frame", "[json.exception.type_error.316]",
     "net/tcp/protocol.cpp: a msgpack str that is not UTF-8 (id, type, prompt, stop, ...) "
     "reaches json::dump() in id_key(), parse_submit() or the unknown-type message"},
}};

}  // namespace

const model::Tokenizer& tiny_tokenizer() {
  static const model::Tokenizer tok = model::Tokenizer::load(TROUPE_FUZZ_TOKENIZER);
  return tok;
}

const net::openai::ServingInfo& tiny_serving_info() {
  static const net::openai::ServingInfo info = [] {
    net::openai::ServingInfo i;
    i.model_name = "v41-tiny-seed7";
    i.max_model_len = 256;
    i.max_body_bytes = 64 * 1024;
    return i;
  }();
  return info;
}

bool strict_mode() {
  static const bool strict = std::getenv("TROUPE_FUZZ_STRICT") != nullptr;
  return strict;
}

bool known_finding(std::string_view target, std::string_view what) {
  if (strict_mode()) return false;
  for (const KnownFinding& k : kKnownFindings)
    if (k.target == target && what.find(k.what) != std::string_view::npos) return true;
  return false;
}

std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace troupe::fuzz
