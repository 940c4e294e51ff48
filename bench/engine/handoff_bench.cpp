#include "bench/engine/handoff_bench.h"

#include <cstdio>
#include <cstring>

#include "bench/common/stats.h"
#include "kernels/check.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"

namespace troupe::bench {
namespace {

// Steps `e` until request id's output says HandedOff (the sender) or it finished.
void step_until_handed_off(runtime::Engine& e, runtime::RequestId id) {
  for (bool parked = false; !parked && e.has_unfinished();)
    for (const runtime::RequestOutput& o : e.step()) {
      check_output(o);
      parked |= o.id == id && o.status == runtime::RequestStatus::HandedOff;
    }
}

HandoffTimes time_one_length(const model::Forward& forward, const EngineBenchConfig& c,
                             int64_t len, int repeats) {
  const runtime::EngineConfig config = make_engine_config(forward.config(), c, /*prefix_cache=*/false);
  runtime::Engine sender(forward, nullptr, config), receiver(forward, nullptr, config);
  std::vector<double> pack, encode, decode, copy, load, prefill;
  HandoffTimes t;
  t.prompt_tokens = len;
  for (int r = 0; r < repeats; ++r) {
    const runtime::RequestId id = r;
    runtime::RequestParams p = greedy_params(3);
    p.kv_hand_off_after = 1;
    sender.add_request(id, random_tokens(len, forward.config().vocab_size, 1000 + uint64_t(r) * 7919 + uint64_t(len)), p);
    double t0 = now_seconds();
    step_until_handed_off(sender, id);
    prefill.push_back(now_seconds() - t0);
    t0 = now_seconds();
    runtime::KvHandoff h = sender.export_request(id);
    pack.push_back(now_seconds() - t0);
    sender.release_handed_off(id);
    t0 = now_seconds();
    const std::vector<std::byte> wire = runtime::encode_kv_handoff(h);
    encode.push_back(now_seconds() - t0);
    t0 = now_seconds();
    runtime::KvHandoff back = runtime::decode_kv_handoff(wire);
    decode.push_back(now_seconds() - t0);
    std::vector<uint8_t> dst(h.region.size());
    t0 = now_seconds();
    std::memcpy(dst.data(), h.region.data(), h.region.size());
    copy.push_back(now_seconds() - t0);
    TROUPE_CHECK(std::memcmp(dst.data(), back.region.data(), dst.size()) == 0, "bench handoff: the round trip changed the bytes");
    t.bytes = static_cast<int64_t>(h.region.size());
    p.kv_hand_off_after = 0;
    receiver.import_request(id, std::move(back), p);
    t0 = now_seconds();
    for (const auto& o : receiver.step()) check_output(o);  // the load and one decode
    const double first = now_seconds() - t0;
    t0 = now_seconds();
    for (const auto& o : receiver.step()) check_output(o);  // one decode
    load.push_back(std::max(0.0, first - (now_seconds() - t0)));
    drain(receiver);
  }
  t.pack_s = percentile(pack, 0.5);
  t.encode_s = percentile(encode, 0.5);
  t.decode_s = percentile(decode, 0.5);
  t.memcpy_s = percentile(copy, 0.5);
  t.load_s = percentile(load, 0.5);
  t.prefill_s = percentile(prefill, 0.5);
  return t;
}

double gbs(int64_t bytes, double s) { return s > 0 ? double(bytes) / s / 1e9 : 0.0; }

}  // namespace

std::vector<HandoffTimes> time_handoffs(const model::Forward& forward, const EngineBenchConfig& c,
                                        const std::vector<int64_t>& prompt_lens, int repeats) {
  std::vector<HandoffTimes> out;
  for (int64_t len : prompt_lens) out.push_back(time_one_length(forward, c, len, repeats));
  return out;
}

void print_handoffs(const std::vector<HandoffTimes>& t) {
  std::printf("\n| prompt | KV bytes | pack ms (GB/s) | encode ms (GB/s) | decode ms (GB/s) | memcpy ms (GB/s) | load ms | prefill ms | pack+encode+decode+load / prefill |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const HandoffTimes& h : t) {
    const double move = h.pack_s + h.encode_s + h.decode_s + h.load_s;
    std::printf("| %lld | %.2f MB | %.3f (%.1f) | %.3f (%.1f) | %.3f (%.1f) | %.3f (%.1f) | %.3f | %.2f | %.3f |\n",
                static_cast<long long>(h.prompt_tokens), double(h.bytes) / 1e6, h.pack_s * 1e3,
                gbs(h.bytes, h.pack_s), h.encode_s * 1e3, gbs(h.bytes, h.encode_s), h.decode_s * 1e3,
                gbs(h.bytes, h.decode_s), h.memcpy_s * 1e3, gbs(h.bytes, h.memcpy_s), h.load_s * 1e3,
                h.prefill_s * 1e3, h.prefill_s > 0 ? move / h.prefill_s : 0.0);
  }
  std::printf("(medians; load = the receiver's first step minus its next; the network is not in it)\n");
}

}  // namespace troupe::bench
