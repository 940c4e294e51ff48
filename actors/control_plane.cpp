#include "actors/control_plane.h"

#include <caf/openssl/manager.hpp>

namespace troupe::actors {

caf::io::middleman_actor control_middleman(caf::actor_system& sys) {
  return control_plane_secured(sys) ? sys.openssl_manager().actor_handle()
                                    : sys.middleman().actor_handle();
}

}  // namespace troupe::actors
