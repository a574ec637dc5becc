// The spec model (DESIGN.md section 9): the verdict each validation mode must give a
// generated case, from what its mutations declared plus the rules that hold whatever was
// mutated (JAX's over-rejections of padding and KV blocks, the strict VMEM budget, jax
// mode's head_dim lanes) and, last, the rules of the Pallas kernel's program. Written from
// the rule table's semantics, never by calling the validator; the program rules share the
// walk of the Pallas program with it (schedule/jax_program.h, checked against the real
// kernel by the jax ctest label).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "casegen/jax_materialize.h"
#include "validation/jax_rule.h"

namespace rpa::props {

// The first failure in the mode's reporting order, or nullopt for a valid case.
std::optional<Failure> expected_failure(const Materialized& m, Mode mode);
// The same for arrays and parameters with their declarations, e.g. a valid case that a
// metamorphic property transformed (nothing declared).
std::optional<Failure> expected_failure(const Inputs& in, const Params& params,
                                        std::span<const Declared> declared, Mode mode);

// strict mode's stale_kv_block and rows_not_computed: the input is valid by the definition
// (section 2), but the Pallas kernel computes some defined rows from other data than the
// definition's (findings 8 and 9), so strict mode rejects it. Generated valid cases may hit
// them; the default schedule still computes the definition there.
bool is_pallas_departure(RuleId rule);

// "rule_id: message", or "valid": a verdict as the properties, rpa gen and the campaign
// print it.
std::string verdict_text(const std::optional<Failure>& f);

}  // namespace rpa::props
