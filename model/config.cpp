#include "model/config.h"

#include <algorithm>

namespace troupe::model {

const char* to_string(LayerMode m) {
  switch (m) {
    case LayerMode::Swa: return "SWA";
    case LayerMode::Full: return "Full";
    case LayerMode::Reindex: return "Reindex";
    case LayerMode::Reuse: return "Reuse";
  }
  return "?";
}

bool ModelConfig::is_engram_layer(int64_t layer) const { return engram_index(layer) >= 0; }

int64_t ModelConfig::engram_index(int64_t layer) const {
  auto it = std::find(engram_layer_ids.begin(), engram_layer_ids.end(), layer);
  return it == engram_layer_ids.end() ? -1 : it - engram_layer_ids.begin();
}

}  // namespace troupe::model
