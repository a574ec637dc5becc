// Command-line parsing and the steps every rpa command shares: read the case, validate it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "casefile/case_file.h"
#include "cli/json_writer.h"
#include "kernel/tiled_kernel.h"
#include "kernel/validate.h"
#include "oracle/dot_precision.h"
#include "reference/semantics.h"

namespace rpa {

struct CliArgs {
  std::string path;                // the case file (the first, where a command takes several)
  std::vector<std::string> paths;  // every file or directory named, in order
  std::string junit;               // --junit FILE: a JUnit XML report
  bool allow_bias = false;         // check --allow-bias: a biased output still passes
  ValidateOptions validate;
  CaseReadOptions read;
  bool json = false;
  bool all = false;
  std::string impl;      // --impl
  std::string output;    // -o
  int threads = 0;       // --threads; 0: every core
  bool literal = false;  // --schedule literal (--literal): the Pallas program (KernelOptions)
  std::string oracle = "reference";  // check --oracle reference|literal
  std::optional<Semantics> semantics;  // --semantics kernel|reference, when given
  // --dot-passes 6|3|1: how a TPU evaluates float32 dots, for the kernel semantics' tolerance
  // (oracle/dot_precision.h).
  DotPasses dot_passes = DotPasses::kSix;
  // The dense reference's semantics: as given, else kernel (the oracle judges kernels).
  Semantics reference_semantics() const { return semantics.value_or(Semantics::kKernel); }
};

// Parses args (after the command name). allowed lists the flags this command takes, e.g.
// {"--mode", "--json"}; many_paths: it takes several files or directories (at least one).
// Returns an error message, or "" on success.
std::string parse_cli_args(const std::vector<std::string_view>& args,
                           const std::set<std::string_view>& allowed, CliArgs& out,
                           bool many_paths = false);

// Prints the usage error and the usage text to stderr; returns kExitUsage.
int usage_error(const std::string& what);
extern const char* const kUsage;

// Reads the case named in args. On failure prints the one-line error (and, with --json,
// {"error": ...} on stdout) and returns nullopt; the caller exits with kExitUnreadable.
std::optional<Case> read_case_or_report(const CliArgs& args);

// "rule_id: message", with a note when JAX crashes there instead of raising.
std::string failure_line(const Failure& f, Mode mode);
// Adds "rule", "message" (and "jax_crash") to an open JSON object.
void write_failure_json(JsonWriter& j, const Failure& f, Mode mode);

// Why a command that computes does not compute a case: one line, and the rule (in `mode`)
// when validation rejected it.
struct Rejection {
  std::string why;
  std::optional<Failure> failure;
  Mode mode = Mode::kStrict;
};

// The validation gate of commands that compute: the case must pass the chosen mode and,
// since only strict-valid inputs have a defined output, strict mode too unless
// needs_definition is false (the literal schedule, which computes what the Pallas kernel
// does on any input jax mode accepts).
std::optional<Rejection> compute_rejection(const Case& c, const CliArgs& args,
                                           bool needs_definition = true);

// The literal schedule in jax mode: the gate above without the definition, and the dtypes
// the schedule computes with (the Pallas kernel's: q float32 or bfloat16; KV the kernel
// floats, float16 or integers up to 32 bits).
std::optional<Rejection> literal_jax_rejection(const Case& c, const CliArgs& args);

// Prints a rejection: "PATH: why" on stderr and, with --json, its JSON object on stdout.
void report_rejection(const CliArgs& args, const Rejection& r);

// compute_rejection / literal_jax_rejection, reported; true when the case may be computed.
bool validate_for_compute(const Case& c, const CliArgs& args, bool needs_definition = true);
bool literal_jax_ok(const Case& c, const CliArgs& args);

// KernelOptions for the tiled kernel as the command line asks for it.
KernelOptions kernel_options(const CliArgs& args);

}  // namespace rpa
