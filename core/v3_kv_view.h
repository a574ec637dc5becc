// The logical view (core/paged_kv_view.h) of a tpu-inference v3 call: queries [T, Hq, D], the
// packed `cache` (the call's kv_cache, or the copy the fused update wrote into), flat
// page_indices of N * pages_per_seq entries, num_seqs = distribution[2].
#pragma once

#include <cstdint>

#include "core/dialect.h"
#include "core/paged_kv_view.h"
#include "core/v3_cache_layout.h"
#include "core/v3_inputs.h"

namespace rpa {

inline PagedKvView kv_view(Dialect dialect, const V3Inputs& in, const Tensor& cache) {
  const V3CacheLayout layout(dialect, cache.dtype(), in.keys.dim(1), in.queries.dim(2));
  return PagedKvView({
      .q_data = in.queries.data(),
      .kv_data = cache.data(),
      .q_dtype = in.queries.dtype(),
      .kv_dtype = cache.dtype(),
      .kv_lens = PagedKvView::int32_data(in.kv_lens),
      .page_indices = PagedKvView::int32_data(in.page_indices),
      .cu_q_lens = PagedKvView::int32_data(in.cu_q_lens),
      .num_seqs = static_cast<int64_t>(PagedKvView::int32_data(in.distribution)[2]),
      .pages_per_seq = in.kv_lens.dim(0) > 0 ? in.page_indices.dim(0) / in.kv_lens.dim(0) : 0,
      .num_pages = cache.dim(0),
      .page_size = cache.dim(1),
      .num_kv_heads = in.keys.dim(1),
      .num_q_heads = in.queries.dim(1),
      .head_dim = in.queries.dim(2),
      .token_stride = layout.token_stride(),
      .head_stride = layout.k_offset(1) - layout.k_offset(0),
      .v_delta = layout.v_offset(0) - layout.k_offset(0),
  });
}

}  // namespace rpa
