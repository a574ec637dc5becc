// rpa bench's production calls of JAX's dialect (harness/production_bench.h): the call
// materialized, validated (strict, then JAX's own checks), run through the dense reference, the
// tiled kernel and the literal Pallas schedule, each stage timed once.
#pragma once

#include <functional>
#include <string_view>

#include "casegen/production.h"
#include "harness/production_bench.h"

namespace rpa::bench {

// Appends the call's stages to t.stages, the tiled kernel on `threads` threads (0: every
// core); `progress`, if set, before each stage with its name. Throws std::logic_error if
// validation rejects the call. The family owning the dialect (harness/input_families.h) holds
// it as time_production.
void time_jax_production(const props::ProductionSpec& s, int threads,
                         const std::function<void(std::string_view)>& progress,
                         ProductionTiming& t);

}  // namespace rpa::bench
