#include "bench/ucx/kv_put_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <future>

#include "bench/common/stats.h"
#include "kernels/check.h"
#include "runtime/dep/all_gather.h"
#include "runtime/dep/ucx/ucx_rma.h"

namespace troupe::bench {
namespace {

using runtime::Bytes;

uint8_t pattern_byte(size_t i, int64_t size) { return static_cast<uint8_t>(i * 131 + size); }

// The receiver's advertisement: remote address (8 bytes), key size (8), key, worker address.
Bytes advert(uint64_t remote, const std::vector<uint8_t>& rkey, const std::vector<uint8_t>& address) {
  Bytes out(16 + rkey.size() + address.size());
  const uint64_t key_size = rkey.size();
  std::memcpy(out.data(), &remote, 8);
  std::memcpy(out.data() + 8, &key_size, 8);
  std::memcpy(out.data() + 16, rkey.data(), rkey.size());
  std::memcpy(out.data() + 16 + rkey.size(), address.data(), address.size());
  return out;
}

// Runs gather(mine) on another thread while this one progresses `rma` (a TCP put needs
// the receiver's progress), and returns what it gathered.
std::vector<Bytes> gather_progressing(runtime::RmaTransport& rma, const runtime::AllGather& gather,
                                      const Bytes& mine) {
  auto done = std::async(std::launch::async, [&] { return gather(mine); });
  while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) rma.progress();
  return done.get();
}

}  // namespace

void kv_put_receiver(const std::string& dir) {
  runtime::UcxRma rma;
  const int64_t most = *std::max_element(kKvPutSizes.begin(), kKvPutSizes.end());
  std::vector<uint8_t> staging(size_t(most), 0);
  const auto exposed = rma.expose(1, staging);
  runtime::directory_all_gather(dir, "kvput", 1, 2, 30)(advert(exposed.remote_address, exposed.rkey, rma.address()));
  gather_progressing(rma, runtime::directory_all_gather(dir, "kvput-done", 1, 2, 600), {});
  const int64_t last = kKvPutSizes.back();
  for (size_t i = 0; i < size_t(last); ++i)
    TROUPE_CHECK(staging[i] == pattern_byte(i, last), "bench ucx: KV put byte ", i, " of the last region is wrong");
  rma.withdraw(1);
}

KvPutReport kv_put_sender(const std::string& dir, int64_t repeats) {
  runtime::UcxRma rma;
  const std::vector<Bytes> adverts = runtime::directory_all_gather(dir, "kvput", 0, 2, 30)({});
  const Bytes& a = adverts[1];
  TROUPE_CHECK(a.size() >= 16, "bench ucx: the receiver's advertisement is short");
  uint64_t remote = 0, key_size = 0;
  std::memcpy(&remote, a.data(), 8);
  std::memcpy(&key_size, a.data() + 8, 8);
  TROUPE_CHECK(16 + key_size <= a.size(), "bench ucx: the receiver's key is cut short");
  const auto* p = reinterpret_cast<const uint8_t*>(a.data());
  const std::vector<uint8_t> rkey(p + 16, p + 16 + key_size), address(p + 16 + key_size, p + a.size());
  KvPutReport report;
  for (const int64_t size : kKvPutSizes) {
    std::vector<uint8_t> region(static_cast<size_t>(size)), copy(static_cast<size_t>(size));
    for (size_t i = 0; i < region.size(); ++i) region[i] = pattern_byte(i, size);
    KvPutRow row{size, {}, {}};
    for (int64_t r = -2; r < repeats; ++r) {  // two untimed: the endpoint, the registration cache
      const double t0 = now_seconds();
      const uint64_t put = rma.put(address, rkey, remote, region);
      std::string error;
      runtime::RmaTransport::PutState s;
      while ((s = rma.state(put, &error)) == runtime::RmaTransport::PutState::InProgress) rma.progress();
      TROUPE_CHECK(s == runtime::RmaTransport::PutState::Done, "bench ucx: KV put failed: ", error);
      const double t1 = now_seconds();
      std::memcpy(copy.data(), region.data(), region.size());
      const double t2 = now_seconds();
      if (r >= 0) row.put_s.push_back(t1 - t0), row.memcpy_s.push_back(t2 - t1);
    }
    report.rows.push_back(std::move(row));
  }
  report.transports = rma.transports(address);
  runtime::directory_all_gather(dir, "kvput-done", 0, 2, 600)({});
  return report;
}

void print_kv_puts(const KvPutReport& r) {
  std::printf("\nKV hand-off region, one UCX RMA put (+ flush) from rank 0 into memory rank 1 registered "
              "(what the transfer agent does); transports: %s\n", r.transports.c_str());
  std::printf("%12s | %10s %10s %8s | %10s %8s | %8s\n", "region bytes", "put p50 us", "put p99 us", "GB/s",
              "memcpy us", "GB/s", "put/copy");
  for (const KvPutRow& row : r.rows) {
    const double put = percentile(row.put_s, 0.5), copy = percentile(row.memcpy_s, 0.5);
    std::printf("%12lld | %10.1f %10.1f %8.2f | %10.1f %8.2f | %8.2f\n", static_cast<long long>(row.bytes),
                put * 1e6, percentile(row.put_s, 0.99) * 1e6, double(row.bytes) / put * 1e-9, copy * 1e6,
                double(row.bytes) / copy * 1e-9, copy > 0 ? put / copy : 0.0);
  }
  std::printf("(descriptors per transfer: 1; memcpy: the same bytes in rank 0's memory, same run)\n");
}

}  // namespace troupe::bench
