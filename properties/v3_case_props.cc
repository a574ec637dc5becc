// Properties of the v3 case generator (DESIGN.md sections 9 and 16): every spec RapidCheck
// draws replays from its bytes, and its materialized call is valid in both modes of its
// dialect (validation/v3_validate.h), so a v3 property that finds a disagreement prints a
// replayable valid case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "properties/v3_rc_case.h"
#include "validation/v3_validate.h"

namespace rpa::props {
namespace {

std::string verdict(const std::optional<V3Failure>& f) {
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "valid";
}

RC_GTEST_PROP(V3CaseGen, ReplaysFromItsBytes, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const std::optional<V3CaseSpec> back = v3_spec_from_hex(v3_spec_hex(spec));
  RC_ASSERT(back.has_value());
  RC_ASSERT(*back == spec);
}

RC_GTEST_PROP(V3CaseGen, IsValidInBothModes, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const int64_t n = spec.num_seqs(), j = spec.num_decode + spec.num_prefill;
  RC_CLASSIFY(n == 0, "empty");
  RC_CLASSIFY(n > 0 && spec.num_decode == n, "decode only");
  RC_CLASSIFY(spec.num_prefill > 0, "prefill range");
  RC_CLASSIFY(n > j, "mixed range");
  RC_TAG(dialect_name(spec.dialect));
  const V3Materialized m = materialize_v3(spec);
  RC_ASSERT(verdict(v3_validate(spec.dialect, m.inputs, m.params, Mode::kStrict)) == "valid");
  RC_ASSERT(verdict(v3_validate(spec.dialect, m.inputs, m.params, Mode::kJax)) == "valid");
}

}  // namespace
}  // namespace rpa::props
