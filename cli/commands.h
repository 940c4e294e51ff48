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

// The table main() dispatches on, in help order.
inline const Command kCommands[] = {
    {"info", "info                       print build and CPU backend information", run_info},
    {"inspect", "inspect --model DIR | --preset NAME [--dep N]   config, layer modes, params, memory", run_inspect},
};

}  // namespace troupe::cli
