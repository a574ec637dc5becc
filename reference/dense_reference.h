// The dense reference: ragged paged attention as DESIGN.md section 2 defines it, written
// for clarity. Double precision wherever the definition allows "float32 or better",
// rounding exactly at its dtype casts; it follows JAX's ref_ragged_paged_attention step
// for step.
#pragma once

#include <cstdint>

#include "kernel/inputs.h"
#include "kernel/params.h"
#include "kernel/tensor.h"

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
};

// Precondition: strict validation accepted (in, params). It does not validate: the oracle
// does that first. It reads nothing past kv_len: no page slot, no page_indices entry.
ReferenceResult dense_reference(const Inputs& in, const Params& params);

}  // namespace rpa
