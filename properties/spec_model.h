// The spec model (DESIGN.md section 9): the verdict each validation mode must give a
// generated case, from what its mutations declared plus the rules that hold whatever was
// mutated (JAX's over-rejections of padding and KV blocks, the strict VMEM budget).
// Written from the rule table's semantics, never by calling the validator.
#pragma once

#include <optional>
#include <string>

#include "kernel/rule.h"
#include "properties/materialize.h"

namespace rpa::props {

// The first failure in the mode's reporting order, or nullopt for a valid case.
std::optional<Failure> expected_failure(const Materialized& m, Mode mode);

// "rule_id: message", or "valid": a verdict as the properties, rpa gen and the campaign
// print it.
std::string verdict_text(const std::optional<Failure>& f);

}  // namespace rpa::props
