// The jax family of fuzz inputs (harness/input_families.h).
#pragma once

#include "harness/input_families.h"

namespace rpa::fuzz {

extern const InputFamily kJaxFamily;

}  // namespace rpa::fuzz
