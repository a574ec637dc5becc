#include <cstdio>
#include <utility>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/dialect_commands.h"
#include "cli/exit_codes.h"

namespace rpa {

int run_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err = parse_cli_args(args, kRunFlags, a); !err.empty()) return usage_error(err);
  if (std::string err = run_options_error(a); !err.empty()) return usage_error(err);
  std::optional<Case> c = read_case_or_report(a);
  if (!c) return kExitUnreadable;
  return dialect_commands(c->dialect).run(std::move(*c), a);
}

}  // namespace rpa
