// The logical view (core/paged_kv_view.h) of a jax call: kv_pages [P, S, 2 Hkv, D], head 2h
// K and 2h + 1 V of kv head h.
#pragma once

#include <cstdint>

#include "core/jax_inputs.h"
#include "core/paged_kv_view.h"

namespace rpa {

inline PagedKvView kv_view(const Inputs& in) {
  return PagedKvView({
      .q_data = in.q.data(),
      .kv_data = in.kv_pages.data(),
      .q_dtype = in.q.dtype(),
      .kv_dtype = in.kv_pages.dtype(),
      .kv_lens = PagedKvView::int32_data(in.kv_lens),
      .page_indices = PagedKvView::int32_data(in.page_indices),
      .cu_q_lens = PagedKvView::int32_data(in.cu_q_lens),
      .num_seqs = static_cast<int64_t>(PagedKvView::int32_data(in.num_seqs)[0]),
      .pages_per_seq = in.page_indices.dim(1),
      .num_pages = in.kv_pages.dim(0),
      .page_size = in.kv_pages.dim(1),
      .num_kv_heads = in.kv_pages.dim(2) / 2,
      .num_q_heads = in.q.dim(1),
      .head_dim = in.q.dim(2),
      .token_stride = in.kv_pages.dim(2) * in.kv_pages.dim(3),
      .head_stride = 2 * in.kv_pages.dim(3),
      .v_delta = in.kv_pages.dim(3),
  });
}

}  // namespace rpa
