// How far a tpu-inference v3 program's output row may lie from the exact one (the kernel
// semantics, reference/v3_reference.h), bounded from the row's own data as the program
// accumulates it (issue 32; the derivation, term by term, in docs/oracle.md, "The v3
// programs' accumulation bound"). kernel.py and kernel_hd64.py walk a row's keys in position
// order, in compute blocks: fetch blocks of `fetch` tokens from position 0, each cut into
// compute blocks of `compute` tokens from its start. Per compute block they
//   - compute the float32 logits s_t (dot, scale, soft cap), masked slots mask_value;
//   - m_new = max(m, round_A(block max)), alpha = round_A(exp(round_A(m - m_new)));
//   - p_t = exp(s_t - m_new) in float32 (never rounded);
//   - l = round_A(round_A(alpha l) + rowsum), rowsum = jnp.sum(round_A(p), dtype=A) in XLA's
//     order (schedule/xla_row_sum.h: windows of 32 in order, then the window sums);
//   - acc = round_A(round_A(alpha acc) + round_A(p.V v_scale)), p.V a float32 dot;
// then out = acc / l. A is the accumulation dtype: kernel.py's out_dtype (bfloat16 for
// bfloat16 queries), float32 in hd64 (whose m starts at the sink's logit, l at 1).
//
// The bound follows the exact partial sums in that order (in units of the row's exact
// denominator, so L = 1 and A_c = o_c), adding at each rounding point u_A times the value
// rounded, a rigorous bound that sees the actual magnitudes (a worst case over every order is
// what made the former bound vacuous for bfloat16):
//   dL   = rowsum's error (each round_A(p) and each addition of XLA's tree) + the rounding of
//          alpha l (none where alpha is surely 1: m cannot have moved) + the addition;
//   dA_c = p.V's float32 error in any order (u32 (X_b + (k - 1) max(P_b, N_b) + |pv_b|): each
//          product, k - 1 additions of partial sums, none beyond the block's positive part
//          P_b or negative part N_b, and v_scale; k the block's unmasked keys, X_b = P_b +
//          N_b) + round_A(p.V) + the rounding of alpha acc + the addition;
//   W_c  = the errors that scale a part of the weights of l and acc alike, which move o by
//          that part's share times its distance from o:
//          per key, e_t |v_t - o_c| p_t with e_t = expm1(a_t + kExp + u32 |s_t - m|) (a_t: the
//          logit's float32 error, v3_logit_error; exp's; the float32 subtraction);
//          per rescale, d_b |A_(<b),c - o_c L_(<b)| with d_b = expm1(u_A |m - m_new|) + kExp +
//          u_A (m - m_new rounded to A; exp; alpha rounded to A): the keys before block b
//          against the rest. Where A is bfloat16 and the row max moves by 64, m - m_new
//          rounds by 0.25: every earlier key's weight moves by e^0.25 (issue 32's second
//          defect, a row whose answer is made of keys 64 logits below its max).
// and |o_program - o| <= (dA_c + |o_c| dL + W_c) / (1 - dL - e_max - sum_b d_b), infinite
// where that denominator is not positive. The output's own roundings (acc / l to A, then q's
// dtype) are the caller's (oracle/v3_compare.cc).
//
// Assumed, as the kernel-semantics tolerance always has: a mask_value that dominates (a
// masked slot's p is 0), and that a TPU's jnp.sum reduces no worse than XLA's windows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace rpa {

// Multipliers on each term of the bound, 1 in use: the tests that show each term is needed
// shrink one (a correct program is then rejected) or inflate all (a wrong one accepted).
struct V3BoundTerms {
  double logit = 1.0;      // a_t in e_t
  double exp = 1.0;        // kExp and the float32 subtraction in e_t and d_b
  double rescale = 1.0;    // d_b
  double row_sum = 1.0;    // round_A(p) and XLA's tree
  double l_round = 1.0;    // alpha l and the addition to l
  double acc_round = 1.0;  // round_A(p.V), alpha acc and the addition to acc
  double pv_dot = 1.0;     // p.V's float32 dot
};

// One query row and head as the reference computed it, in position order t < kv_len.
struct V3AccumulationRow {
  const std::vector<double>* logit;        // exact logits (after scale and soft cap)
  const std::vector<bool>* masked;         // causal / window: the program gives mask_value
  const std::vector<double>* weight;       // exact softmax weights (with the sink, sum 1)
  const std::vector<double>* logit_error;  // a_t (v3_logit_error), 0 where masked
  const double* v;                         // V[t * head_dim + c], unscaled
  int64_t head_dim = 0;
  double v_scale = 1.0;
  double sink_logit = 0.0;   // hd64's attention sink; -inf without one
  double sink_weight = 0.0;  // its exact weight
  const double* out;         // o_c = sum_t weight_t V_tc v_scale, exact
};

// The program's KV blocking for a row's pass.
struct V3Blocking {
  int64_t fetch = 0;    // bkv_sz (hd64: num_kv_pages_per_block * page_size)
  int64_t compute = 0;  // bkv_csz (hd64: the same)
};

// Raises bound[c] (head_dim entries) to the bound above for blocking b and accumulation
// dtype acc, if larger.
void v3_accumulation_bound(const V3AccumulationRow& row, V3Blocking b, DType acc,
                           const V3BoundTerms& terms, double* bound);

// XLA's windowed row sum (schedule/xla_row_sum.h) of x >= 0 whose elements are each off by at
// most e[j], every partial sum rounded to a dtype of unit roundoff u: a bound on the sum's
// error. n >= x.size(): the row's length, x followed by n - x.size() exact zeros (a KV
// compute block longer than the keys it holds; its window structure is n's, and nothing past
// x is stored); -1: x.size(). Exposed for its test against xla_row_sum itself.
double xla_row_sum_error(std::vector<double> x, std::vector<double> e, double u, int64_t n = -1);

}  // namespace rpa
