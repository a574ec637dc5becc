// What a case is checked or computed with, as both doors take it: the options of rpa validate,
// run and check (DESIGN.md section 8), and their parser. The command line adds its paths and
// printing flags (cli/cli_args.h); the Python package passes its keyword arguments as these
// flags, so every option means the same through either door.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "casefile/case_file.h"
#include "oracle/dot_precision.h"
#include "reference/semantics.h"
#include "validation/mode.h"

namespace rpa {

struct CaseOptions {
  std::string path;         // the case file, or the name a case goes by in messages
  bool all = false;         // validate --all: every failing rule, not only the first
  bool allow_bias = false;  // check --allow-bias: a biased output still passes
  ValidateOptions validate;
  CaseReadOptions read;
  std::string impl;      // --impl
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

// Parses the option at args[i] if it is one of CaseOptions' flags (taking its value, args[i +
// 1], and advancing i past it): nullopt when args[i] is not one, "" when parsed, else the
// error ("--mode takes native, jax or strict", "--threads needs a value").
std::optional<std::string> parse_case_option(const std::vector<std::string_view>& args,
                                             size_t& i, CaseOptions& out);

// Parses a list of option flags, each of them in `allowed`: "" on success, else the error
// ("unknown option --x", or parse_case_option's).
std::string parse_case_options(const std::vector<std::string_view>& args,
                               const std::set<std::string_view>& allowed, CaseOptions& out);

// Why run's options (every dialect's) do not fit together ("" when they do): --impl missing or unknown,
// --schedule literal without the kernel, --semantics without the reference.
std::string run_options_error(const CaseOptions& a);

// The flags of the three computations: validate, run, check.
inline const std::set<std::string_view> kValidateOptions = {"--mode", "--target", "--all"};
inline const std::set<std::string_view> kRunOptions = {
    "--impl", "--threads", "--literal", "--schedule", "--semantics", "--mode", "--target",
    "--max-bytes"};
inline const std::set<std::string_view> kCheckOptions = {
    "--mode",   "--threads", "--literal",   "--schedule",   "--oracle",
    "--semantics", "--target", "--max-bytes", "--allow-bias", "--dot-passes"};

}  // namespace rpa
