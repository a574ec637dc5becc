#include "fuzz/raw_check.h"

#include <cstdint>
#include <vector>

#include "fuzz/validation_check.h"
#include "kernel/paged_kv_view.h"
#include "kernel/target_profile.h"
#include "kernel/tiled_kernel.h"
#include "reference/dense_reference.h"

namespace rpa::fuzz {
namespace {

// Work bound for running a strict-accepted call: sum over sequences of q_len * kv_len *
// Hq * D (logits and outputs) plus kv_len * Hc * D (the keys and values gathered). Strict
// mode accepts kv_len up to pages_per_seq * page_size, which 4096 elements of page table and
// pages can make millions of tokens: valid, but minutes of reference time. Larger calls are
// still validated, not run: a run over the bound would cost more than the thousands of
// executions a second fuzz_raw_inputs makes under ASan (the properties and
// fuzz_differential run the large valid shapes).
constexpr int64_t kMaxWork = int64_t{1} << 16;

int64_t work(const Inputs& in) {
  const PagedKvView view(in);
  int64_t total = 0;
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    const int64_t kv = view.kv_len(s);
    total += view.q_len(s) * kv * view.num_q_heads() * view.head_dim();
    total += kv * 2 * view.num_kv_heads() * view.head_dim();
    if (total > kMaxWork) break;
  }
  return total;
}

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
