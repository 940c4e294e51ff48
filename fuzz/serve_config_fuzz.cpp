// The YAML serve config (config/load): the bytes are a config file's text, applied over
// the defaults and validated as `troupe serve --config` does. Contract: every bad file
// is a troupe::Error naming the key and line; any other exception is a finding.
#include "config/load.h"
#include "fuzz/targets.h"
#include "kernels/check.h"

namespace troupe::fuzz {

void serve_config(const uint8_t* data, size_t size) {
  try {
    config::ServeConfig cfg;
    config::KeyOrigins origins;
    config::apply_serve_config_yaml(cfg, std::string(as_text(data, size)), "fuzz.yaml", &origins);
    cfg.validate(origins);
  } catch (const Error&) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::serve_config)
