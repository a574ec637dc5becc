#include "oracle/compare.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/python_repr.h"

namespace rpa {
namespace {

bool same_special(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::isinf(a) && a == b;
}

}  // namespace

double detectable_key_weight(double allowed, double want, double value_scale, DType out_dtype) {
  if (!(value_scale > 0.0)) return INFINITY;
  const double half_ulp =
      std::ldexp(std::fabs(want) + 2.0 * allowed, -precision_bits(out_dtype));
  return (allowed + half_ulp) / value_scale;
}

Comparison compare_outputs(const Tensor& got, const Tensor& want, const PagedKvView& view,
                           Tolerance tol) {
  if (tol.element_atol && static_cast<int64_t>(tol.element_atol->size()) != want.numel()) {
    throw std::logic_error("compare_outputs: the tolerance's element_atol does not cover the output");
  }
  Comparison c;
  c.tol = tol;
  double least_key = INFINITY, most_key = -INFINITY;
  const int64_t heads = view.num_q_heads();
  const int64_t d = view.head_dim();
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    for (int64_t r = 0; r < view.q_len(s); ++r) {
      const int64_t row = view.q_start(s) + r;
      // Rows a sequence claims outside q (jax mode accepts non-monotonic cu_q_lens).
      if (row < 0 || row >= got.dim(0)) continue;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = view.q_offset(row, h);
        for (int64_t col = 0; col < d; ++col) {
          const double a = got.float_at(base + col);
          const double b = want.float_at(base + col);
          ++c.compared;
          c.bias.add(a, b, got.dtype());
          const double allowed = tol.allowed(base + col, b);
          if (std::isfinite(b)) {
            c.max_abs_want = std::max(c.max_abs_want, std::fabs(b));
            if (b != 0.0) c.discrimination = std::min(c.discrimination, allowed / std::fabs(b));
            if (tol.value_scale > 0.0) {
              const double w = detectable_key_weight(allowed, b, tol.value_scale, got.dtype());
              least_key = std::min(least_key, w);
              most_key = std::max(most_key, w);
            }
          }
          if (same_special(a, b)) continue;
          const double err = std::fabs(a - b);  // NaN or inf when one side is special
          if (std::isfinite(err)) {
            c.max_abs_err = std::max(c.max_abs_err, err);
            if (b != 0.0) c.max_rel_err = std::max(c.max_rel_err, err / std::fabs(b));
            const double used = allowed > 0.0 ? err / allowed : (err > 0.0 ? INFINITY : 0.0);
            c.max_budget_used = std::max(c.max_budget_used, used);
          }
          // A NaN or infinity that is not the same special value on both sides never agrees
          // (an infinite want would otherwise allow an infinite difference).
          const bool special = !std::isfinite(a) || !std::isfinite(b);
          if (!special && err <= allowed) continue;
          ++c.mismatches;
          if (!c.first) c.first = ElementMismatch{s, r, row, h, col, a, b, allowed};
        }
        c.bias.end_unit();
      }
    }
  }
  if (most_key >= 0.0) {
    c.min_detectable_key_weight = least_key;
    c.key_weight_every_row = most_key;
  }
  return c;
}

std::string describe_mismatch(const Comparison& c) {
  if (!c.first) return "all " + py_int_repr(c.compared) + " elements agree";
  const ElementMismatch& m = *c.first;
  return "sequence " + py_int_repr(m.seq) + ", row " + py_int_repr(m.row_in_seq) + " (q row " +
         py_int_repr(m.row) + "), head " + py_int_repr(m.head) + ", column " + py_int_repr(m.col) +
         ": got " + py_float_repr(m.got) + ", want " + py_float_repr(m.want) +
         ", allowed difference " + py_float_repr(m.allowed) + "; " + py_int_repr(c.mismatches) +
         " of " + py_int_repr(c.compared) + " elements differ";
}

}  // namespace rpa
