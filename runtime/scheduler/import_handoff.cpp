#include "runtime/scheduler/import_handoff.h"

#include <memory>

#include "kernels/check.h"

namespace troupe::runtime {

ImportResult import_handoff(Scheduler& s, RequestId id, KvHandoff h, RequestParams params,
                            const KvHandoffShape& shape, const model::ServingShape& m) {
  const std::string why = check_kv_tokens(h, m);
  TROUPE_CHECK(why.empty(), "request ", id, ": its hand-off cannot continue here: ", why);
  ImportResult result;
  if (!carries_kv(h)) {
    result = {false, "it carries no KV"};
  } else if (std::string kv_why = check_kv_handoff(h, shape, m); !kv_why.empty()) {
    result = {false, std::move(kv_why)};
    drop_kv(h);
  }
  s.add_imported(id, std::make_shared<const KvHandoff>(std::move(h)), std::move(params));
  return result;
}

}  // namespace troupe::runtime
