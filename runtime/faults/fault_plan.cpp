#include "runtime/faults/fault_plan.h"

#include <charconv>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

struct KindName {
  std::string_view name;
  FaultKind kind;
};
constexpr KindName kKinds[] = {{"step-throw", FaultKind::StepThrow},
                               {"rank-exit", FaultKind::RankExit},
                               {"step-stall", FaultKind::StepStall},
                               {"tokenize-fail", FaultKind::TokenizeFail},
                               {"rank-start-stall", FaultKind::RankStartStall},
                               {"kv-import-drop", FaultKind::KvImportDrop},
                               {"kv-import-stall", FaultKind::KvImportStall},
                               {"kv-commit-drop", FaultKind::KvCommitDrop},
                               {"kv-put-hang", FaultKind::KvPutHang}};

constexpr std::string_view kSyntax =
    "expected KIND@N or KIND@N:MS (the stalls), KIND one of step-throw rank-exit step-stall "
    "tokenize-fail rank-start-stall kv-import-drop kv-import-stall kv-commit-drop kv-put-hang";

// A whole decimal number in [1, 2^62]; false if `s` is anything else.
bool parse_count(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 1;
}

Fault parse_fault(std::string_view item) {
  const size_t at = item.find('@');
  TROUPE_CHECK(at != std::string_view::npos, "fault '", item, "': ", kSyntax);
  const std::string_view name = item.substr(0, at);
  std::string_view rest = item.substr(at + 1);
  Fault f;
  bool known = false;
  for (const KindName& k : kKinds)
    if (k.name == name) f.kind = k.kind, known = true;
  TROUPE_CHECK(known, "fault '", item, "': unknown kind '", name, "'; ", kSyntax);
  const size_t colon = rest.find(':');
  const std::string_view n = rest.substr(0, colon);
  TROUPE_CHECK(parse_count(n, f.at), "fault '", item, "': N must be a whole number >= 1");
  if (f.kind == FaultKind::StepStall || f.kind == FaultKind::RankStartStall ||
      f.kind == FaultKind::KvImportStall) {
    TROUPE_CHECK(colon != std::string_view::npos && parse_count(rest.substr(colon + 1), f.stall_ms),
                 "fault '", item, "': ", name,
                 " needs :MS, a whole number of milliseconds >= 1");
  } else {
    TROUPE_CHECK(colon == std::string_view::npos, "fault '", item,
                 "': only the stalls (step-stall, rank-start-stall, kv-import-stall) take :MS");
  }
  return f;
}

}  // namespace

FaultPlan FaultPlan::parse(std::string_view spec) {
  std::vector<Fault> faults;
  size_t pos = 0;
  while (pos <= spec.size() && !spec.empty()) {
    const size_t comma = spec.find(',', pos);
    const std::string_view item =
        spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    TROUPE_CHECK(!item.empty(), "fault spec '", spec, "' has an empty item");
    faults.push_back(parse_fault(item));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return FaultPlan(std::move(faults));
}

StepFault FaultPlan::next_step() const {
  StepFault out;
  if (faults_.empty()) return out;
  const int64_t n = steps_.fetch_add(1) + 1;
  for (const Fault& f : faults_) {
    if (f.at != n) continue;
    out.fail |= f.kind == FaultKind::StepThrow;
    out.exit |= f.kind == FaultKind::RankExit;
    if (f.kind == FaultKind::StepStall) out.stall_ms += f.stall_ms;
  }
  return out;
}

bool FaultPlan::fires(std::atomic<int64_t>& counter, FaultKind kind) const {
  if (faults_.empty()) return false;
  const int64_t n = counter.fetch_add(1) + 1;
  for (const Fault& f : faults_)
    if (f.kind == kind && f.at == n) return true;
  return false;
}

bool FaultPlan::next_tokenize() const { return fires(tokenizations_, FaultKind::TokenizeFail); }

int64_t FaultPlan::next_rank_start() const {
  if (faults_.empty()) return 0;
  const int64_t n = rank_starts_.fetch_add(1) + 1;
  int64_t ms = 0;
  for (const Fault& f : faults_)
    if (f.kind == FaultKind::RankStartStall && f.at == n) ms += f.stall_ms;
  return ms;
}

FaultPlan::ImportFault FaultPlan::next_import() const {
  ImportFault out;
  if (faults_.empty()) return out;
  const int64_t n = imports_.fetch_add(1) + 1;
  for (const Fault& f : faults_) {
    if (f.at != n) continue;
    out.drop |= f.kind == FaultKind::KvImportDrop;
    if (f.kind == FaultKind::KvImportStall) out.stall_ms += f.stall_ms;
  }
  return out;
}

bool FaultPlan::next_commit() const { return fires(commits_, FaultKind::KvCommitDrop); }

bool FaultPlan::next_put() const { return fires(puts_, FaultKind::KvPutHang); }

}  // namespace troupe::runtime
