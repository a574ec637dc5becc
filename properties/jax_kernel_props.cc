// Properties of the tiled kernel against the dense reference (DESIGN.md section 9): its
// default schedule agrees within the tolerance on every generated valid case (valid by the
// definition: strict mode may still reject one where the Pallas kernel departs from it,
// stale_kv_block and rows_not_computed, which the default schedule does not), it is
// deterministic, and the tolerance itself is honest.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "properties/jax_kernel_check.h"
#include "casegen/jax_materialize.h"
#include "properties/jax_rc_case.h"
#include "properties/sanitized.h"
#include "casegen/jax_row_softmax.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa::props {
namespace {

// Moves element e one unit in the last place of its dtype away from zero (float32 or
// bfloat16: the bit pattern's magnitude goes up by one).
inline void step_one_ulp(Tensor& t, int64_t e) {
  const int size = dtype_size(t.dtype());
  std::byte* p = t.data() + e * size;
  if (size == 4) {
    uint32_t bits;
    std::memcpy(&bits, p, 4);
    ++bits;
    std::memcpy(p, &bits, 4);
  } else {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    ++bits;
    std::memcpy(p, &bits, 2);
  }
}

// In both semantics: the kernel semantics (what the Pallas kernel computes, the oracle's
// default) under its tight tolerance, and JAX's reference semantics under the looser one its
// rounding of p needs.
RC_GTEST_PROP(TiledKernel, MatchesReference, ()) {
  const CaseSpec spec = *gen_valid_case();
  const int threads = *rc::gen::inRange(1, 3).as("threads");
  const Materialized m = materialize(spec);
  const Tensor got = tiled_attention(m.inputs, m.params, {.threads = threads});
  assert_agrees(m.inputs, m.params, got, dense_reference(m.inputs, m.params, Semantics::kKernel));
  assert_agrees(m.inputs, m.params, got,
                dense_reference(m.inputs, m.params, Semantics::kReference));
  RC_TAG(batch_mix(spec), dtype_name(spec.kv_dtype));
  RC_CLASSIFY(spec.params.sliding_window.has_value(), "window");
  RC_CLASSIFY(spec.params.soft_cap.has_value(), "soft_cap");
  RC_CLASSIFY(spec.params.num_kv_pages_per_block.has_value(), "blocks given");
  RC_CLASSIFY(spec.q_per_kv > 1, "GQA");
}

// Same spec, same bytes; same inputs, same output bits, whatever the thread count.
RC_GTEST_PROP(TiledKernel, IsDeterministic, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  RC_ASSERT(materialize(spec).inputs == m.inputs);
  const Tensor one = tiled_attention(m.inputs, m.params, {.threads = 1});
  RC_ASSERT(tiled_attention(m.inputs, m.params, {.threads = 1}) == one);
  RC_ASSERT(tiled_attention(m.inputs, m.params, {.threads = 2}) == one);
  RC_ASSERT(tiled_attention(m.inputs, m.params, {.threads = 3}) == one);
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  RC_ASSERT(dense_reference(m.inputs, m.params).out == ref.out);
}

// The element-wise budget accepts the smallest change an output can show (one unit in the
// last place of q's dtype) and reports a change of ten budgets at the element changed.
RC_GTEST_PROP(Tolerance, IsHonest, ()) {
  BuildOptions rows;
  rows.query_rows = true;
  const CaseSpec spec = *gen_valid_case(rows);
  const Materialized m = materialize(spec);
  const PagedKvView view = kv_view(m.inputs);
  const int64_t row_elems = spec.num_q_heads() * spec.head_dim;
  const int64_t defined = view.total_q_tokens() * row_elems;
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  const Tolerance tol = tolerance_for_case(m.inputs, m.params, ref);
  const int64_t e = *rc::gen::inRange<int64_t>(0, defined).as("element");
  const double want = ref.out.float_at(e);
  RC_ASSERT(std::isfinite(want));  // finite data and parameters: a finite answer

  Tensor ulp = ref.out;
  step_one_ulp(ulp, e);
  const Comparison near = compare_outputs(ulp, ref.out, view, tol);
  RC_LOG() << "one ulp: " << describe_mismatch(near) << "\n";
  RC_ASSERT(near.agree());

  Tensor far = ref.out;
  const double allowed = tol.allowed(e, want);
  far.set_float(e, want + 10.0 * allowed);
  const Comparison c = compare_outputs(far, ref.out, view, tol);
  RC_LOG() << "ten budgets: " << describe_mismatch(c) << "\n";
  RC_ASSERT(c.mismatches == 1);
  RC_ASSERT(c.first.has_value());
  RC_ASSERT(c.first->row == e / row_elems);
  RC_ASSERT(c.first->head == e % row_elems / spec.head_dim);
  RC_ASSERT(c.first->col == e % spec.head_dim);
}

// Item K3 of kernel_tolerance, checked apart from its derivation: move every logit of one
// (row, head) by its full allowance, e_qk * |sm_scale| sum_d |q_d k_td| before the soft cap,
// each up or down by the sign of (v_tc - o_c) (the direction that moves column c most; and
// once against it), recompute that softmax in double, and column c moves by no more than
// the element's logit term (kernel_logit_terms, cut to 2M as in the tolerance).
RC_GTEST_PROP(Tolerance, LogitTermCoversLogitErrors, ()) {
  BuildOptions rows;
  rows.query_rows = true;
  const CaseSpec spec = *gen_valid_case(rows);
  const Materialized m = materialize(spec);
  const Inputs& in = m.inputs;
  const Params& p = m.params;
  const PagedKvView view = kv_view(in);
  const ReferenceResult ref = dense_reference(in, p, Semantics::kKernel);
  const int64_t d = view.head_dim(), hq = view.num_q_heads();
  const int64_t e = *rc::gen::inRange<int64_t>(0, view.total_q_tokens() * hq * d).as("element");
  const RowSoftmax row = row_softmax(in, p, e / (hq * d), e / d % hq, e % d);
  const std::vector<double>& v = row.value;
  const double e_qk = kernel_logit_error(in, p);
  // o_c of the row with every logit moved by step[t] (in units of its allowance).
  auto output = [&](const std::vector<double>& step) {
    std::vector<double> shift(step.size());
    for (size_t t = 0; t < step.size(); ++t) shift[t] = step[t] * e_qk * row.scale[t];
    return row_output(row, row_weights(row, p, shift));
  };
  const double o = output(std::vector<double>(v.size(), 0.0));
  RC_PRE(std::isfinite(o));
  std::vector<double> toward(v.size()), against(v.size());
  for (size_t t = 0; t < v.size(); ++t) {
    toward[t] = v[t] > o ? 1.0 : v[t] < o ? -1.0 : 0.0;
    against[t] = -toward[t];
  }
  // The logit term alone (the element's allowance also holds item F's float32 term).
  const double allowed = std::min(kernel_logit_terms(in, p, ref)[static_cast<size_t>(e)],
                                  2.0 * ref.max_abs_v_eff);
  const double moved = std::max(std::fabs(output(toward) - o), std::fabs(output(against) - o));
  RC_LOG() << "column moved " << moved << ", logit allowance " << allowed << "\n";
  RC_CLASSIFY(moved > 0.0, "moves");
  RC_CLASSIFY(p.soft_cap.has_value(), "soft cap");
  // (Plus the double arithmetic's own rounding of this recomputation.)
  double max_v = 0.0;
  for (double y : v) max_v = std::max(max_v, std::fabs(y));
  RC_ASSERT(moved <= allowed * (1 + 1e-9) + 64 * DBL_EPSILON * max_v);
}

// The check can fail: wherever the answer is not ~0 (max |want| > 2^-10 max |V_eff|) and
// float32 logits determine it (at some element the logit errors' term, item K3, is below
// half of |want|), the kernel semantics' comparison rejects an all-zero output and the
// negated output, and says so through its discrimination (< 1 and < 2). Over the default
// generator (every dtype pair, kv_len to its bounds) and the long-context one (kv_len to
// 8192, float8 KV), where the reference semantics' float8 term passed any output. Where the
// logits do not determine it, no check can tell the answer from 0: found at 11250 cases, a
// row of 8192 keys (bfloat16 q of large data, e4m3fn K of up to 448, sm_scale 10, cap 50)
// whose logits a correct float32 kernel gets within e_qk B_max = 0.09 of exact, while its
// outputs of ~2.4 are differences of weighted values of ~18: those errors can move them by
// 1.75, so 0 was (rightly) within the tolerance.
void assert_can_fail(const CaseSpec& spec) {
  const Materialized m = materialize(spec);
  const PagedKvView view = kv_view(m.inputs);
  const ReferenceResult ref = dense_reference(m.inputs, m.params, Semantics::kKernel);
  const Tolerance tol = tolerance_for_case(m.inputs, m.params, ref);
  const Comparison self = compare_outputs(ref.out, ref.out, view, tol);
  const bool near_zero = !(self.max_abs_want > std::ldexp(ref.max_abs_v_eff, -10));
  RC_CLASSIFY(near_zero, "answer ~0");
  const std::vector<double> logit_terms = kernel_logit_terms(m.inputs, m.params, ref);
  bool undetermined = true;
  for (int64_t e = 0; e < ref.out.numel() && undetermined; ++e) {
    undetermined = !(logit_terms[static_cast<size_t>(e)] < 0.5 * std::fabs(ref.out.float_at(e)));
  }
  undetermined = undetermined && !near_zero;
  RC_CLASSIFY(undetermined, "float32 logits do not determine it");
  RC_TAG(dtype_name(spec.q_dtype), dtype_name(spec.kv_dtype));
  RC_CLASSIFY(spec.max_kv_len() > 1024, "kv_len > 1024");
  if (near_zero || undetermined) return;
  RC_LOG() << "max|want| " << self.max_abs_want << ", M " << ref.max_abs_v_eff << ", atol "
           << tol.atol << ", rtol " << tol.rtol << ", largest element term "
           << tol.max_element_atol() << ", discrimination " << self.discrimination << "\n";
  RC_ASSERT(self.agree());
  RC_ASSERT(self.rejects_zero());
  Tensor zero(m.inputs.q.dtype(), m.inputs.q.shape());
  RC_ASSERT(!compare_outputs(zero, ref.out, view, tol).agree());
  Tensor negated = ref.out;
  for (int64_t e = 0; e < negated.numel(); ++e) negated.set_float(e, -ref.out.float_at(e));
  RC_ASSERT(!compare_outputs(negated, ref.out, view, tol).agree());
}

RC_GTEST_PROP(Tolerance, CanFail, ()) { assert_can_fail(*gen_valid_case()); }

RC_GTEST_PROP(Tolerance, CanFailAtLongContext, ()) {
  assert_can_fail(*gen_valid_case(sanitized_long(long_context_options())));
}

// The power each check states (Comparison::min_detectable_key_weight), by dropping a key.
// In the row of the element the check watches closest, the heaviest key t (weight p_t) gets,
// in that element's column, the value -sign(o_rest) M (M = max |V_eff|, so M stays the
// scale, and the value lies at least M from o_rest, the mean of the row's other keys). The
// case is recomputed; where p_t reaches the element's detectable weight
// (detectable_key_weight), the exact output of the row without key t, rounded to q's dtype,
// must be rejected at that element. Fails on a comparison looser than the figure it reports.
RC_GTEST_PROP(Tolerance, DetectsADroppedKey, ()) {
  BuildOptions rows;
  rows.query_rows = true;
  const CaseSpec spec = *gen_valid_case(rows);
  Materialized m = materialize(spec);
  Inputs& in = m.inputs;
  const Params& p = m.params;
  const PagedKvView view = kv_view(in);
  const ReferenceResult before = dense_reference(in, p, Semantics::kKernel);
  const Comparison self = compare_outputs(before.out, before.out, view, tolerance_for_case(in, p, before));
  RC_PRE(self.min_detectable_key_weight < 1.0);
  // The element the check watches closest.
  const int64_t d = view.head_dim(), hq = view.num_q_heads();
  int64_t e = -1;
  for (int64_t x = 0; x < view.total_q_tokens() * hq * d && e < 0; ++x) {
    const double want = before.out.float_at(x);
    if (std::isfinite(want) &&
        detectable_key_weight(self.tol.allowed(x, want), want, self.tol.value_scale,
                              in.q.dtype()) == self.min_detectable_key_weight) {
      e = x;
    }
  }
  RC_ASSERT(e >= 0);
  const int64_t row = e / (hq * d), head = e / d % hq, col = e % d;
  RowSoftmax r = row_softmax(in, p, row, head, col);
  const std::vector<double> w = row_weights(r, p);
  size_t t = 0;
  for (size_t u = 1; u < w.size(); ++u) t = w[u] > w[t] ? u : t;
  RC_PRE(w[t] < 1.0);
  // Plant the value: the stored V element that is M (or its negation) at token t, column col.
  const double m_scale = before.max_abs_v_eff;
  const double rest = (row_output(r, w) - w[t] * r.value[t]) / (1.0 - w[t]);
  const double planted = rest > 0.0 ? -m_scale : m_scale;
  bool stored = false;
  const DType kt = in.kv_pages.dtype();
  for (int64_t s = 0; s < view.num_seqs() && !stored; ++s) {
    for (int64_t u = 0; u < view.kv_len(s) && !stored; ++u) {
      for (int64_t h = 0; h < view.num_kv_heads() && !stored; ++h) {
        for (int64_t c = 0; c < d && !stored; ++c) {
          const int64_t at = view.v_offset(s, u, h) + c;
          const float x = load_as_float32(kt, in.kv_pages.data(), at);
          const double v = kv_eff(in.q.dtype(), kt, p.v_scale, false, x);
          if (std::fabs(v) != m_scale) continue;
          const int64_t to = view.v_offset(r.seq, static_cast<int64_t>(t), r.kv_head) + col;
          in.kv_pages.set_float(to, v == planted ? x : -x);
          stored = true;
        }
      }
    }
  }
  RC_ASSERT(stored);
  const ReferenceResult after = dense_reference(in, p, Semantics::kKernel);
  const Tolerance tol = tolerance_for_case(in, p, after);
  RC_ASSERT(after.max_abs_v_eff == m_scale);
  r = row_softmax(in, p, row, head, col);
  RC_ASSERT(r.value[t] == planted);
  const double want = after.out.float_at(e);
  const double allowed = tol.allowed(e, want);
  const double figure = detectable_key_weight(allowed, want, tol.value_scale, in.q.dtype());
  // The row without key t: its other weights renormalized, exactly.
  std::vector<double> dropped = w;
  dropped[t] = 0.0;
  for (double& x : dropped) x /= 1.0 - w[t];
  // Pages shared within the sequence (page_indices may repeat one) give other keys the
  // planted value too: then the key may lie nearer the others' mean than M.
  const double distance = std::fabs(r.value[t] - row_output(r, dropped));
  RC_CLASSIFY(distance < m_scale, "shared page: key nearer the others than M");
  RC_CLASSIFY(w[t] >= figure, "key at least the figure");
  RC_CLASSIFY(figure < 1e-3, "figure < 1e-3");
  if (w[t] < figure || distance < m_scale) return;
  Tensor got = after.out;
  got.set_float(e, row_output(r, dropped));
  RC_LOG() << "key weight " << w[t] << ", figure " << figure << ", want " << want << ", got "
           << got.float_at(e) << ", allowed " << allowed << ", M " << m_scale << "\n";
  const Comparison c = compare_outputs(got, after.out, view, tol);
  RC_ASSERT(!c.agree());
  RC_ASSERT(c.first->row == row && c.first->head == head && c.first->col == col);
}

// The figure is not vacuous where the check can reject anything: wherever discrimination
// < 1, a dropped key of some weight below 1 is caught, for the kernel's own output too.
RC_GTEST_PROP(Tolerance, DetectableKeyWeightIsNotVacuous, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  const ReferenceResult ref = dense_reference(m.inputs, m.params, Semantics::kKernel);
  const Tensor got = tiled_attention(m.inputs, m.params, {});
  const Comparison c = compare_outputs(got, ref.out, kv_view(m.inputs),
                                       tolerance_for_case(m.inputs, m.params, ref));
  RC_LOG() << "discrimination " << c.discrimination << ", key weight "
           << c.min_detectable_key_weight << " (every row " << c.key_weight_every_row << ")\n";
  RC_CLASSIFY(c.discrimination < 1.0, "discriminates");
  RC_CLASSIFY(c.min_detectable_key_weight < 1e-3, "key weight < 1e-3");
  if (c.discrimination < 1.0) RC_ASSERT(c.min_detectable_key_weight < 1.0);
  RC_ASSERT(c.min_detectable_key_weight <= c.key_weight_every_row);
}

// The tiled kernel at long context with float8 KV: within the kernel semantics' tolerance,
// which there is about kv_len float32 ulps of max |V| (the reference semantics' was kv_len *
// 2^-9 of it).
RC_GTEST_PROP(TiledKernel, MatchesReferenceAtLongContext, ()) {
  const CaseSpec spec = *gen_valid_case(sanitized_long(long_context_options()));
  const Materialized m = materialize(spec);
  const Tensor got = tiled_attention(m.inputs, m.params, {.threads = 2});
  assert_agrees(m.inputs, m.params, got, dense_reference(m.inputs, m.params, Semantics::kKernel));
  RC_TAG(dtype_name(spec.q_dtype), dtype_name(spec.kv_dtype));
  RC_CLASSIFY(spec.max_kv_len() > 4096, "kv_len > 4096");
}

}  // namespace
}  // namespace rpa::props
