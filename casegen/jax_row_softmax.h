// One (row, q head) of a case recomputed in double from its inputs, apart from the dense
// reference: for properties that move a row's logits or drop one of its keys and need the
// exact answer (kernel semantics, before any rounding to q's dtype).
#pragma once

#include <cstdint>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"

namespace rpa::props {

struct RowSoftmax {
  int64_t seq = 0;      // the row's sequence
  int64_t kv_head = 0;  // the kv head its q head reads
  int64_t q_pos = 0;    // its query position
  // Per token t < kv_len: sm_scale * q . K_eff_t (before the soft cap and the mask), the
  // scale |sm_scale| sum_d |q_d K_eff_td|, and V_eff_tc of the column asked for.
  std::vector<double> logit;
  std::vector<double> scale;
  std::vector<double> value;
};

// Precondition: strict validation accepts (in, p) and row is a defined row.
RowSoftmax row_softmax(const Inputs& in, const Params& p, int64_t row, int64_t head, int64_t col);

// The row's softmax weights with logit t moved by shift[t] before the soft cap (empty: not
// moved), the soft cap and the added mask applied as the definition does.
std::vector<double> row_weights(const RowSoftmax& r, const Params& p,
                                const std::vector<double>& shift = {});

// sum_t weights[t] * r.value[t].
double row_output(const RowSoftmax& r, const std::vector<double>& weights);

}  // namespace rpa::props
