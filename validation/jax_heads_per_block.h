// How many heads one grid step processes, following JAX's get_min_heads_per_blk.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "validation/kernel_plan.h"

namespace rpa {

// Elements of the dtype per 32-bit word: 32 / bits (4 for fp8, 2 for bf16, 1 for f32);
// 0 for wider types, as Python's 32 // 64 gives.
int dtype_packing(DType t);

// JAX's can_be_xla_fully_tiled: x splits into whole (packing x 128) tiles whose count is
// 1, 2, 4, 8 or a multiple of 8. packing must be >= 1.
bool can_be_xla_fully_tiled(int64_t x, int packing);

// get_min_heads_per_blk for num_combined_kv_heads >= 2 even, num_q_heads a multiple of
// num_combined_kv_heads / 2, and packings >= 1. nullopt where JAX raises "Not
// implemented: ... can not be XLA fully tiled".
std::optional<HeadsPerBlock> min_heads_per_block(int64_t num_q_heads,
                                                 int64_t num_combined_kv_heads, DType q_dtype,
                                                 DType kv_dtype);

}  // namespace rpa
