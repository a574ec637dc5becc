// The one comparator: an output against the reference on the rows a call defines
// (DESIGN.md section 6). Unit tests, properties, fuzzers and the CLI all use it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "core/paged_kv_view.h"
#include "core/tensor.h"
#include "oracle/bias.h"
#include "oracle/tolerance.h"

namespace rpa {

struct ElementMismatch {
  int64_t seq;         // sequence index
  int64_t row_in_seq;  // row within the sequence's q_len rows
  int64_t row;         // row of q / o
  int64_t head;        // query head
  int64_t col;         // column within head_dim
  double got;
  double want;
  double allowed;  // Tolerance::allowed: atol (+ the element's own) + rtol * |want|
};

struct Comparison {
  Tolerance tol;
  int64_t compared = 0;    // elements on defined rows
  int64_t mismatches = 0;  // elements outside the tolerance
  double max_abs_err = 0.0;  // over elements where both sides are finite
  double max_rel_err = 0.0;  // |got - want| / |want| over finite, nonzero want
  // The largest |got - want| / Tolerance::allowed over elements where both sides are
  // finite: how much of its tolerance the closest call used (> 1 is a mismatch).
  double max_budget_used = 0.0;
  // The check's power: the least allowed / |want| over the compared elements with a finite,
  // nonzero want (atol / max|want| + rtol where atol is the same everywhere); infinite when
  // there is none. Below 1 an all-zero output is rejected, below 2 the negated output.
  double discrimination = INFINITY;
  // The power in a kernel engineer's terms (detectable_key_weight below, per element):
  // min_detectable_key_weight is the least over the compared elements with a finite want (a
  // dropped key of at least that weight is rejected in the row and column the check watches
  // closest), key_weight_every_row the largest (rejected wherever it is dropped). At 1 or
  // more nothing is guaranteed; infinite without a value scale or compared elements.
  double min_detectable_key_weight = INFINITY;
  double key_weight_every_row = INFINITY;
  double max_abs_want = 0.0;  // over compared elements with a finite want
  bool rejects_zero() const { return discrimination < 1.0; }
  std::optional<ElementMismatch> first;  // the first mismatch in row-major order
  // The signed errors in ulps of got's dtype, per (row, head) unit (oracle/bias.h).
  BiasStats bias;
  bool agree() const { return mismatches == 0; }
};

// The least softmax weight w of a key whose dropping is sure to be rejected at an element
// with this allowance and wanted value, for an output of out_dtype: dropping a key of weight
// w whose value lies M = value_scale (max |V_eff|) from the mean of the row's other keys
// moves the exact output by w M (doubling it, by w M (1 - w) / (1 + w)); rounded to
// out_dtype it still moves by w M - h, h = 2^-prec (|want| + 2 allowed) at most half an ulp
// of the moved value, so it is rejected once w M > allowed + h. Infinite without M.
double detectable_key_weight(double allowed, double want, double value_scale, DType out_dtype);

// got and want have q's shape and float dtype (any of the four). Rows at or past
// cu_q_lens[num_seqs] are not compared. NaN equals NaN and an infinity equals the same
// infinity; anything else must satisfy |got - want| <= tol.allowed(element, want).
Comparison compare_outputs(const Tensor& got, const Tensor& want, const PagedKvView& view,
                           Tolerance tol);

// One line: "sequence 1, row 2 (q row 5), head 3, column 7: got 0.5, want 0.25, allowed
// difference 1e-05; 4 of 96 elements differ".
std::string describe_mismatch(const Comparison& c);

}  // namespace rpa
