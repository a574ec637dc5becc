// Hand-laid inputs for unit tests: sequences get consecutive pages, everything else is
// zero. Validation reads no q or kv data, so the tensors' contents do not matter here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/jax_inputs.h"

namespace rpa::testing {

struct SeqLens {
  int32_t q_len;
  int32_t kv_len;
};

struct InputsSpec {
  std::vector<SeqLens> seqs;
  int64_t num_q_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 8;
  int64_t page_size = 4;
  int64_t pages_per_seq = 4;
  int64_t max_num_seqs = 4;
  int64_t max_num_batched_tokens = 16;
  int64_t total_num_pages = 16;
  DType q_dtype = DType::kFloat32;
  DType kv_dtype = DType::kFloat32;
};

inline Inputs build_inputs(const InputsSpec& s) {
  Inputs in;
  in.q = Tensor(s.q_dtype, {s.max_num_batched_tokens, s.num_q_heads, s.head_dim});
  in.kv_pages =
      Tensor(s.kv_dtype, {s.total_num_pages, s.page_size, 2 * s.num_kv_heads, s.head_dim});
  in.kv_lens = Tensor(DType::kInt32, {s.max_num_seqs});
  in.page_indices = Tensor(DType::kInt32, {s.max_num_seqs, s.pages_per_seq});
  in.cu_q_lens = Tensor(DType::kInt32, {s.max_num_seqs + 1});
  in.num_seqs = Tensor(DType::kInt32, {1});
  in.num_seqs.set_int(0, static_cast<int64_t>(s.seqs.size()));
  int64_t next_page = 0;
  int64_t cu = 0;
  for (size_t i = 0; i < s.seqs.size(); ++i) {
    const auto si = static_cast<int64_t>(i);
    in.kv_lens.set_int(si, s.seqs[i].kv_len);
    cu += s.seqs[i].q_len;
    const int64_t pages = (s.seqs[i].kv_len + s.page_size - 1) / s.page_size;
    for (int64_t j = 0; j < pages; ++j) in.page_indices.set_int(si * s.pages_per_seq + j, next_page++);
    in.cu_q_lens.set_int(si + 1, cu);
  }
  for (int64_t i = static_cast<int64_t>(s.seqs.size()) + 1; i <= s.max_num_seqs; ++i) {
    in.cu_q_lens.set_int(i, cu);
  }
  return in;
}

// One sequence in one page of page_size tokens, head_dim 1: the smallest layout, for cases
// worked out by hand. Heads and dtypes keep InputsSpec's defaults.
inline InputsSpec one_page_spec(SeqLens seq, int64_t page_size) {
  InputsSpec s;
  s.seqs = {seq};
  s.head_dim = 1;
  s.page_size = page_size;
  s.pages_per_seq = 1;
  s.max_num_seqs = 1;
  s.max_num_batched_tokens = seq.q_len;
  s.total_num_pages = 1;
  return s;
}

// A tensor of the same contents viewed under another shape or dtype, for shape and dtype
// mutations: a zero tensor, since validation only reads index arrays.
inline Tensor zeros(DType t, Shape shape) { return Tensor(t, std::move(shape)); }

}  // namespace rpa::testing
