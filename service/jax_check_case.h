// rpa check on a case of JAX's dialect (DESIGN.md section 8): its `out` (else the tiled
// kernel's) against the dense reference or the literal schedule, and what the reports show of
// it (service/check_case.h's CheckFindings).
#pragma once

#include <optional>
#include <string>

#include "casefile/case.h"
#include "oracle/compare.h"
#include "service/case_options.h"
#include "service/check_case.h"
#include "service/jax_run_case.h"
#include "service/json_writer.h"

namespace rpa {

// The jax gate's rejection, or the comparison of the output under test with the oracle.
struct JaxCheckFindings final : CheckFindings {
  std::optional<Rejection> rejection;
  std::optional<Comparison> comparison;

  bool compared() const override { return comparison.has_value(); }
  std::string summary() const override;
  std::string mismatch_line() const override;
  std::string bias_line() const override;
  void write_comparison_json(JsonWriter& j) const override;
  std::string text(const CheckOutcome& o, const CaseOptions& a) const override;
  std::string json(const CheckOutcome& o, const CaseOptions& a) const override;
  std::optional<RejectedRule> rejected_rule() const override;
  std::string rejection_line(const CheckOutcome& o, const CaseOptions& a) const override;
  std::string rejection_json(const CheckOutcome& o, const CaseOptions& a) const override;
};

// The jax dialect's check (DialectOps::check), untimed.
CheckOutcome jax_check(const Case& c, const CaseOptions& a);

// A check's jax findings; null when the check was not of a jax case or did not run.
const JaxCheckFindings* jax_findings(const CheckOutcome& o);

}  // namespace rpa
