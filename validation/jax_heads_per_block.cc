#include "validation/jax_heads_per_block.h"

namespace rpa {

int dtype_packing(DType t) { return 32 / dtype_bits(t); }

bool can_be_xla_fully_tiled(int64_t x, int packing) {
  if (x % packing != 0) return false;
  x /= packing;
  return x == 1 || x == 2 || x == 4 || x == 8 || x % 8 == 0;
}

std::optional<HeadsPerBlock> min_heads_per_block(int64_t num_q_heads,
                                                 int64_t num_combined_kv_heads, DType q_dtype,
                                                 DType kv_dtype) {
  const int kv_packing = dtype_packing(kv_dtype);
  if (!can_be_xla_fully_tiled(num_combined_kv_heads, kv_packing)) return std::nullopt;
  const int64_t ratio = num_q_heads / (num_combined_kv_heads / 2);
  // A heads block covers one (8 * packing)-row tile of combined heads when they divide
  // evenly into such tiles, else all of them.
  const int64_t max_combined_kv_tiling = 8 * int64_t{kv_packing};
  const int64_t min_combined_kv_heads = num_combined_kv_heads % max_combined_kv_tiling == 0
                                            ? max_combined_kv_tiling
                                            : num_combined_kv_heads;
  const int64_t min_q_heads = min_combined_kv_heads / 2 * ratio;
  if (can_be_xla_fully_tiled(min_q_heads, dtype_packing(q_dtype))) {
    return HeadsPerBlock{min_q_heads, min_combined_kv_heads};
  }
  return HeadsPerBlock{num_q_heads, num_combined_kv_heads};
}

}  // namespace rpa
