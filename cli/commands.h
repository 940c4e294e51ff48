// Every troupe subcommand, one file each (cli/cmd_<name>.cpp). Each takes the
// arguments after its name and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace troupe::cli {

using CommandArgs = std::vector<std::string>;

struct Command {
  const char* name;
  const char* usage;
  int (*run)(const CommandArgs& args);
};

int run_info(const CommandArgs& args);
int run_inspect(const CommandArgs& args);
int run_generate(const CommandArgs& args);
int run_logits(const CommandArgs& args);
int run_draft(const CommandArgs& args);
int run_make_tiny_model(const CommandArgs& args);
int run_bench(const CommandArgs& args);
int run_serve(const CommandArgs& args);
int run_eplb(const CommandArgs& args);
int run_cluster(const CommandArgs& args);
int run_drain(const CommandArgs& args);

// The table main() dispatches on, in help order.
inline const Command kCommands[] = {
    {"serve", "serve [MODEL_DIR] [--host H --port P --config cfg.yaml ...]   OpenAI-compatible HTTP daemon (docs/serve.md)", run_serve},
    {"generate", "generate [--model DIR|x.gguf] --prompt TEXT | --tokens 1,2,3 [--max-tokens N --temperature T --top-k K --top-p P --min-p M --seed S --ignore-eos --speculative --speculative-config JSON]   stream a completion (--speculative: greedy DSpark draft + verify on one state; --speculative-config '{\"method\": \"dspark\", \"num_speculative_tokens\": 3}': through the engine)", run_generate},
    {"logits", "logits [--model DIR|x.gguf] --tokens 1,2,3 [--all-positions | --replay]   logits as JSON (full compute, or bounded replay)", run_logits},
    {"draft", "draft [--model DIR] --tokens 1,2,3 [--num-speculative K]   DSpark greedy draft after the prompt as JSON (anchor, bonus, drafts, confidence)", run_draft},
    {"make-tiny-model", "make-tiny-model DIR [--seed N]   write the deterministic tiny checkpoint", run_make_tiny_model},
    {"info", "info                       print build and CPU backend information", run_info},
    {"inspect", "inspect --model DIR | --preset NAME [--dep N]   config, layer modes, params, memory", run_inspect},
    {"bench", "bench forward|engine|replay|serve|eplb|dp-sync|soak|peer|ucx|handoff [flags]   time model steps, engine steps, an agentic workload, a server, the EPLB planner, the DP-sync all-reduce, the UCX data plane between processes (docs/*-bench.md, docs/eplb.md, docs/dp-sync.md, docs/ucx.md)", run_bench},
    {"cluster", "cluster status --config cluster.yaml   each node, instance and rank of a cluster file with its state (docs/cluster.md)", run_cluster},
    {"drain", "drain --config cluster.yaml --instance NAME [--url http://HOST:PORT --api-key KEY]   move every request of an instance to another decode instance (docs/pd.md)", run_drain},
    {"eplb", "eplb plan --weights W.json --replicas N --ranks R [--nodes A --groups G]   the EPLB planner on a routing trace, as JSON (docs/eplb.md)", run_eplb},
};

}  // namespace troupe::cli
