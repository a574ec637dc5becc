// The arrays of one ragged paged attention call (DESIGN.md section 2).
#pragma once

#include "core/tensor.h"

namespace rpa {

// Arrays as a case file or a caller hands them over: nothing here is validated, so any
// rank, shape or dtype may appear (validation reports it). The comments give the shapes
// and dtypes a valid call has.
struct Inputs {
  Tensor q;             // [T = max_num_batched_tokens, Hq, D], float32 | bfloat16
  Tensor kv_pages;      // [P, S = page_size, 2*Hkv, D]; head 2h is K, 2h+1 is V of kv head h
  Tensor kv_lens;       // i32[N = max_num_seqs]
  Tensor page_indices;  // i32[N, pages_per_seq]
  Tensor cu_q_lens;     // i32[N + 1]
  Tensor num_seqs;      // i32[1]

  bool operator==(const Inputs&) const = default;
};

}  // namespace rpa
