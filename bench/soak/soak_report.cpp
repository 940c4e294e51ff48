// The report of `troupe bench soak`: one table of requests by kind (sent = served +
// expected errors + unexpected, with the answers seen), one of throughput (the soak's
// good requests beside the single-client reference on the same server), then the
// server's state after the clients stopped and the verdict.
#include <cstdio>

#include "bench/soak/soak_bench.h"

namespace troupe::bench {
namespace {

const char* expect_text(SoakKind k) {
  switch (soak_expect(k)) {
    case SoakExpect::Ok:
      return "200";
    case SoakExpect::ClientLeaves:
      return k == SoakKind::AbortMidStream ? "200, client leaves" : "none, client leaves";
    case SoakExpect::Reject:
      break;
  }
  if (k == SoakKind::Garbage) return "4xx or close";
  return k == SoakKind::SlowHeaders ? "4xx, close or none" : "4xx";
}

// "200 x1200, closed x3"
std::string answers_text(const SoakTally& t) {
  std::string out;
  for (const auto& [answer, n] : t.answers)
    out += (out.empty() ? "" : ", ") + answer + " x" + std::to_string(n);
  return out;
}

void tally_row(const char* name, const char* expect, const SoakTally& t) {
  std::printf("| %s | %s | %lld | %lld | %lld | %lld | %s |\n", name, expect,
              static_cast<long long>(t.sent), static_cast<long long>(t.served),
              static_cast<long long>(t.expected_errors), static_cast<long long>(t.unexpected),
              answers_text(t).c_str());
}

void phase_row(const char* name, const SoakPhase& p) {
  const double d = p.seconds > 0 ? p.seconds : 1e-9;
  std::printf("| %s | %lld | %.2f | %lld | %.2f | %lld | %.1f | %.2f |\n", name,
              static_cast<long long>(p.clients), p.seconds, static_cast<long long>(p.good_requests),
              double(p.good_requests) / d, static_cast<long long>(p.output_tokens),
              double(p.output_tokens) / d, double(p.all_requests) / d);
}

double rate(int64_t n, double seconds) {
  return seconds > 0 ? double(n) / seconds : 0;
}

void line(const char* name, const std::string& value) {
  std::printf("%-36s %s\n", name, value.c_str());
}

std::string mib(int64_t kib) {
  if (kib < 0) return "n/a (process gone)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(kib) / 1024);
  return buf;
}

std::string gauge(bool answered, double v) {
  return answered ? std::to_string(static_cast<long long>(v)) : "n/a (no /metrics answer)";
}

void print_server_state(const SoakResult& r, bool own) {
  line("Server alive at the end:", r.alive_at_end ? "yes" : "NO");
  line("Requests running at the end:", gauge(r.idle.answered, r.idle.running));
  line("Requests waiting at the end:", gauge(r.idle.answered, r.idle.waiting));
  line("KV blocks in use at the end:", gauge(r.idle.answered, r.idle.used_blocks));
  line("Server RSS at the start (MiB):", mib(r.rss_start_kib));
  line("Server RSS peak (MiB):", mib(r.rss_peak_kib));
  std::string quarters;
  for (int64_t kib : r.rss_quarters_kib) quarters += (quarters.empty() ? "" : ", ") + mib(kib);
  line("Server RSS at 25/50/75/100% (MiB):", quarters.empty() ? "n/a" : quarters);
  line("Server RSS at the end (MiB):", mib(r.rss_end_kib));
  if (r.rss_start_kib >= 0 && r.rss_end_kib >= 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f", double(r.rss_end_kib - r.rss_start_kib) / 1024);
    line("Server RSS growth (MiB):", buf);
  }
  if (own) line("troupe serve exit after SIGTERM:", std::to_string(r.exit_code));
}

}  // namespace

void print_soak_report(const SoakResult& r) {
  std::printf("============ Soak Result ============\n");
  std::printf(
      "| kind | expected answer | sent | served | expected errors | unexpected | answers |\n");
  std::printf("|---|---|---:|---:|---:|---:|---|\n");
  SoakTally all;
  for (int k = 0; k < kSoakKinds; ++k) {
    tally_row(soak_kind_name(SoakKind(k)), expect_text(SoakKind(k)), r.tallies[size_t(k)]);
    all.merge(r.tallies[size_t(k)]);
  }
  all.answers.clear();
  tally_row("all", "", all);

  std::printf(
      "\n| phase | clients | wall s | good requests | req/s | output tokens | tok/s | all req/s "
      "|\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  phase_row("reference (good requests only)", r.reference);
  phase_row("soak (the mix)", r.soak);
  const double ref_req = rate(r.reference.good_requests, r.reference.seconds);
  const double ref_tok = rate(r.reference.output_tokens, r.reference.seconds);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2fx good req/s, %.2fx tok/s",
                ref_req > 0 ? rate(r.soak.good_requests, r.soak.seconds) / ref_req : 0,
                ref_tok > 0 ? rate(r.soak.output_tokens, r.soak.seconds) / ref_tok : 0);
  std::printf("\n");
  if (!r.chat)
    line("Chat:", "left out: the model has no chat template (completions sent in its place)");
  line("Soak / reference throughput:", buf);
  print_server_state(r, r.own_server);
  for (const std::string& f : r.failures) line("failure:", f);
  line("Result:", r.failures.empty() ? "PASS" : "FAIL");
  std::printf("=====================================\n");
}

}  // namespace troupe::bench
