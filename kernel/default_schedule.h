// The default schedule (DESIGN.md sections 5 and 16, docs/kernel.md): the tiled kernels'
// math core on any dialect's logical view.
#pragma once

#include "core/attention_math.h"
#include "core/paged_kv_view.h"
#include "core/tensor.h"
#include "validation/kernel_plan.h"

namespace rpa {

// The default schedule on any dialect's logical view (DESIGN.md section 16): the math core
// that tiled_attention runs for the jax dialect and v3_tiled_attention for tpu-inference v3.
// Uses plan.blocks.kv_pages_per_block only (heads and query blocks are the schedule's own).
// Writes the rows [0, view.total_q_tokens()) of out ([T, Hq, D] in view.q_dtype()), nothing
// else. Precondition: the dialect's strict validation accepted the call; math.mask_value
// <= kMaxExactMaskValue unless math is the jax dialect's.
void default_schedule(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
                      int threads, Tensor& out);

}  // namespace rpa
