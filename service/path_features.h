// The path features of a case's call (schedule/path_features.h; DESIGN.md section 17): the
// walk of the program the call runs on a target, what the kernel campaign covers. Both doors
// (rpa gen --features, rpa.path_features) call it.
#pragma once

#include "casefile/case.h"
#include "schedule/path_features.h"
#include "validation/target_profile.h"

namespace rpa {

// jax: the Pallas walk on the plan the literal schedule runs (the call's block sizes, else the
// kernel's untuned defaults); v3: the target generation's program, walked without its
// arithmetic. A call the dialect's native validation rejects has one feature, "rejected.RULE";
// it runs no program. A jax call the walk cannot take (index arrays that are not int32 or not
// [N], [N, pps], [N+1], num_seqs outside [0, N]: JAX's validators let some through) has
// "stops.not_walked".
PathFeatures case_path_features(const Case& c, const TargetProfile& target);

}  // namespace rpa
