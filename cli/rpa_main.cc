// The rpa command line: an oracle for ragged paged attention cases (DESIGN.md section 8).
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace rpa {
namespace {

int main_impl(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given");
  const std::string_view command = argv[1];
  const std::vector<std::string_view> args(argv + 2, argv + argc);
  if (command == "validate") return validate_command(args);
  if (command == "run") return run_command(args);
  if (command == "check") return check_command(args);
  if (command == "bench") return bench_command(args);
  if (command == "gen") return gen_command(args);
  if (command == "campaign") return campaign_command(args);
  if (command == "replay") return replay_command(args);
  if (command == "merge") return merge_command(args);
  if (command == "--help" || command == "-h" || command == "help") {
    std::printf("%s", kUsage);
    return kExitOk;
  }
  return usage_error("unknown command '" + std::string(command) + "'");
}

}  // namespace
}  // namespace rpa

int main(int argc, char** argv) {
  try {
    return rpa::main_impl(argc, argv);
  } catch (const std::exception& e) {
    // Reaching here is a bug in rpa, not in the case: say so rather than abort.
    std::fprintf(stderr, "rpa: internal error: %s\n", e.what());
    return 70;
  }
}
