// The production profile's jax calls (casegen/production.h): a recipe expanded into a jax
// CaseSpec, and the bytes a materialized jax call holds.
#pragma once

#include <cstdint>

#include "core/jax_inputs.h"
#include "casegen/jax_case_spec.h"
#include "casegen/production.h"

namespace rpa::props {

// The bytes a materialized call holds: its input arrays and the output a kernel writes (q's
// shape and dtype). ProductionSpec::memory_bytes() is this count's formula, to within
// memory_bytes_slack(). fuzz_validate checks the two on every production input (its zeros
// allocate nothing, so the allocation limit no longer checks the bound for it).
int64_t held_bytes(const Inputs& in);

// The call a recipe names, in the jax family's case spec (s.dialect == kJax).
CaseSpec production_case(const ProductionSpec& s);

}  // namespace rpa::props
