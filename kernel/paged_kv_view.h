// The page table of one call as a small read-only view: derived quantities as methods,
// the layout turned into strides once. Only for inputs strict validation accepted (ranks,
// int32 index arrays, every used page index in range).
#pragma once

#include <cstdint>

#include "kernel/inputs.h"

namespace rpa {

class PagedKvView {
 public:
  explicit PagedKvView(const Inputs& in)
      : kv_lens_(int32_data(in.kv_lens)),
        page_indices_(int32_data(in.page_indices)),
        cu_q_lens_(int32_data(in.cu_q_lens)),
        num_seqs_(static_cast<int64_t>(int32_data(in.num_seqs)[0])),
        pages_per_seq_(in.page_indices.dim(1)),
        page_size_(in.kv_pages.dim(1)),
        num_combined_kv_heads_(in.kv_pages.dim(2)),
        num_q_heads_(in.q.dim(1)),
        head_dim_(in.q.dim(2)) {}

  int64_t num_seqs() const { return num_seqs_; }            // num_seqs[0]
  int64_t pages_per_seq() const { return pages_per_seq_; }  // page_indices.shape[1]
  int64_t page_size() const { return page_size_; }          // S
  int64_t num_kv_heads() const { return num_combined_kv_heads_ / 2; }
  int64_t num_q_heads() const { return num_q_heads_; }
  int64_t head_dim() const { return head_dim_; }
  // Query heads per kv head: query head h reads kv head h / q_heads_per_kv().
  int64_t q_heads_per_kv() const { return num_q_heads_ / num_kv_heads(); }

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

  // Element offsets into kv_pages [P, S, 2*Hkv, D] of token t of sequence s, kv head h.
  int64_t k_offset(int64_t s, int64_t t, int64_t h) const { return token_offset(s, t) + 2 * h * head_dim_; }
  int64_t v_offset(int64_t s, int64_t t, int64_t h) const { return k_offset(s, t, h) + head_dim_; }
  // Element offset into q / o [T, Hq, D] of row r, query head h.
  int64_t q_offset(int64_t row, int64_t h) const { return (row * num_q_heads_ + h) * head_dim_; }

 private:
  static const int32_t* int32_data(const Tensor& t) {
    return reinterpret_cast<const int32_t*>(t.data());
  }
  int64_t token_offset(int64_t s, int64_t t) const {
    return (page_of(s, t) * page_size_ + slot_of(t)) * num_combined_kv_heads_ * head_dim_;
  }

  const int32_t* kv_lens_;       // i32[N]
  const int32_t* page_indices_;  // i32[N, pages_per_seq]
  const int32_t* cu_q_lens_;     // i32[N + 1], cu_q_lens[0] == 0, non-decreasing to num_seqs
  int64_t num_seqs_;
  int64_t pages_per_seq_;
  int64_t page_size_;
  int64_t num_combined_kv_heads_;
  int64_t num_q_heads_;
  int64_t head_dim_;
};

}  // namespace rpa
