// The v3 spec model (DESIGN.md sections 9 and 16): the verdict each mode of a tpu-inference
// v3 dialect must give a generated case with named mutations (v3_mutation.h), from what the
// mutations declared and nothing else: a generated case is valid in both modes of its
// dialect (v3_build_case.h), so only its mutations can make it fail, and the first failure
// in the mode's check order is the one reported. Never computed by calling the validator.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "casegen/v3_case_spec.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "validation/jax_rule.h"
#include "validation/v3_rule.h"

namespace rpa::props {

// A generated case with its mutations applied, and what they declared.
struct V3MutatedCase {
  V3Materialized call;
  std::vector<V3Declared> declared;
};

// materialize_v3(spec, contents), then each mutation in order. The mutations must compose
// (v3_mutations_compose).
V3MutatedCase mutate_v3(const V3CaseSpec& spec, std::span<const V3Mutation> mutations,
                        Contents contents = Contents::kData);

// The first declared failure of the mode (Mode::kJax: the dialect's native mode) in its
// check order, or nullopt: the verdict v3_validate must give.
std::optional<V3Failure> expected_v3_failure(std::span<const V3Declared> declared, Mode mode);
// The same for spec (its dialect) with the mutations applied.
std::optional<V3Failure> expected_v3_failure(const V3CaseSpec& spec,
                                             std::span<const V3Mutation> mutations, Mode mode);

// "rule_id: message", or "valid".
std::string v3_verdict_text(const std::optional<V3Failure>& f);
// "name(arg), name(arg)", or "none".
std::string describe_v3_mutations(std::span<const V3Mutation> mutations);

// The entry point of fuzzers and properties: applies the mutations to spec's case and checks
// that v3_validate, in native and in strict mode of spec.dialect, gives exactly the model's
// verdict (rule and message), and that v3_validate_all starts with that failure. True when
// all agree. Otherwise false, and *why (when given) holds the case (describe(spec)), its
// replay line (rpa gen --dialect D --spec v3:HEX), the mutations and, per mode, what the
// model and the validator said. Mutations that do not compose (v3_mutations_compose: one
// that does not apply to spec, two kShape ones, two of a group) are a caller's error:
// false, with *why saying so. Validation reads shapes, dtypes, the index arrays, the
// keywords and the sink, never q, k, v or the cache's values: a caller may ask for
// Contents::kZeros (v3_materialize.h), which leaves those zero and untouched, and gets the
// same verdicts for less (fuzz_validate does).
bool check_v3_validation(const V3CaseSpec& spec, std::span<const V3Mutation> mutations,
                         std::string* why, Contents contents = Contents::kData);
// The same for a case already mutated (mutate_v3(spec, mutations), or a copy of one
// materialization with the mutations applied: what a caller trying many mutations on one
// case does to materialize it once).
bool check_v3_mutated(const V3CaseSpec& spec, std::span<const V3Mutation> mutations,
                      const V3MutatedCase& mutated, std::string* why);

}  // namespace rpa::props
