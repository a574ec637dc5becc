// Valid inputs with random data for numeric tests, laid out like JAX's own test: sequences
// packed into q, pages handed out in shuffled order, NaN in every page slot, page_indices
// entry, kv_lens slot and q row that the definition never reads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/jax_inputs.h"
#include "tests/inputs_builder.h"

namespace rpa::testing {

struct RandomInputsSpec {
  std::vector<SeqLens> seqs;
  int64_t num_q_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 16;
  int64_t page_size = 4;
  int64_t extra_pages = 3;     // unused pages in the pool, full of NaN
  int64_t extra_seq_slots = 2;  // padding slots past num_seqs, full of garbage
  int64_t extra_tokens = 5;     // q rows past the last sequence, NaN
  DType q_dtype = DType::kFloat32;
  DType kv_dtype = DType::kFloat32;
  uint64_t seed = 1;
};

inline Inputs random_inputs(const RandomInputsSpec& r) {
  std::mt19937_64 rng(r.seed);
  std::normal_distribution<float> normal;
  int64_t total_q = 0, max_kv = 0, used_pages = 0;
  for (const SeqLens& s : r.seqs) {
    total_q += s.q_len;
    max_kv = std::max<int64_t>(max_kv, s.kv_len);
    used_pages += (s.kv_len + r.page_size - 1) / r.page_size;
  }
  InputsSpec spec;
  spec.num_q_heads = r.num_q_heads;
  spec.num_kv_heads = r.num_kv_heads;
  spec.head_dim = r.head_dim;
  spec.page_size = r.page_size;
  spec.pages_per_seq = std::max<int64_t>(1, (max_kv + r.page_size - 1) / r.page_size) + 1;
  spec.max_num_seqs = static_cast<int64_t>(r.seqs.size()) + r.extra_seq_slots;
  spec.max_num_batched_tokens = total_q + r.extra_tokens;
  spec.total_num_pages = used_pages + r.extra_pages;
  spec.q_dtype = r.q_dtype;
  spec.kv_dtype = r.kv_dtype;
  spec.seqs = r.seqs;
  Inputs in = build_inputs(spec);

  // Shuffle the physical pages: build_inputs handed out 0, 1, 2, ... in order.
  std::vector<int64_t> perm(static_cast<size_t>(spec.total_num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const int64_t pps = spec.pages_per_seq;
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    const int64_t used = (r.seqs[i].kv_len + r.page_size - 1) / r.page_size;
    for (int64_t j = 0; j < pps; ++j) {
      const int64_t at = static_cast<int64_t>(i) * pps + j;
      // Entry 0 of every row is prefetched by the TPU kernel even with kv_len 0, so it must
      // be a real page; entries past the sequence's pages are never read.
      in.page_indices.set_int(at, j < std::max<int64_t>(used, 1)
                                      ? perm[static_cast<size_t>(in.page_indices.int_at(at))]
                                      : -1000 - j);
    }
  }
  for (int64_t i = static_cast<int64_t>(r.seqs.size()); i < spec.max_num_seqs; ++i) {
    in.kv_lens.set_int(i, 1 << 30);  // garbage in padding slots: never read
    for (int64_t j = 0; j < pps; ++j) in.page_indices.set_int(i * pps + j, 1 << 29);
  }

  const int64_t row_elems = r.num_q_heads * r.head_dim;
  for (int64_t i = 0; i < in.q.numel(); ++i) {
    in.q.set_float(i, i < total_q * row_elems ? normal(rng) : NAN);
  }
  for (int64_t i = 0; i < in.kv_pages.numel(); ++i) in.kv_pages.set_float(i, NAN);
  const int64_t token_elems = 2 * r.num_kv_heads * r.head_dim;
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    for (int64_t t = 0; t < r.seqs[i].kv_len; ++t) {
      const int64_t page = in.page_indices.int_at(static_cast<int64_t>(i) * pps + t / r.page_size);
      const int64_t base = (page * r.page_size + t % r.page_size) * token_elems;
      for (int64_t e = 0; e < token_elems; ++e) in.kv_pages.set_float(base + e, normal(rng));
    }
  }
  return in;
}

}  // namespace rpa::testing
