// The KV hand-off's data path between two processes (docs/pd.md "Benchmarks"): one
// region per request put by UcxRma (runtime/dep/ucx/ucx_rma.h) into memory the other
// process registered, as the transfer agent does, at several region sizes; put + flush
// latency and GB/s beside a memcpy of the same bytes in this process. Part of `troupe
// bench ucx` (its two ranks meet in the same directory); figures only. The receiver
// checks the last region's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::bench {

struct KvPutRow {
  int64_t bytes = 0;
  std::vector<double> put_s;     // each put until its flush completed
  std::vector<double> memcpy_s;  // the same bytes copied here
};

struct KvPutReport {
  std::string transports;
  std::vector<KvPutRow> rows;
};

inline const std::vector<int64_t> kKvPutSizes = {int64_t(80) << 10, int64_t(880) << 10,
                                                 int64_t(8) << 20, int64_t(64) << 20};

// Rank 0 (the sender) and rank 1 (the receiver), meeting in `dir`.
KvPutReport kv_put_sender(const std::string& dir, int64_t repeats);
void kv_put_receiver(const std::string& dir);

void print_kv_puts(const KvPutReport& r);

}  // namespace troupe::bench
