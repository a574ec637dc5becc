// fuzz_raw_inputs' check of a raw jax call (casegen/jax_raw_call.h): harness/raw_check.h's
// RawCheck.
#pragma once

#include "casegen/jax_raw_call.h"
#include "harness/raw_check.h"

namespace rpa::fuzz {

// validate() and validate_all() in both modes for every target profile agree on the first
// failure; a strict-accepted call within the work bound runs through the dense reference and
// the tiled kernel (both schedules), whose outputs have q's shape and dtype.
RawCheck check_raw_call(const RawCall& c);

}  // namespace rpa::fuzz
