#include "cli/serve_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "kernels/check.h"

namespace troupe::cli {

void say(const std::string& line) {
  std::printf("troupe: %s\n", line.c_str());
  std::fflush(stdout);
}

std::unique_ptr<ServedModel> load_serving_model(const config::ServeConfig& cfg) {
  say("loading model " + (cfg.model.empty() ? std::string("(built-in tiny model)") : cfg.model));
  const auto t0 = std::chrono::steady_clock::now();
  model::ForwardOptions options;
  options.expert_precision = cfg.expert_precision;
  auto model = load_served_model(cfg.model, /*need_tokenizer=*/true, options);
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  say(std::string("model loaded in ") + took);
  return model;
}

std::shared_ptr<const runtime::FaultPlan> fault_plan(const config::ServeConfig& cfg) {
  std::string spec = cfg.inject_faults;
  const char* env = std::getenv("TROUPE_INJECT_FAULTS");
  const char* from = "inject-faults";
  if (spec.empty() && env != nullptr) spec = env, from = "TROUPE_INJECT_FAULTS";
  if (spec.empty()) return nullptr;
  try {
    auto plan = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse(spec));
    spdlog::warn("injecting faults ({}): {}", from, spec);
    return plan;
  } catch (const Error& e) {
    TROUPE_FAIL(from << ": " << e.what());
  }
}

namespace {

void say_instance_shape(const config::ServeConfig& cfg, const actors::EngineOptions& o) {
  if (const auto& m = o.member) {
    say("instance " + m->instance + ": rank " + std::to_string(m->rank) + " of " +
        std::to_string(m->size) + " in processes of their own, expert parallel (" +
        std::to_string(o.num_redundant_experts) + " redundant expert slots); the group forms at " +
        m->leader_host + ":" + std::to_string(m->leader_port) +
        ", MoE exchange over UCX, DP sync over the control plane");
    return;
  }
  if (cfg.data_parallel_size == 1 && !cfg.enable_expert_parallel) return;
  say("instance: " + std::to_string(cfg.data_parallel_size) + " ranks, " +
      (cfg.enable_expert_parallel
           ? "expert parallel (" + std::to_string(o.num_redundant_experts) +
                 " redundant expert slots), lockstep steps with DP sync" +
                 (o.eplb.enabled ? ", live EPLB every " + std::to_string(o.eplb.step_interval) +
                                       " steps over the last " +
                                       std::to_string(o.eplb.window_size)
                                 : std::string())
           : "each holding every expert, stepping on its own"));
}

}  // namespace

std::unique_ptr<ServingEngine> start_engine(caf::actor_system& sys, const config::ServeConfig& cfg,
                                            const ServedModel& model,
                                            std::shared_ptr<const runtime::FaultPlan> faults,
                                            std::optional<actors::GroupMembership> member) {
  auto e = std::make_unique<ServingEngine>();
  // One copy of the Engram tables for the node, in a shared host mapping (the owner).
  if (model.v41) e->engram = runtime::EngramHostTables::adopt(model.v41->weights, model.v41->config);
  if (e->engram) {
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f MiB", double(e->engram->table_bytes()) / (1 << 20));
    say("engram: " + std::to_string(e->engram->layers()) + " tables, " + mib +
        " in one shared host mapping on " + e->engram->mapping().describe());
  }
  e->config = cfg.to_engine_config();
  e->config.scheduler.max_model_len =
      std::min<int64_t>(cfg.max_model_len, model.max_positions());
  e->health = std::make_shared<actors::InstanceHealth>();

  actors::EngineOptions o;
  o.faults = std::move(faults);
  o.health = e->health;
  o.request_timeout = cfg.request_timeout;
  o.max_restarts = static_cast<int>(cfg.max_engine_restarts);
  o.restart_window_seconds = cfg.engine_restart_window;
  o.data_parallel_size = static_cast<int>(cfg.data_parallel_size);
  o.expert_parallel = cfg.enable_expert_parallel;
  o.num_redundant_experts = cfg.redundant_experts();
  o.eplb = cfg.eplb();
  o.expert_counts_file = cfg.expert_counts_file;
  o.member = std::move(member);
  if (e->engram)
    o.engram_owner = actors::spawn_engram_owner(sys, model.v41->config, model.v41->weights, e->engram);
  // Said here, where the model's path is known (spawn_engine checks it again).
  if (o.expert_parallel && model::routed_expert_count(model.forward()) == 0)
    TROUPE_FAIL("enable-expert-parallel: " << (model.path.empty() ? "the model" : model.path)
                << " has no routed experts (a dense model); serve it with "
                   "data-parallel-size alone");
  say_instance_shape(cfg, o);
  if (e->config.speculative.enabled()) {
    e->draft = load_draft(model.v41_only("speculative-config"));
    o.drafter = e->draft->drafter.get();
    say("speculative decoding: " + e->config.speculative.method + ", " +
        std::to_string(e->config.speculative.num_speculative_tokens) + " draft tokens per step");
  }
  try {
    e->engine = actors::spawn_engine(sys, e->draft ? *e->draft->forward : model.forward(),
                                     model.tokenizer(), e->config, std::move(o));
  } catch (const Error& err) {
    TROUPE_FAIL("the engine config cannot work with this model: "
                << err.what() << " (kv-cache-memory-bytes, max-num-seqs, block-size)");
  }
  return e;
}

}  // namespace troupe::cli
