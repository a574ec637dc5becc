// What the commands print for a case of each dialect, behind one interface: rpa run's
// computation and report. Each dialect fills one entry in its own file (cli/jax_commands.h,
// cli/v3_commands.h); cli/dialect_commands.cc, the one cli/ file that names them all, lists
// them (tests/dialect_registry_test.cc fails on a dialect without one).
#pragma once

#include <optional>
#include <string_view>

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "cli/gen_args.h"
#include "core/dialect.h"

namespace rpa {

struct DialectCommands {
  Dialect dialect = Dialect::kJax;
  // rpa run on a case of the dialect (args parsed, run_options_error(args) "", case read):
  // prints the rejection or the computation, writes -o; returns the exit code.
  int (*run)(Case c, const CliArgs& a) = nullptr;

  // rpa gen (cli/gen_command.cc; issue 48).
  // The tag that opens the dialect's --spec hex ("v3:"); empty for the untagged form (jax),
  // which a --spec in no registered tag is.
  std::string_view gen_spec_prefix;
  // rpa gen on a case of the dialect (not the production profile; arguments checked): from
  // --seed, or from a --spec in its form. `requested` is --dialect, if given (a tagged spec
  // names its own dialect, which must agree). Prints the case, writes -o; returns the exit code.
  int (*gen)(std::optional<Dialect> requested, const GenArgs& a) = nullptr;
};

// The dialect's entry; every Dialect of core/dialect.h has one.
const DialectCommands& dialect_commands(Dialect d);

}  // namespace rpa
