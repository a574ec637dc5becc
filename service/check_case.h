// One case through `rpa check`: the verdict and what it rests on. check prints it for one
// file or tallies it over many, replay compares it with a regression's expected verdict.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "casefile/case.h"
#include "oracle/compare.h"
#include "oracle/v3_compare.h"
#include "service/case_options.h"
#include "service/jax_run_case.h"
#include "service/json_writer.h"
#include "service/v3_run_case.h"

namespace rpa {

enum class CheckVerdict {
  kAgree,       // within the tolerance and without a bias (or --allow-bias)
  kMismatch,    // outside the tolerance
  kBiased,      // within the tolerance, but biased (oracle/bias.h), without --allow-bias
  kRejected,    // not computed: validation rejected it (or the literal schedule cannot run it)
  kUnreadable,  // the case file could not be read
  kNotApplicable,  // the options do not apply to this case (e.g. --oracle literal without `out`)
};

// "agree", "mismatch", "biased", "rejected", "unreadable", "not_applicable".
std::string_view verdict_name(CheckVerdict v);

struct CheckOutcome {
  CheckVerdict verdict = CheckVerdict::kAgree;
  std::string detail;                 // rejected, unreadable, usage: the one line why
  std::optional<Rejection> rejection;  // rejected
  std::optional<Comparison> cmp;       // agree, mismatch, biased
  bool has_out = false;                // the case's own `out` was checked (else the kernel's)
  std::string checked;                 // "out", "the tiled kernel", ...
  std::string oracle;                  // "the reference (kernel semantics)", ...
  double seconds = 0.0;  // check_case's own time: validation, the computations, the comparison
  // A v3 case (DESIGN.md section 16): its dialect, and in place of rejection / cmp the v3
  // gate's rejection and v3_compare's comparison (cache bit for bit, out within tolerance).
  // has_out: the case's `out` was checked; has_kv_cache_out: its `kv_cache_out` was. A case
  // with one of them checks that one alone (the other is the reference's own, compared with
  // itself) and not_checked names the other ("kv_cache_out" or "out"); a case with neither
  // checks the tiled kernel's.
  Dialect dialect = Dialect::kJax;
  std::optional<V3Rejection> v3_rejection;
  std::optional<V3Comparison> v3_cmp;
  bool has_kv_cache_out = false;
  std::string not_checked;
};

// The check's power in words: "catches a dropped key of weight >= 0.00061 (in every row:
// 0.0012)", or "catches no dropped key" where nothing is guaranteed (Comparison).
std::string key_weight_phrase(const Comparison& c);
// The same for a v3 check against the reference, with whether an all-zero output fails:
// "catches a dropped key of weight >= 0.0031 (in every row: 0.2), rejects an all-zero output".
std::string v3_power_phrase(const V3Comparison& c);

// Why check's options do not fit together ("" when they do): --oracle literal with
// --schedule or --semantics.
std::string check_options_error(const CaseOptions& a);

// A v3 case's own out and kv_cache_out against an oracle, with no validation gate (the caller
// has validated: strict for the reference, the native mode for the literal schedule): the v3
// reference in `semantics` (oracle/v3_compare.h's tolerance, the check's power stated), or
// with `literal` the literal v3 schedule on `program`'s generation under the schedule
// tolerance. kernel_stop ("KIND: what") where the literal schedule says the kernel does not
// return; nothing is compared then. check_case's literal oracle and the Python binding's
// v3_check both call it. Precondition: the case holds out and kv_cache_out.
struct V3OutCheck {
  V3Comparison cmp;
  std::optional<std::string> kernel_stop;
};
V3OutCheck v3_check_out(const Case& c, Semantics semantics, bool literal,
                        const V3ProgramOptions& program);

// Checks a loaded case as `rpa check` does with these options (nothing printed).
CheckOutcome check_case(const Case& c, const CaseOptions& args);
// Reads args.path, then check_case.
CheckOutcome check_file(const CaseOptions& args);

// The one-line summary of a v3 comparison (rpa check on many cases, replay, campaign), e.g.
// "0.43 of tolerance (max error 0.0012, tolerance there 0.0028); cache equal".
std::string v3_comparison_summary(const V3Comparison& c);
// A v3 comparison's fields in an open JSON object.
void write_v3_comparison_json(JsonWriter& j, const V3Comparison& c);

// One line on the comparison: worst error as a fraction of the tolerance and the bias, e.g.
// "0.43 of tolerance; bias -0.01 ulp (SE 0.02), toward zero -0.00 ulp (SE 0.01); 87.5% exact".
std::string comparison_summary(const Comparison& c);

// Why a bias verdict was given: "mean error ... ulp (SE ...), ...: a mean beyond 6 standard
// errors and 0.1 ulp is a systematic bias (oracle/bias.cc); --allow-bias accepts it".
std::string bias_line(const Comparison& c);

// A comparison's fields in an open JSON object (rpa check --json, one case or many).
void write_comparison_json(JsonWriter& j, const Comparison& c);

// For a computed verdict (agree, mismatch, biased; o.cmp or o.v3_cmp set): what `rpa check CASE` prints,
// the verdict line naming a.path and, where the check could not reject an all-zero output,
// a warning line (each ending in a newline); and its --json object (one line, no newline).
std::string check_text(const CheckOutcome& o, const CaseOptions& a);
std::string check_json(const CheckOutcome& o, const CaseOptions& a);

}  // namespace rpa
