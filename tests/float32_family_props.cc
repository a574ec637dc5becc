// The kernel semantics' float32 budget against every float32 summation order, as a property
// (issue 20): RapidCheck draws an adversarial shape (tests/float32_family.h), a kv_len up to
// 32768 weighted toward long ones (its bound grows with RapidCheck's size: 32768 at the
// default max_size 100), a head_dim in 1..256, a soft cap or none, dtypes, decode rows and
// heads, and every member of the float32 family must agree with the dense reference under
// tolerance_for_case in both semantics. Under ASan the bound is kSanitizedMaxLen, 8192 (properties/sanitized.h).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "properties/sanitized.h"
#include "reference/jax_reference.h"
#include "tests/float32_family.h"
#include "validation/jax_validate.h"

namespace rpa::testing {
namespace {

constexpr int64_t kMaxKvLen = props::kSanitized ? props::kSanitizedMaxLen : 32768;

// Uniform in [lo, hi] whatever RapidCheck's size (inRange alone scales with it).
rc::Gen<int64_t> uniform(int64_t lo, int64_t hi) {
  return rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi + 1));
}

// kv_len in [1, hi], hi = kMaxKvLen * (size / 100)^2 (at least 64; the default run's sizes
// go from 0 to 100, so most cases stay short enough for its time budget and the last ones
// reach 32768): half the time in the upper half, a quarter one of the lengths the unit tests
// use or hi itself, a quarter uniform.
int64_t draw_kv_len() {
  const int64_t size = std::clamp(*rc::gen::withSize([](int s) { return rc::gen::just(s); }), 0, 100);
  const int64_t hi = std::clamp<int64_t>(kMaxKvLen * size * size / 10000, 64, kMaxKvLen);
  std::vector<int64_t> favourites;
  for (int64_t v : {int64_t{1024}, int64_t{8192}, kMaxKvLen, hi}) {
    if (v <= hi) favourites.push_back(v);
  }
  return *rc::gen::weightedOneOf<int64_t>({{2, uniform(hi / 2, hi)},
                                           {1, rc::gen::elementOf(favourites)},
                                           {1, uniform(1, hi)}});
}

DriftSpec draw_spec() {
  DriftSpec spec;
  spec.shape = *rc::gen::elementOf(std::vector<DriftShape>(std::begin(kAllDriftShapes),
                                                           std::end(kAllDriftShapes)))
                    .as("shape");
  spec.kv_len = draw_kv_len();
  spec.head_dim = *rc::gen::weightedOneOf<int64_t>(
      {{1, rc::gen::elementOf(std::vector<int64_t>{1, 2, 3, 128, 256})}, {1, uniform(1, 256)}});
  // One decode row three times in four, else two (the first with its last token masked).
  spec.q_len = std::min<int64_t>(*uniform(0, 3) == 3 ? 2 : 1, spec.kv_len);
  spec.page_size = *rc::gen::elementOf(std::vector<int64_t>{16, 16, 8, 32});
  const int64_t heads = *uniform(0, 7);  // (1, 1) three times in four, GQA (2, 1), MHA (2, 2)
  spec.num_q_heads = heads <= 5 ? 1 : 2;
  spec.num_kv_heads = heads == 7 ? 2 : 1;
  const int64_t dtypes = *uniform(0, 3);  // float32 half the time, bfloat16 values, bfloat16
  if (dtypes == 2) spec.kv_bf16_values = true;
  if (dtypes == 3) spec.q_dtype = spec.kv_dtype = DType::kBFloat16;
  if (*rc::gen::arbitrary<bool>()) {
    spec.soft_cap = *rc::gen::elementOf(std::vector<double>{20.0, 5.0, 50.0});
  }
  spec.seed = static_cast<uint64_t>(*uniform(0, 1 << 20));
  return spec;
}

RC_GTEST_PROP(Tolerance, AcceptsEveryFloat32SummationOrder, ()) {
  const DriftSpec spec = draw_spec();
  RC_LOG() << describe(spec) << "\n";
  const DriftCase dc = drift_case(spec);
  const Inputs& in = dc.inputs;
  const Params& p = dc.params;
  if (const auto failure = validate(in, p)) {
    RC_FAIL("the drawn case is not strict-valid: " + failure->message);
  }
  const PagedKvView view = kv_view(in);
  std::vector<Tensor> outs;
  for (const Float32Member& m : float32_family()) outs.push_back(m.run(in, p));
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    const ReferenceResult ref = dense_reference(in, p, sem);
    const Tolerance tol = tolerance_for_case(in, p, ref);
    const double unit = std::ldexp(1.0, -24) * ref.max_abs_v_eff;
    for (size_t i = 0; i < outs.size(); ++i) {
      const Comparison c = compare_outputs(outs[i], ref.out, view, tol);
      if (!c.agree()) {
        RC_FAIL(float32_family()[i].name + " vs the reference (" +
                std::string(semantics_name(sem)) + " semantics): " + describe_mismatch(c) +
                "; max budget used " + std::to_string(c.max_budget_used) + ", error " +
                std::to_string(unit > 0.0 ? c.max_abs_err / unit : 0.0) + " u M");
      }
    }
  }
  RC_TAG(std::string(drift_shape_name(spec.shape)));
  RC_CLASSIFY(spec.kv_len >= 8192, "kv_len >= 8192");
  RC_CLASSIFY(spec.soft_cap.has_value(), "soft cap");
  RC_CLASSIFY(spec.q_dtype == DType::kBFloat16, "bfloat16");
}

}  // namespace
}  // namespace rpa::testing
