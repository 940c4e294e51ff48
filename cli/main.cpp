// troupe: the command-line entry point. Dispatches to cli/cmd_<name>.cpp and turns
// a troupe::Error into a one-line message and exit code 2.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "kernels/check.h"

namespace {

void print_usage() {
  std::fprintf(stderr, "usage: troupe <command> [flags]\n\ncommands:\n");
  for (const auto& c : troupe::cli::kCommands) std::fprintf(stderr, "  %s\n", c.usage);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 1 : 0;
  }
  const std::string name = argv[1];
  troupe::cli::CommandArgs args(argv + 2, argv + argc);
  for (const auto& c : troupe::cli::kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const troupe::Error& e) {
      std::fprintf(stderr, "troupe %s: error: %s\n", c.name, e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe %s: internal error: %s\n", c.name, e.what());
      return 3;
    }
  }
  std::fprintf(stderr, "troupe: unknown command '%s'\n", name.c_str());
  print_usage();
  return 1;
}
