// Properties of the tiled kernel against the dense reference (DESIGN.md section 9): its
// default schedule agrees within the tolerance on every generated valid case (valid by the
// definition: strict mode may still reject one where the Pallas kernel departs from it,
// stale_kv_block and rows_not_computed, which the default schedule does not), it is
// deterministic, and the tolerance itself is honest.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "kernel/paged_kv_view.h"
#include "kernel/tiled_kernel.h"
#include "kernel/validate.h"
#include "oracle/compare.h"
#include "oracle/tolerance.h"
#include "properties/kernel_check.h"
#include "properties/materialize.h"
#include "properties/rc_case.h"
#include "reference/dense_reference.h"

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

RC_GTEST_PROP(TiledKernel, MatchesReference, ()) {
  const CaseSpec spec = *gen_valid_case();
  const int threads = *rc::gen::inRange(1, 3).as("threads");
  const Materialized m = materialize(spec);
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  const Tensor got = tiled_attention(m.inputs, m.params, {.threads = threads});
  assert_agrees(m.inputs, m.params, got, ref);
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
  const PagedKvView view(m.inputs);
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
  const double allowed = tol.atol + tol.rtol * std::abs(want);
  far.set_float(e, want + 10.0 * allowed);
  const Comparison c = compare_outputs(far, ref.out, view, tol);
  RC_LOG() << "ten budgets: " << describe_mismatch(c) << "\n";
  RC_ASSERT(c.mismatches == 1);
  RC_ASSERT(c.first.has_value());
  RC_ASSERT(c.first->row == e / row_elems);
  RC_ASSERT(c.first->head == e % row_elems / spec.head_dim);
  RC_ASSERT(c.first->col == e % spec.head_dim);
}

}  // namespace
}  // namespace rpa::props
