// The logical view of one call that every layer below the dialects computes on (DESIGN.md
// section 16, "one math core"): the queries, the paged cache with its token records and the
// K and V rows inside them, the page table and the sequences, derived quantities as methods,
// the layout turned into strides once. The jax dialect's [pages, S, 2 Hkv, D] cache and
// tpu-inference v3's packed caches (core/v3_cache_layout.h) differ only in the strides.
// Only for inputs strict validation accepted (ranks, int32 index arrays, every used page
// index in range).
#pragma once

#include <cstdint>

#include "core/dialect.h"
#include "core/dtype.h"
#include "core/jax_inputs.h"
#include "core/v3_cache_layout.h"
#include "core/v3_inputs.h"

namespace rpa {

class PagedKvView {
 public:
  // The jax dialect (section 2): kv_pages [P, S, 2 Hkv, D], head 2h K and 2h + 1 V of kv head h.
  explicit PagedKvView(const Inputs& in)
      : q_data_(in.q.data()),
        kv_data_(in.kv_pages.data()),
        q_dtype_(in.q.dtype()),
        kv_dtype_(in.kv_pages.dtype()),
        kv_lens_(int32_data(in.kv_lens)),
        page_indices_(int32_data(in.page_indices)),
        cu_q_lens_(int32_data(in.cu_q_lens)),
        num_seqs_(static_cast<int64_t>(int32_data(in.num_seqs)[0])),
        pages_per_seq_(in.page_indices.dim(1)),
        num_pages_(in.kv_pages.dim(0)),
        page_size_(in.kv_pages.dim(1)),
        num_kv_heads_(in.kv_pages.dim(2) / 2),
        num_q_heads_(in.q.dim(1)),
        head_dim_(in.q.dim(2)),
        token_stride_(in.kv_pages.dim(2) * in.kv_pages.dim(3)),
        head_stride_(2 * in.kv_pages.dim(3)),
        v_delta_(in.kv_pages.dim(3)) {}

  // A tpu-inference v3 dialect: queries [T, Hq, D], the packed `cache` (the call's kv_cache,
  // or the copy the fused update wrote into), flat page_indices of N * pages_per_seq entries,
  // num_seqs = distribution[2].
  PagedKvView(Dialect dialect, const V3Inputs& in, const Tensor& cache)
      : PagedKvView(in, cache, V3CacheLayout(dialect, cache.dtype(), in.keys.dim(1), in.queries.dim(2))) {}

  const std::byte* q_data() const { return q_data_; }    // [T, Hq, D] in q_dtype()
  const std::byte* kv_data() const { return kv_data_; }  // the cache, in kv_dtype()
  DType q_dtype() const { return q_dtype_; }
  DType kv_dtype() const { return kv_dtype_; }
  int64_t num_seqs() const { return num_seqs_; }            // sequences computed
  int64_t pages_per_seq() const { return pages_per_seq_; }  // page table entries per sequence
  int64_t num_pages() const { return num_pages_; }          // pages in the cache
  int64_t page_size() const { return page_size_; }          // S
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t num_q_heads() const { return num_q_heads_; }
  int64_t head_dim() const { return head_dim_; }
  // Query heads per kv head: query head h reads kv head h / q_heads_per_kv().
  int64_t q_heads_per_kv() const { return num_q_heads_ / num_kv_heads(); }
  // Elements from one token's record to the next in a page, from kv head h's K row to kv
  // head h + 1's, and from a head's K row to its V row.
  int64_t token_stride() const { return token_stride_; }
  int64_t head_stride() const { return head_stride_; }
  int64_t v_delta() const { return v_delta_; }

  int64_t q_start(int64_t s) const { return cu_q_lens_[s]; }  // first q row of sequence s
  int64_t q_end(int64_t s) const { return cu_q_lens_[s + 1]; }
  int64_t q_len(int64_t s) const { return q_end(s) - q_start(s); }
  int64_t kv_len(int64_t s) const { return kv_lens_[s]; }
  // Rows of q that belong to a sequence: [0, total_q_tokens()).
  int64_t total_q_tokens() const { return cu_q_lens_[num_seqs_]; }
  // Causal position of the sequence's query row r among its kv_len tokens.
  int64_t q_position(int64_t s, int64_t r) const { return kv_len(s) - q_len(s) + r; }

  int64_t page_of(int64_t s, int64_t t) const {
    return page_indices_[s * pages_per_seq_ + t / page_size_];
  }
  int64_t slot_of(int64_t t) const { return t % page_size_; }

  // Element offsets into the cache of token t of sequence s, kv head h.
  int64_t k_offset(int64_t s, int64_t t, int64_t h) const { return token_offset(s, t) + h * head_stride_; }
  int64_t v_offset(int64_t s, int64_t t, int64_t h) const { return k_offset(s, t, h) + v_delta_; }
  // Element offset into q / o [T, Hq, D] of row r, query head h.
  int64_t q_offset(int64_t row, int64_t h) const { return (row * num_q_heads_ + h) * head_dim_; }

 private:
  PagedKvView(const V3Inputs& in, const Tensor& cache, const V3CacheLayout& layout)
      : q_data_(in.queries.data()),
        kv_data_(cache.data()),
        q_dtype_(in.queries.dtype()),
        kv_dtype_(cache.dtype()),
        kv_lens_(int32_data(in.kv_lens)),
        page_indices_(int32_data(in.page_indices)),
        cu_q_lens_(int32_data(in.cu_q_lens)),
        num_seqs_(static_cast<int64_t>(int32_data(in.distribution)[2])),
        pages_per_seq_(in.kv_lens.dim(0) > 0 ? in.page_indices.dim(0) / in.kv_lens.dim(0) : 0),
        num_pages_(cache.dim(0)),
        page_size_(cache.dim(1)),
        num_kv_heads_(in.keys.dim(1)),
        num_q_heads_(in.queries.dim(1)),
        head_dim_(in.queries.dim(2)),
        token_stride_(layout.token_stride()),
        head_stride_(layout.k_offset(1) - layout.k_offset(0)),
        v_delta_(layout.v_offset(0) - layout.k_offset(0)) {}

  static const int32_t* int32_data(const Tensor& t) {
    return reinterpret_cast<const int32_t*>(t.data());
  }
  int64_t token_offset(int64_t s, int64_t t) const {
    return (page_of(s, t) * page_size_ + slot_of(t)) * token_stride_;
  }

  const std::byte* q_data_;
  const std::byte* kv_data_;
  DType q_dtype_;
  DType kv_dtype_;
  const int32_t* kv_lens_;       // i32[N]
  const int32_t* page_indices_;  // i32[N * pages_per_seq]
  const int32_t* cu_q_lens_;     // i32[N + 1], cu_q_lens[0] == 0, non-decreasing to num_seqs
  int64_t num_seqs_;
  int64_t pages_per_seq_;
  int64_t num_pages_;
  int64_t page_size_;
  int64_t num_kv_heads_;
  int64_t num_q_heads_;
  int64_t head_dim_;
  int64_t token_stride_;
  int64_t head_stride_;
  int64_t v_delta_;
};

}  // namespace rpa
