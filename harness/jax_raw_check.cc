#include "harness/jax_raw_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "harness/jax_validation_check.h"
#include "kernel/jax_kernel.h"
#include "reference/jax_reference.h"
#include "validation/target_profile.h"

namespace rpa::fuzz {
namespace {

int64_t work(const Inputs& in) {
  const PagedKvView view = kv_view(in);
  int64_t total = 0;
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    const int64_t kv = view.kv_len(s);
    total += view.q_len(s) * kv * view.num_q_heads() * view.head_dim();
    total += kv * 2 * view.num_kv_heads() * view.head_dim();
    if (total > kMaxWork) break;
  }
  return total;
}

// The same bound for a strict-accepted v3 call (its arrays are consistent then).

}  // namespace

RawCheck check_raw_call(const RawCall& c) {
  RawCheck r;
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    for (const TargetProfile& target : target_profiles()) {
      const ValidationCheck v =
          check_validation(c.inputs, c.params, {.mode = mode, .target = target});
      if (v.problem) {
        r.problem = v.problem;
        return r;
      }
      if (mode == Mode::kStrict && target.name == default_target_profile().name) {
        r.strict_accepts = !v.verdict.has_value();
      }
    }
  }
  if (!r.strict_accepts || work(c.inputs) > kMaxWork) return r;
  r.ran = true;
  const ReferenceResult ref = dense_reference(c.inputs, c.params);
  for (bool literal : {false, true}) {
    const Tensor out =
        tiled_attention(c.inputs, c.params, {.threads = 1, .literal_schedule = literal});
    if (out.shape() != c.inputs.q.shape() || out.dtype() != c.inputs.q.dtype() ||
        ref.out.shape() != c.inputs.q.shape() || ref.out.dtype() != c.inputs.q.dtype()) {
      r.problem = "outputs are not q's shape " + shape_repr(c.inputs.q.shape()) + ": kernel " +
                  shape_repr(out.shape()) + ", reference " + shape_repr(ref.out.shape());
      return r;
    }
  }
  return r;
}

}  // namespace rpa::fuzz
