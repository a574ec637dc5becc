// tpu-inference's v3 kernels (kernel.py and kernel_hd64.py) behind the dialect interface
// (service/dialect_ops.h): one entry each, over the same v3 functions.
#pragma once

#include "service/dialect_ops.h"

namespace rpa {

extern const DialectOps kV3DialectOps;
extern const DialectOps kV3Hd64DialectOps;

}  // namespace rpa
