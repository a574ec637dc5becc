// Checks the kernel properties share: one comparison against the reference, reported the
// way `rpa check` reports it.
#pragma once

#include <rapidcheck.h>

#include <cmath>
#include <cstdint>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "core/tensor.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"

namespace rpa::props {

// got agrees with the reference within the case's tolerance, is NaN nowhere the reference
// is finite, and (against the kernel semantics, which the kernel computes) is not biased
// (oracle/bias.h).
inline void assert_agrees(const Inputs& in, const Params& p, const Tensor& got,
                          const ReferenceResult& ref) {
  const PagedKvView view = kv_view(in);
  const Comparison c = compare_outputs(got, ref.out, view, tolerance_for_case(in, p, ref));
  RC_LOG() << "kernel vs reference (" << semantics_name(ref.semantics)
           << " semantics): " << describe_mismatch(c) << " (max abs error " << c.max_abs_err
           << ", atol " << c.tol.atol << ", rtol " << c.tol.rtol << ")\n";
  RC_ASSERT(c.agree());
  if (ref.semantics == Semantics::kKernel) RC_ASSERT(!c.bias.biased());
  const int64_t defined = view.total_q_tokens() * view.num_q_heads() * view.head_dim();
  for (int64_t e = 0; e < defined; ++e) {
    if (!std::isnan(ref.out.float_at(e))) RC_ASSERT(!std::isnan(got.float_at(e)));
  }
}

// Two kernel outputs for the same case, each within the tolerance of the reference, are
// within twice the tolerance of each other; `b` stands where the reference would.
inline void assert_kernels_agree(const Inputs& in, const Params& p, const Tensor& a,
                                 const Tensor& b, const ReferenceResult& ref) {
  const Comparison c =
      compare_outputs(a, b, kv_view(in), tolerance_for_case(in, p, ref).scaled(2.0));
  RC_LOG() << "kernel vs kernel: " << describe_mismatch(c) << "\n";
  RC_ASSERT(c.agree());
}

}  // namespace rpa::props
