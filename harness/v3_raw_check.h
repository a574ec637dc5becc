// fuzz_raw_inputs' check of a raw tpu-inference v3 call (casegen/v3_raw_call.h):
// harness/raw_check.h's RawCheck.
#pragma once

#include "casegen/v3_raw_call.h"
#include "harness/raw_check.h"

namespace rpa::fuzz {

// The v3 dialects: v3_validate() and v3_validate_all() agree on the first failure in both
// modes; a strict-accepted call within the work bound runs through the v3 reference and
// v3_tiled_attention: the updated cache bit for bit, and where the reference's output is
// finite on every defined row and the data keep float32 far from overflow (v3_raw_check.cc),
// the output within the float32-accumulator tolerance (oracle/v3_compare.h).
RawCheck check_v3_raw_call(const V3RawCall& c);

}  // namespace rpa::fuzz
