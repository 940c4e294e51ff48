#include "support/test_paths.h"

namespace troupe::test {

const char* test_data_dir() { return TROUPE_TEST_DATA_DIR; }
const char* troupe_binary() { return TROUPE_BINARY_PATH; }

const char* ucx_peer_binary() {
#ifdef TROUPE_UCX_PEER_PATH
  return TROUPE_UCX_PEER_PATH;
#else
  return "";
#endif
}

}  // namespace troupe::test
