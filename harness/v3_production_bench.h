// rpa bench's production calls of the tpu-inference v3 dialects, kernel.py and hd64
// (harness/production_bench.h): the call materialized, validated (strict, then tpu-inference's
// own checks), run through the v3 reference, the tiled kernel and the literal v3 program on TPU
// v5, v6 and v7, each stage timed once.
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
void time_v3_production(const props::ProductionSpec& s, int threads,
                        const std::function<void(std::string_view)>& progress,
                        ProductionTiming& t);

}  // namespace rpa::bench
