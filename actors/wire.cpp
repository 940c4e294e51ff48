#include "actors/wire.h"

namespace troupe::actors {

void add_wire_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::troupe>();
}

}  // namespace troupe::actors
