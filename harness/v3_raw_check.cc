#include "harness/v3_raw_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "validation/v3_validate.h"

namespace rpa::fuzz {
namespace {

int64_t v3_work(const V3Inputs& in) {
  const int64_t hq = in.queries.dim(1), dim = in.queries.dim(2), hkv = in.keys.dim(1);
  int64_t total = 0;
  for (int64_t s = 0; s < in.distribution.int_at(2); ++s) {
    const int64_t kv = in.kv_lens.int_at(s),
                  q = in.cu_q_lens.int_at(s + 1) - in.cu_q_lens.int_at(s);
    total += q * kv * hq * dim + kv * 2 * hkv * dim;
    if (total > kMaxWork) break;
  }
  return total;
}

// The largest finite magnitude among t's elements (0 when there is none).
double max_finite(const Tensor& t) {
  double m = 0.0;
  for (int64_t e = 0; e < t.numel(); ++e) {
    const double x = std::fabs(t.float_at(e));
    if (std::isfinite(x)) m = std::max(m, x);
  }
  return m;
}

// Whether float32 arithmetic, which the tiled kernel and the v3 kernel itself compute the
// logits and p.V in, stays far from overflow on this call: every finite element of q, the new
// keys and values and the cache at most 2^40 in magnitude; the logit scale times head_dim
// times that squared at most 2^100, and so each logit and each partial sum of p.V; and q.K
// itself at most 2^100 before the scale multiplies it, with q as the kernels quantize it (q /
// q_scale, clipped to the KV dtype's finite range: a q_scale below 1 magnifies q). Raw data
// beyond it (a bfloat16 q of 1e36 against a cached key of 1e38: float32 dots overflow to
// inf - inf = NaN where the exact definition is finite) is outside the tolerance's
// derivation, as for the v3 kernel on a TPU; such calls still run, with the cache checked.
// The dot has its own bound because a tiny or zero sm_scale does not undo the overflow of a
// dot that q_scale magnified: fuzz_raw_inputs found an hd64 row with q_scale 4.8e-35 and sm_scale 0
// (in CI's input 1.5e-312, 0 as a float32), whose float32 dot was -inf and its logit -inf * 0
// = NaN, in the kernel as on a TPU, where the exact definition's was 0; it was compared while
// the scale and the dot were bounded only as one product
// (corpus/fuzz/fuzz_raw_inputs/v3-hd64-q-scale-magnifies-dot-past-float32).
bool v3_within_float32_range(const V3Inputs& in, const V3Params& p) {
  constexpr double kElem = 0x1p40, kLogit = 0x1p100;
  const double q_max = max_finite(in.queries);
  double kv_max = 0.0;
  for (const Tensor* t : {&in.keys, &in.values, &in.kv_cache}) {
    kv_max = std::max(kv_max, max_finite(*t));
  }
  if (q_max > kElem || kv_max > kElem) return false;
  const auto dim = static_cast<double>(in.queries.dim(2));
  const double q_eff =
      p.q_scale ? std::min(q_max / std::fabs(*p.q_scale), dtype_finite_max(in.kv_cache.dtype()))
                : q_max;
  const double q_scale =
      p.q_scale ? std::max(std::fabs(*p.q_scale), 1.0 / std::fabs(*p.q_scale)) : 1.0;
  const double scale =
      std::fabs(p.sm_scale) * std::max(std::fabs(p.k_scale.value_or(1.0)), 1.0) * q_scale;
  const double v_scale = std::max(std::fabs(p.v_scale.value_or(1.0)), 1.0);
  return dim * q_eff * kv_max <= kLogit && scale * dim * kElem * kElem <= kLogit &&
         v_scale * kElem <= kLogit;
}

std::string v3_verdict(const std::optional<V3Failure>& f) {
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "valid";
}

}  // namespace

RawCheck check_v3_raw_call(const V3RawCall& c) {
  RawCheck r;
  const std::string dialect(dialect_name(c.dialect));
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    const std::optional<V3Failure> verdict = v3_validate(c.dialect, c.inputs, c.params, mode);
    const std::vector<V3Failure> all = v3_validate_all(c.dialect, c.inputs, c.params, mode);
    const std::optional<V3Failure> first =
        all.empty() ? std::nullopt : std::optional<V3Failure>(all.front());
    if (first != verdict) {
      r.problem = dialect + ", " + std::string(mode_name(mode)) + " mode: v3_validate says " +
                  v3_verdict(verdict) + ", v3_validate_all lists first " + v3_verdict(first);
      return r;
    }
    if (mode == Mode::kStrict) r.strict_accepts = !verdict.has_value();
  }
  if (!r.strict_accepts || v3_work(c.inputs) > kMaxWork) return r;
  r.ran = true;
  try {
    const V3ReferenceResult ref = v3_reference(c.dialect, c.inputs, c.params, Semantics::kKernel);
    const V3KernelResult got = v3_tiled_attention(c.dialect, c.inputs, c.params, {.threads = 1});
    const Shape& q_shape = c.inputs.queries.shape();
    if (got.out.shape() != q_shape || got.out.dtype() != c.inputs.queries.dtype() ||
        ref.out.shape() != q_shape || ref.out.dtype() != c.inputs.queries.dtype() ||
        got.kv_cache.shape() != c.inputs.kv_cache.shape() ||
        ref.kv_cache.shape() != c.inputs.kv_cache.shape()) {
      r.problem = dialect + ": outputs are not q's shape " + shape_repr(q_shape) + ": kernel " +
                  shape_repr(got.out.shape()) + ", reference " + shape_repr(ref.out.shape());
      return r;
    }
    const V3Comparison cmp = v3_compare(c.dialect, c.inputs, c.params, ref, got.out, got.kv_cache,
                                    kRpaTolerance);
    // Raw data may hold infinities and NaN the definition carries into the output, or
    // magnitudes whose exact answer is infinite: the output is compared where the
    // reference's is finite on every defined row; the cache (copies only) always.
    const int64_t defined =
        c.inputs.cu_q_lens.int_at(c.inputs.distribution.int_at(2)) * q_shape[1] * q_shape[2];
    bool finite = v3_within_float32_range(c.inputs, c.params);
    for (int64_t e = 0; e < defined && finite; ++e) finite = std::isfinite(ref.out.float_at(e));
    if (!cmp.cache_equal || (finite && !cmp.agree())) {
      r.problem = dialect + ": kernel vs reference: " + describe_v3_comparison(cmp);
    }
  } catch (const std::exception& e) {
    r.problem = dialect + ": a strict-accepted call throws: " + e.what();
  }
  return r;
}

}  // namespace rpa::fuzz
