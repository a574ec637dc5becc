// The grid and the blocks the Pallas kernel (and the tiled kernel after it) uses for a jax
// call, from the VMEM budget: what strict validation's budget rules and the kernels agree on.
#pragma once

#include <cstdint>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "validation/jax_heads_per_block.h"
#include "validation/jax_vmem_budget.h"
#include "validation/kernel_plan.h"
#include "validation/target_profile.h"

namespace rpa {

// Precondition for both: strict validation accepted (in, params) for options.target; for
// the literal schedule, jax validation is enough.
// untuned_blocks: see KernelOptions.
KernelPlan plan_kernel(const Inputs& in, const Params& params, const TargetProfile& target,
                       bool untuned_blocks = false);

}  // namespace rpa
