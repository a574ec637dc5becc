// What fuzz_raw_inputs checks on one raw call (jax_raw_call.h), as a value: the libFuzzer target
// aborts on a problem, `rpa campaign` records it as a finding. Sanitizer reports are the
// fuzzing build's part; this is the part every build can see.
#pragma once

#include <optional>
#include <string>

#include "casegen/jax_raw_call.h"
#include "casegen/v3_raw_call.h"

namespace rpa::fuzz {

struct RawCheck {
  bool strict_accepts = false;  // strict mode, default target, accepted the call
  bool ran = false;             // ... and it was small enough to run the reference and kernel
  std::optional<std::string> problem;  // one line, when a check failed
};

// validate() and validate_all() in both modes for every target profile agree on the first
// failure; a strict-accepted call within the work bound runs through the dense reference and
// the tiled kernel (both schedules), whose outputs have q's shape and dtype.
RawCheck check_raw_call(const RawCall& c);

// The v3 dialects: v3_validate() and v3_validate_all() agree on the first failure in both
// modes; a strict-accepted call within the work bound runs through the v3 reference and
// v3_tiled_attention: the updated cache bit for bit, and where the reference's output is
// finite on every defined row and the data keep float32 far from overflow (raw_check.cc),
// the output within the float32-accumulator tolerance (oracle/v3_compare.h).
RawCheck check_v3_raw_call(const V3RawCall& c);

}  // namespace rpa::fuzz
