// rpa bench --preset production[:NAME] (harness/production_bench.h): fixed production-size calls, each
// stage timed once and each output checked, printed as a table or JSON.
#pragma once

#include <string_view>

namespace rpa {

// Whether `preset` names the production preset: "production" (every call) or
// "production:NAME" (one of bench::production_bench_calls()).
bool is_production_preset(std::string_view preset);

// Runs the preset; threads: the tiled kernel's (0: every core). Exit 0 when every output
// agreed, 1 when one did not, 64 on an unknown call name.
int bench_production(std::string_view preset, int threads, bool json);

}  // namespace rpa
