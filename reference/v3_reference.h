// The dense reference of tpu-inference's v3 dialects (DESIGN.md section 16; v3-contract.md
// section 3): the fused KV-cache update, then ragged paged attention over the packed cache,
// read in place (core/v3_cache_layout.h), in two semantics (reference/semantics.h):
// - kReference: ref_ragged_paged_attention / ref_ragged_paged_attention_hd64 step for step,
//   rounding where they round (kernel.py: scores to out_dtype before each scaling multiply,
//   soft cap and jax.nn.softmax in out_dtype, whose sum runs in float32; both: p to the KV
//   dtype, p.V in the KV dtype (for float8 through float16, as XLA's CPU dot rounds it), cast
//   to out_dtype, times v_scale in out_dtype). What they compute in float32 is computed here
//   in double.
// - kKernel: what the v3 kernels compute in exact arithmetic: q's own quantization
//   (q_scale), then logits, mask, softmax and p.V in double, one rounding to the output.
//   The kernel's narrow accumulators are the tolerance's business (oracle/v3_compare.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dialect.h"
#include "core/tensor.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "reference/semantics.h"
#include "reference/v3_accumulation_bound.h"

namespace rpa {

struct V3ReferenceResult {
  // [T, Hq, D] in the queries' dtype; rows >= cu_q_lens[distribution[2]] are 0.
  Tensor out;
  // The input cache with the fused update applied (update_kv_cache; hd64 always): for each
  // sequence i < distribution[2], token kv_len - q_len + r gets row cu_q_lens[i] + r of
  // keys/values, the whole token record written as merge_kv builds it (lanes past head_dim
  // and padded heads 0). Same shape and dtype as the input cache; nothing else changes.
  Tensor kv_cache;
  Semantics semantics = Semantics::kKernel;
  DType out_dtype = DType::kFloat32;  // the dtype the kernel accumulates in (l, m, acc)

  // What the comparison's tolerance needs (oracle/v3_compare.h derives it). Per output
  // element e = (row, head, column c), in q's layout (0 on rows no sequence defines), with
  // p_t the weights this semantics multiplies V by, v_t = V_tc * v_scale and o_c the
  // unrounded output:
  //   abs_weighted[e]    = sum_t p_t |v_t|,
  //   logit_spread[e]    = kernel semantics: sum_t p_t (a_t + a_bar) |v_t - o_c|, a_t the
  //                        bound v3_logit_error on how far a correct implementation's logit t
  //                        may be from this one's, a_bar = sum_u p_u a_u; reference: 0;
  //   reference_bound[e] = reference semantics: how far tpu-inference's ref run by XLA may
  //                        be from this output, followed through the ref's rounding points
  //                        (derivation in oracle/v3_compare.h); kernel semantics: 0.
  // Per (row, head), at row * Hq + head:
  //   row_max_v[i]   = max_t |v_t| over the row's keys (finite values),
  //   row_kv_len[i]  = the row's sequence's kv_len, row_seq[i] = the sequence (-1: none).
  std::vector<double> abs_weighted;
  std::vector<double> logit_spread;
  std::vector<double> reference_bound;
  //   program_bound[e]   = kernel semantics: how far the v3 program's output (before its
  //                        final roundings) may lie from the exact one, accumulated as the
  //                        program accumulates (reference/v3_accumulation_bound.h), the
  //                        largest over the blockings the call may run with
  //                        (V3ReferenceOptions); empty where the call names none (hd64
  //                        without num_kv_pages_per_block) and in the reference semantics.
  std::vector<double> program_bound;
  std::vector<double> row_max_v;
  //   row_past_float32[i] = 1 where a float32 kernel may leave float32's range on the row (both
  //                  semantics): for an unmasked key, sum_c |q_c K_tc| times the largest
  //                  product of the logit's scales in the programs' orders (sm_scale, then
  //                  k_scale, then q_scale; kernel.py folds them into one float32 scale) past
  //                  float32's largest value (with the dot's rounding), the folded scale itself
  //                  past it, or p.V's accumulator, (kv_len + 1) max |V| times max(1,
  //                  |v_scale|), past it. The exact definition is finite there while a float32
  //                  program computes inf - inf; the comparison leaves such rows out and counts
  //                  them (V3Comparison::past_float32; finding 28's second half).
  std::vector<unsigned char> row_past_float32;
  std::vector<int64_t> row_kv_len;
  std::vector<int64_t> row_seq;
  double max_abs_v = 0.0;  // max of row_max_v
  int64_t max_kv_len = 0;
};

struct V3ReferenceOptions {
  // The TPU generation whose default block sizes a kernel.py pass without its own tuple runs
  // with (v3_block_sizes); -1: each of generations 5, 6 and 7 (the bound is the largest).
  int tpu_version = -1;
  V3BoundTerms terms;  // the program bound's terms (tests shrink or inflate them)
};

// Precondition: strict validation accepted (d, in, p): q float32 | bfloat16, KV float32 |
// bfloat16 | float8, consistent shapes, 0 <= i <= j <= k <= N, 0 < q_len <= kv_len for the
// sequences < k, used page indices in range, finite parameters. Reads nothing past kv_len:
// no page slot, no page_indices entry past cdiv(kv_len, page_size).
// One deliberate difference between the semantics (kernel.py): the reference applies the
// sliding window only with use_causal_mask, the kernel always (its mask is
// `q_span < k_span + sliding_window` outside the causal branch).
V3ReferenceResult v3_reference(Dialect d, const V3Inputs& in, const V3Params& p,
                               Semantics s = Semantics::kKernel,
                               const V3ReferenceOptions& o = {});

// The bound a_t that logit_spread uses for one logit, in each semantics, exposed for the
// tolerance's documentation and tests: dot_abs = |scale| sum_d |q_d K_d| (scale = sm_scale *
// k_scale * q_scale), score = the logit after scaling and soft cap, shifted = score - row max,
// head_dim the dot's length. Kernel: (head_dim + 3) 2^-24 dot_abs + [cap] 3 2^-24 |cap|
// (float32 dot in any order, the scaling, tanh). Reference: the same float32 part, plus per
// out_dtype rounding of the score (the cast of the dot, each scaling multiply, the soft
// cap's three steps) one ulp, 2^(1-prec) |score|, plus the rounding of score - max, one ulp
// of |shifted| (for float32 out_dtype these are float32 ulps).
double v3_logit_error(Dialect d, const V3Params& p, DType out_dtype, Semantics s, double dot_abs,
                      double score, double shifted, int64_t head_dim);

}  // namespace rpa
