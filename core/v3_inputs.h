// The arrays of one tpu-inference v3 call (DESIGN.md section 16; v3-contract.md section 1),
// named as the kernel's arguments. Nothing here is validated: any rank, shape or dtype may
// appear (validation reports it). The comments give what a valid call has.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace rpa {

struct V3Inputs {
  Tensor queries;  // [T = max_num_tokens, Hq, D], float32 | bfloat16
  Tensor keys;     // [T, Hkv, D], the KV dtype: the new tokens' keys
  Tensor values;   // [T, Hkv, D], the KV dtype: the new tokens' values
  // The packed cache exactly as the kernel holds it (core/v3_cache_layout.h), logical dtype
  // the KV dtype. kernel.py: [pages, page_size, align(2 Hkv, P) / P, P, align(D, 128)],
  // K0, V0, K1, V1, ... interleaved; hd64: [pages, page_size, align(Hkv, P) / P, P, 128],
  // [K_h | V_h] along the last dimension. P = 32 / bits of the KV dtype.
  Tensor kv_cache;
  Tensor kv_lens;       // i32[N = max_num_seqs]: total length including the new tokens
  Tensor page_indices;  // i32[N * pages_per_seq], flat: sequence i's pages from i * pps
  Tensor cu_q_lens;     // i32[N + 1]
  Tensor distribution;  // i32[3] = (i, j, k): [0, i) decode, [i, j) prefill, [j, k) mixed
  std::optional<Tensor> attention_sink;  // hd64 only: f32[Hq], one sink logit per q head

  bool operator==(const V3Inputs&) const = default;
};

}  // namespace rpa
