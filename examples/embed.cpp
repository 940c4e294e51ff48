// Embedding troupe's actors in another program: start the actor system in-process,
// send typed generate requests to the router and print the streamed tokens. No sockets.
//
//   ./embed [MODEL_DIR]     (default: the built-in tiny model, made on first use)
#include <caf/all.hpp>

#include <cstdio>
#include <string>

#include "actors/engine_actors.h"
#include "model/safetensors.h"
#include "model/tiny_checkpoint.h"
#include "model/tokenizer.h"
#include "model/weights.h"

using namespace troupe;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : model::builtin_tiny_model_dir();
  const model::ModelConfig config = model::load_config(dir + "/config.json");
  const model::Checkpoint ckpt = model::Checkpoint::open(dir);
  const model::ModelWeights weights = model::bind_weights(ckpt, config);
  const model::Forward forward(config, weights);
  const model::Tokenizer tokenizer = model::Tokenizer::load(dir + "/tokenizer.json");

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  {
    auto engine = actors::spawn_engine(sys, forward, &tokenizer, runtime::EngineConfig{});
    auto router = actors::spawn_router(sys, {engine});
    caf::scoped_actor self{sys};
    const char* prompts[] = {"Once upon a time", "The sea was calm"};
    for (int i = 0; i < 2; ++i) {
      actors::GenerateRequest req{i, tokenizer.encode(prompts[i], true), {}, {}};
      req.params.max_tokens = 12;
      self->send(router, actors::generate_atom::value, std::move(req), caf::actor{self});
    }
    std::string text[2];
    for (int done = 0; done < 2;) {
      self->receive([&](actors::token_atom, const actors::TokenEvent& e) {
        text[e.output.id] += e.output.new_text;
        if (e.output.finished()) {
          std::printf("[%lld] %s%s  (%.*s)\n", static_cast<long long>(e.output.id), prompts[e.output.id],
                      text[e.output.id].c_str(), static_cast<int>(e.output.finish_reason().size()),
                      e.output.finish_reason().data());
          ++done;
        }
      });
    }
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(engine, caf::exit_reason::user_shutdown);
  }
  return 0;
}
