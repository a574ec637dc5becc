// The dense reference: ragged paged attention as DESIGN.md section 2 defines it, written
// for clarity. Double precision wherever the definition allows "float32 or better",
// rounding exactly at the dtype casts of the chosen semantics (reference/semantics.h): JAX's
// ref_ragged_paged_attention step for step, or what its Pallas kernel computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/tensor.h"
#include "reference/semantics.h"

namespace rpa {

struct ReferenceResult {
  // [T, Hq, D] in q's dtype. Rows at or past cu_q_lens[num_seqs] belong to no sequence and
  // are left 0. A sequence with q_len 0 contributes no rows, whatever its kv_len.
  Tensor out;
  // Largest finite |V_eff| over the tokens the sequences read (0 if none): the scale of
  // every output, from which the comparator derives its tolerance.
  double max_abs_v_eff = 0.0;
  // Largest kv_len among the sequences with q_len > 0 (0 if none).
  int64_t max_kv_len = 0;
  // Largest |sm_scale| * sum_d |q_d K_eff_d| over the logits computed (0 if none): how
  // large float32 rounding in a logit's dot product can be, for the tolerance.
  double max_logit_abs_sum = 0.0;

  // Kernel semantics only (empty otherwise): how much each output can move when its row's
  // logits move, for the tolerance (oracle/jax_tolerance.cc derives the bound from them). With
  // B_t = |sm_scale| sum_d |q_d K_eff_td| + |soft_cap| the scale of logit t of a row and
  // B_max the largest B_t with p_t > 0 in that row. Under a soft cap s = cap tanh(x / cap)
  // moves by at most 2 |cap| however far x moves, and by at most sech^2((|x| - dx) / cap) dx
  // when x moves by dx < |x| (the slope of tanh at the end nearer 0; 1 - tanh y <= sech^2 y
  // bounds the rest): so the first term stops at kCappedLogitScale * |soft_cap|
  // (where kLeastLogitError times it is 2 |cap|) and is multiplied by
  // sech^2(max(0, |x| - most_logit_error * term) / cap), x the logit before the cap.
  // spread[e] = sum_t p_t (B_t + B_max) |V_eff_tc - o_c| for output element e = (row, head,
  // column c), in q's layout (0 on rows no sequence defines), and row_logit_max[row * Hq +
  // head] = B_max. A row whose weights sit on one token, or whose values agree, has spread 0:
  // no logit error can move it.
  std::vector<double> spread;
  std::vector<double> row_logit_max;

  // Both semantics: what the float32 accumulation term of the tolerance needs (item F of
  // oracle/jax_tolerance.cc derives the bound from them), with p_t the weights this semantics
  // multiplies V_eff by (rounded to V_eff's dtype in the reference semantics) and o the
  // unrounded output. Per output element e = (row, head, column c), in q's layout (0 on rows
  // no sequence defines):
  //   abs_weighted[e] = sum_t p_t |V_eff_tc|,
  //   deviation[e]    = sum_t p_t |V_eff_tc - o_c|,
  //   column_max[e]   = max_t |V_eff_tc| over the row's sequence and kv head (finite values);
  // per (row, head), at row * Hq + head:
  //   row_terms[i]  = n, the number of tokens with p_t > 0,
  //   row_chain[i]  = sum_k p_(k) a_k, the weights sorted in decreasing order and a_k the
  //                   depth of the k-th leaf of the deepest summation tree (a chain):
  //                   a_1 = n - 1, a_k = n + 1 - k for k >= 2 (the most any float32 sum of the
  //                   n terms can round a term, largest first),
  //   row_blocks[i] = ceil(kv_len / page_size), the most page blocks (or chunks of them) an
  //                   online softmax can merge with a rescale.
  std::vector<double> abs_weighted;
  std::vector<double> deviation;
  std::vector<double> column_max;
  std::vector<double> row_terms;
  std::vector<double> row_chain;
  std::vector<double> row_blocks;
  // Sizes the six vectors above to `elements` (q.numel()) and `rows` (T * Hq), all 0.
  void zero_sums(size_t elements, size_t rows) {
    for (auto* v : {&abs_weighted, &deviation, &column_max}) v->assign(elements, 0.0);
    for (auto* v : {&row_terms, &row_chain, &row_blocks}) v->assign(rows, 0.0);
  }
  Semantics semantics = Semantics::kKernel;  // the rounding points `out` follows
  // The largest relative logit error (per unit of B_t) the soft cap's slope in `spread`
  // allows for: a tolerance may assume any e_qk between kLeastLogitError and this.
  double most_logit_error = kMostLogitError;
};

// Precondition: strict validation accepted (in, params). It does not validate: the oracle
// does that first. It reads nothing past kv_len: no page slot, no page_indices entry.
// The kernel semantics is the default: the oracle judges kernels.
// most_logit_error (>= kLeastLogitError) is the largest logit error per unit of B_t the
// spread's soft-cap slope allows for (a TPU's float32 dots in fewer bfloat16 passes need more
// than the default: oracle/dot_precision.h).
ReferenceResult dense_reference(const Inputs& in, const Params& params,
                                Semantics semantics = Semantics::kKernel,
                                double most_logit_error = kMostLogitError);

// Both semantics at once, in one pass (they share everything up to the softmax weights):
// {kernel, reference}, each as dense_reference gives it.
std::pair<ReferenceResult, ReferenceResult> dense_reference_both(const Inputs& in, const Params& params,
                                                                 double most_logit_error = kMostLogitError);

}  // namespace rpa
