// tpu-inference's v3 kernels (kernel.py and kernel_hd64.py) behind the generator interface
// (casegen/dialect_generator.h): one entry each, over the same v3 functions.
#pragma once

#include "casegen/dialect_generator.h"

namespace rpa::props {

extern const DialectGenerator kV3Generator;
extern const DialectGenerator kV3Hd64Generator;

}  // namespace rpa::props
