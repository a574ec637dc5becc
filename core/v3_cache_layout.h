// Where tpu-inference v3's packed KV cache keeps each key and value (v3-contract.md section
// 3e): the expected cache shape for a dialect, and the element offset of (page, slot, kv
// head, K or V, d). Both dialects store a token as one record of `token_stride()` elements;
// a head's K and V rows sit at fixed offsets inside it, so a reader walks the cache in place
// as it walks JAX's [pages, page_size, 2 Hkv, D] layout.
#pragma once

#include <cstdint>

#include "core/dialect.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace rpa {

// 32 / bits: values per 32-bit word (float32 1, bfloat16 2, float8 4); 0 for 64-bit types.
inline int64_t v3_kv_packing(DType kv) { return 32 / dtype_bits(kv); }
inline int64_t v3_align(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

class V3CacheLayout {
 public:
  // Precondition: packing > 0, head_dim >= 0, num_kv_heads >= 0.
  V3CacheLayout(Dialect dialect, DType kv, int64_t num_kv_heads, int64_t head_dim)
      : hd64_(dialect == Dialect::kTpuInferenceV3Hd64),
        packing_(v3_kv_packing(kv)),
        padded_dim_(hd64_ ? 128 : v3_align(head_dim, 128)),
        packed_rows_(hd64_ ? v3_align(num_kv_heads, packing_) / packing_
                           : v3_align(2 * num_kv_heads, packing_) / packing_) {}

  // get_kv_cache_shape(pages, page_size, Hkv, D, kv dtype) (kernel.py), or hd64's layout.
  Shape cache_shape(int64_t pages, int64_t page_size) const {
    return {pages, page_size, packed_rows_, packing_, padded_dim_};
  }
  int64_t packing() const { return packing_; }
  int64_t padded_head_dim() const { return padded_dim_; }
  int64_t packed_rows() const { return packed_rows_; }
  int64_t token_stride() const { return packed_rows_ * packing_ * padded_dim_; }
  // Offsets inside a token's record of kv head h's first K and V element.
  int64_t k_offset(int64_t h) const { return hd64_ ? h * 128 : 2 * h * padded_dim_; }
  int64_t v_offset(int64_t h) const { return hd64_ ? h * 128 + 64 : (2 * h + 1) * padded_dim_; }
  // Element offset of (page, slot) in the cache.
  int64_t token_offset(int64_t page, int64_t slot, int64_t page_size) const {
    return (page * page_size + slot) * token_stride();
  }

 private:
  bool hd64_;
  int64_t packing_;
  int64_t padded_dim_;
  int64_t packed_rows_;
};

}  // namespace rpa
