// The tpu-inference v3 family of fuzz inputs (harness/input_families.h): both v3 dialects.
#pragma once

#include "harness/input_families.h"

namespace rpa::fuzz {

extern const InputFamily kV3Family;

}  // namespace rpa::fuzz
