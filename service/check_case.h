// One case through `rpa check`: the verdict and what it rests on. check prints it for one
// file or tallies it over many, replay compares it with a regression's expected verdict.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "casefile/case.h"
#include "oracle/compare.h"
#include "service/case_options.h"
#include "service/json_writer.h"
#include "service/rule_report.h"
#include "validation/mode.h"

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

struct CheckOutcome;

// A rule that rejected a case, in the mode it was enforced in.
struct RejectedRule {
  RuleReport report;
  Mode mode = Mode::kStrict;
};

// What a dialect's check found besides the verdict, as the reports show it. Each dialect's
// check fills it (service/jax_check_case.cc: a Comparison of out; service/v3_check_case.cc: a
// V3Comparison, the cache bit for bit and out within tolerance).
struct CheckFindings {
  // Rejected: the mode that rejected the case, the rule where a rule did (a jax call the
  // literal schedule cannot compute is rejected by none), and how `rpa check CASE` reports it:
  // the line on stderr and, with --json, the object on stdout ("" where there is none).
  Mode rejected_mode = Mode::kStrict;
  std::optional<RejectedRule> rejected_rule;
  std::string rejection_line;
  std::string rejection_json;
  // Computed (agree, mismatch, biased): false where the case was rejected or the literal
  // schedule stopped where the kernel does not return.
  bool compared = false;
  // The comparison in one line (rpa check on many cases, replay), e.g. "0.43 of tolerance;
  // bias ..." or "0.43 of tolerance (max error ...); cache equal"; where a mismatch is; why a
  // biased verdict was given ("" for a dialect whose check judges no bias).
  std::string summary;
  std::string mismatch_line;
  std::string bias_line;
  // The comparison's fields in an open JSON object.
  std::function<void(JsonWriter& j)> write_comparison_json;
  // What `rpa check CASE` prints (the verdict line naming a.path and, where the check could
  // not reject an all-zero output, a warning line, each ending in a newline), and its --json
  // object (one line, no newline).
  std::function<std::string(const CheckOutcome& o, const CaseOptions& a)> text;
  std::function<std::string(const CheckOutcome& o, const CaseOptions& a)> json;
};

// What a dialect's check found before it is shown: its gate's rejection (of the dialect's type
// R) or its comparison (of type C).
template <class R, class C>
struct CheckFound {
  std::optional<R> rejection;
  std::optional<C> comparison;
};

// The findings of a comparison `c` of a dialect's type C, shown by the dialect's functions: its
// JSON fields, rpa check CASE's text and its --json object.
template <class C>
CheckFindings compared_findings(
    C c, std::string summary, std::string mismatch_line, std::string bias_line,
    void (*write_json)(JsonWriter&, const C&),
    std::string (*text)(const C&, const CheckOutcome&, const CaseOptions&),
    std::string (*json)(const C&, const CheckOutcome&, const CaseOptions&)) {
  const auto shared = std::make_shared<const C>(std::move(c));
  CheckFindings f;
  f.compared = true;
  f.summary = std::move(summary);
  f.mismatch_line = std::move(mismatch_line);
  f.bias_line = std::move(bias_line);
  f.write_comparison_json = [shared, write_json](JsonWriter& j) { write_json(j, *shared); };
  f.text = [shared, text](const CheckOutcome& o, const CaseOptions& a) { return text(*shared, o, a); };
  f.json = [shared, json](const CheckOutcome& o, const CaseOptions& a) { return json(*shared, o, a); };
  return f;
}

// The findings of a rejection of a case of dialect d in `mode` (by `rule`, where a rule did),
// reported by `line` on stderr; with --json, where a rule did, {"valid": false, "mode", the
// dialect where it names itself, "rule", "message"} on stdout.
CheckFindings rejected_findings(Dialect d, Mode mode, std::optional<RuleReport> rule,
                                std::string line);

struct CheckOutcome {
  CheckVerdict verdict = CheckVerdict::kAgree;
  std::string detail;  // rejected, unreadable, not applicable, a stopped schedule: the one line why
  // Not applicable: the options misuse the command (print the usage) rather than not fit
  // this case.
  bool usage = true;
  bool has_out = false;                // the case's own `out` was checked (else the kernel's)
  std::string checked;                 // "out", "the tiled kernel", ...
  std::string oracle;                  // "the reference (kernel semantics)", ...
  double seconds = 0.0;  // check_case's own time: validation, the computations, the comparison
  Dialect dialect = Dialect::kJax;
  // A dialect with a cache output (DESIGN.md section 16): has_kv_cache_out: the case's
  // `kv_cache_out` was checked. A case with one of out and kv_cache_out checks that one alone
  // (the other is the reference's own, compared with itself) and not_checked names the other
  // ("kv_cache_out" or "out"); a case with neither checks the tiled kernel's.
  bool has_kv_cache_out = false;
  std::string not_checked;
  // The dialect's rejection or comparison.
  CheckFindings findings;
  bool compared() const { return findings.compared; }
};

// The check's power in words: "catches a dropped key of weight >= 0.00061 (in every row:
// 0.0012)", or "catches no dropped key" where nothing is guaranteed (Comparison).
std::string key_weight_phrase(const Comparison& c);
// Why check's options do not fit together ("" when they do): --oracle literal with
// --schedule or --semantics.
std::string check_options_error(const CaseOptions& a);

// Checks a loaded case as `rpa check` does with these options (nothing printed): its
// dialect's check (DialectOps::check, service/dialect_ops.h), timed.
CheckOutcome check_case(const Case& c, const CaseOptions& args);
// Reads args.path, then check_case.
CheckOutcome check_file(const CaseOptions& args);

// One line on the comparison: worst error as a fraction of the tolerance and the bias, e.g.
// "0.43 of tolerance; bias -0.01 ulp (SE 0.02), toward zero -0.00 ulp (SE 0.01); 87.5% exact".
std::string comparison_summary(const Comparison& c);

// Why a bias verdict was given: "mean error ... ulp (SE ...), ...: a mean beyond 6 standard
// errors and 0.1 ulp is a systematic bias (oracle/bias.cc); --allow-bias accepts it".
std::string bias_line(const Comparison& c);

// A comparison's fields in an open JSON object (rpa check --json, one case or many).
void write_comparison_json(JsonWriter& j, const Comparison& c);

// For a computed verdict (o.compared()): o.findings' text and json.
std::string check_text(const CheckOutcome& o, const CaseOptions& a);
std::string check_json(const CheckOutcome& o, const CaseOptions& a);

}  // namespace rpa
