// The production profile's v3 calls (casegen/production.h): a recipe expanded into a v3
// case spec, and the bytes a materialized v3 call holds.
#pragma once

#include <cstdint>

#include "core/v3_inputs.h"
#include "casegen/production.h"
#include "casegen/v3_case_spec.h"

namespace rpa::props {

// The bytes a materialized v3 call holds (held_bytes of casegen/jax_production.h: its input
// arrays and the output, within memory_bytes_slack() of ProductionSpec::memory_bytes()).
int64_t held_bytes(const V3Inputs& in);

// The call a recipe names, in the v3 family's case spec (s.dialect is a v3 dialect).
V3CaseSpec production_v3_case(const ProductionSpec& s);

}  // namespace rpa::props
