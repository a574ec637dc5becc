// The logical view of one call that every layer below the dialects computes on (DESIGN.md
// section 16, "one math core"): the queries, the paged cache with its token records and the
// K and V rows inside them, the page table and the sequences, derived quantities as methods,
// the layout turned into strides once. The jax dialect's [pages, S, 2 Hkv, D] cache and
// tpu-inference v3's packed caches (core/v3_cache_layout.h) differ only in the strides; each
// dialect builds its view (core/jax_kv_view.h, core/v3_kv_view.h).
// Only for inputs strict validation accepted (ranks, int32 index arrays, every used page
// index in range).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace rpa {

class PagedKvView {
 public:
  // What a dialect's arrays give the view: each dialect makes one from its inputs
  // (core/jax_kv_view.h, core/v3_kv_view.h).
  struct Layout {
    const std::byte* q_data;      // [T, Hq, D] in q_dtype
    const std::byte* kv_data;     // the cache, in kv_dtype
    DType q_dtype;
    DType kv_dtype;
    const int32_t* kv_lens;       // i32[N]
    const int32_t* page_indices;  // i32[N * pages_per_seq]
    const int32_t* cu_q_lens;     // i32[N + 1]
    int64_t num_seqs;
    int64_t pages_per_seq;
    int64_t num_pages;
    int64_t page_size;
    int64_t num_kv_heads;
    int64_t num_q_heads;
    int64_t head_dim;
    int64_t token_stride;  // elements from one token's record to the next
    int64_t head_stride;   // from kv head h's K row to kv head h + 1's
    int64_t v_delta;       // from a head's K row to its V row
  };
  explicit PagedKvView(const Layout& l)
      : q_data_(l.q_data),
        kv_data_(l.kv_data),
        q_dtype_(l.q_dtype),
        kv_dtype_(l.kv_dtype),
        kv_lens_(l.kv_lens),
        page_indices_(l.page_indices),
        cu_q_lens_(l.cu_q_lens),
        num_seqs_(l.num_seqs),
        pages_per_seq_(l.pages_per_seq),
        num_pages_(l.num_pages),
        page_size_(l.page_size),
        num_kv_heads_(l.num_kv_heads),
        num_q_heads_(l.num_q_heads),
        head_dim_(l.head_dim),
        token_stride_(l.token_stride),
        head_stride_(l.head_stride),
        v_delta_(l.v_delta) {}

  // An int32 index array's elements (the builders' precondition: strict validation accepted
  // its dtype).
  static const int32_t* int32_data(const Tensor& t) {
    return reinterpret_cast<const int32_t*>(t.data());
  }

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
