// JAX's ragged_paged_attention behind the dialect interface (service/dialect_ops.h).
#pragma once

#include "service/dialect_ops.h"

namespace rpa {

extern const DialectOps kJaxDialectOps;

}  // namespace rpa
