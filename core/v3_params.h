// The keyword arguments of a tpu-inference v3 call (v3-contract.md section 1), as the kernel
// names them. Unset optionals are Python's None. kernel.py and kernel_hd64.py take different
// subsets: hd64 has no use_causal_mask / update_kv_cache / skip_kv_mask / out_dtype and no
// block-size tuples, kernel.py no num_kv_pages_per_block / num_queries_per_block; a case file
// of one dialect holding the other's keywords is malformed (casefile/).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace rpa {

// (bq_sz, bkv_sz, bq_csz, bkv_csz) of one pass: q fetch block (tokens), KV fetch block
// (tokens), q compute block, KV compute block.
using V3BlockSizes = std::array<int64_t, 4>;

struct V3Params {
  bool use_causal_mask = true;
  bool update_kv_cache = true;
  bool skip_kv_mask = false;
  double sm_scale = 1.0;
  std::optional<int64_t> sliding_window;
  std::optional<double> soft_cap;
  std::optional<DType> out_dtype;    // None: float32 for float32 queries, else bfloat16
  std::optional<double> mask_value;  // None: finfo(out_dtype).min (hd64: -0.7 * f32 max)
  std::optional<double> q_scale;
  std::optional<double> k_scale;
  std::optional<double> v_scale;
  std::optional<int64_t> chunk_prefill_size;
  std::optional<V3BlockSizes> d_block_sizes;  // decode pass
  std::optional<V3BlockSizes> p_block_sizes;  // prefill pass
  std::optional<V3BlockSizes> m_block_sizes;  // mixed pass
  std::optional<int64_t> num_kv_pages_per_block;  // hd64
  std::optional<int64_t> num_queries_per_block;   // hd64
  std::optional<int64_t> vmem_limit_bytes;

  bool operator==(const V3Params&) const = default;
};

}  // namespace rpa
