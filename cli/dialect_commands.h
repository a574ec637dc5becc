// What the commands print for a case of each dialect, behind one interface: rpa run's
// computation and report. Each dialect fills one entry in its own file (cli/jax_commands.h,
// cli/v3_commands.h); cli/dialect_commands.cc, the one cli/ file that names them all, lists
// them (tests/dialect_registry_test.cc fails on a dialect without one).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "casefile/case.h"
#include "cli/campaign_stats.h"
#include "cli/cli_args.h"
#include "cli/gen_args.h"
#include "core/dialect.h"
#include "oracle/dot_precision.h"

namespace rpa {

namespace bench {
struct WorkloadSpec;  // harness/workloads.h
}  // namespace bench
struct BenchStep;     // cli/bench_measure.h
struct BenchResults;  // cli/bench_measure.h
namespace props {
struct ProductionSpec;  // casegen/production.h
}  // namespace props

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
  // rpa campaign (cli/campaign_command.cc; cli/jax_campaign.cc, cli/v3_campaign.cc): the
  // dialect's share of the run's cases, each checked and tallied into st (a finding recorded
  // with its replay hex), and the files of its findings next to the report.
  // The run's case i, of dialect d (the campaign's mix says which; the v3 entry serves both
  // v3 dialects): drawn from the run's seed (sizes cycling 0..max_size), with named
  // mutations or none, and checked (each mode's verdict against the spec model, then a case strict
  // accepts through the tiled kernel against the reference). replay and note are set, as
  // soon as known, to the case's replay hex and a note on what it carries (its mutations),
  // for the caller's finding should the case throw.
  void (*campaign_case)(Dialect d, uint64_t seed, int64_t i, int max_size, DotPasses passes,
                        Stats& st, std::string& replay, std::string& note) = nullptr;
  // --profile production: case i is the production call spec (of the dialect; hex its replay
  // hex), through the same checks.
  void (*campaign_production)(const props::ProductionSpec& spec, const std::string& hex,
                              int64_t i, DotPasses passes, Stats& st) = nullptr;
  // --report: writes the finding's case next to the report, dir / stem + ".npz" (from its
  // spec) or ".bin" (a raw call's bytes), when the finding is one of the dialect's, and
  // returns the file's name, "" when it could not be written; nullopt when the finding is
  // not the dialect's. May throw (a finding's spec may be the case that threw).
  std::optional<std::string> (*write_finding_file)(const Finding& f,
                                                   const std::filesystem::path& dir,
                                                   const std::string& stem) = nullptr;
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
