// JAX's ragged_paged_attention behind the generator interface (casegen/dialect_generator.h).
#pragma once

#include "casegen/dialect_generator.h"

namespace rpa::props {

extern const DialectGenerator kJaxGenerator;

}  // namespace rpa::props
