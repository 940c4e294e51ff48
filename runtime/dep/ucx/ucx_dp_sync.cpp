#include "runtime/dep/ucx/ucx_dp_sync.h"

#include <optional>

#include "kernels/check.h"
#include "runtime/collectives/step_metadata_wire.h"

namespace troupe::runtime {

collectives::StepMetadata ucx_all_reduce(UcxCommunicator& comm, StepMetadataRank& ar, int64_t step,
                                         collectives::StepMetadata mine, double timeout_s) {
  std::optional<collectives::StepMetadata> result;
  auto deliver = [&](collectives::Progress<collectives::StepMetadata> p) {
    for (const collectives::StepMetadataMessage& m : p.send)
      comm.post(m.to, collectives::encode_step_metadata_message(m));
    if (p.result) result = std::move(p.result);
  };
  deliver(ar.start(step, std::move(mine)));
  while (!result) {
    auto mail = comm.next_mail(timeout_s);
    if (!mail)
      TROUPE_FAIL("DP sync, rank " << comm.rank() << ": no message for step " << step << " within "
                                   << timeout_s << " s");
    collectives::StepMetadataMessage m = collectives::decode_step_metadata_message(mail->second);
    TROUPE_CHECK(m.from == mail->first, "DP sync: rank ", mail->first, " sent a message from rank ", m.from);
    deliver(ar.receive(std::move(m)));
  }
  return *result;
}

}  // namespace troupe::runtime
