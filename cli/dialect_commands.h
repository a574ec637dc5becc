// What the commands print for a case of each dialect, behind one interface: rpa run's
// computation and report. Each dialect fills one entry in its own file (cli/jax_commands.h,
// cli/v3_commands.h); cli/dialect_commands.cc, the one cli/ file that names them all, lists
// them (tests/dialect_registry_test.cc fails on a dialect without one).
#pragma once

#include <string_view>

#include "casefile/case.h"
#include "cli/cli_args.h"
#include "core/dialect.h"

namespace rpa {

namespace bench {
struct WorkloadSpec;  // harness/workloads.h
}  // namespace bench
struct BenchStep;     // cli/bench_measure.h
struct BenchResults;  // cli/bench_measure.h

struct DialectCommands {
  Dialect dialect = Dialect::kJax;
  // rpa run on a case of the dialect (args parsed, run_options_error(args) "", case read):
  // prints the rejection or the computation, writes -o; returns the exit code.
  int (*run)(Case c, const CliArgs& a) = nullptr;

  // --- rpa bench (cli/bench_command.cc, cli/bench_measure.h; issue 48) ---
  // The prefix naming the dialect's workloads in rpa bench's presets ("v3-" in "v3-decode";
  // jax's are bare), and the timing of one: builds spec's workload in the dialect (throws
  // std::logic_error if strict validation rejects it), measures it on step's thread sweep and
  // adds its rows (and, where it is timed against its jax twin in alternation, its pairs) to
  // out. Null where rpa bench does not time the dialect (kernel_hd64.py).
  std::string_view bench_prefix = {};
  void (*bench_workload)(const bench::WorkloadSpec& spec, const BenchStep& step,
                         BenchResults& out) = nullptr;
};

// The dialect's entry; every Dialect of core/dialect.h has one.
const DialectCommands& dialect_commands(Dialect d);

}  // namespace rpa
