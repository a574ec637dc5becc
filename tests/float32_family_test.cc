// The kernel semantics' float32 budget against every float32 summation order (issue 20):
// each member of tests/float32_family.h, on each adversarial shape, long contexts included,
// must agree with the dense reference under tolerance_for_case, in both semantics. Each
// case prints one line per semantics: per member the largest |error| / allowed
// (max_budget_used) and the largest |error| in units of 2^-24 M (M = max |V_eff|), and the
// worst member. Sanity tests keep the instrument honest: every member matches the reference
// closely on small random cases (so a broken member cannot pass vacuously), and the
// tolerance still rejects the all-zero output on every shape whose answer is not ~0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "properties/sanitized.h"
#include "reference/jax_reference.h"
#include "tests/float32_family.h"
#include "tests/random_inputs.h"
#include "validation/jax_validate.h"

namespace rpa::testing {
namespace {

constexpr DType F32 = DType::kFloat32, BF16 = DType::kBFloat16;
constexpr Semantics kBoth[] = {Semantics::kKernel, Semantics::kReference};

// |error| in units of 2^-24 M.
double in_u_m(const Comparison& c, const ReferenceResult& ref) {
  return ref.max_abs_v_eff > 0.0 ? c.max_abs_err / (std::ldexp(1.0, -24) * ref.max_abs_v_eff) : 0.0;
}

// Runs every member on the case, compares with the reference in both semantics (non-fatal
// expectations) and prints the per-member line of each.
// Returns the worst member's max_budget_used in the kernel semantics.
double check_family(const DriftSpec& spec) {
  const DriftCase dc = drift_case(spec);
  const Inputs& in = dc.inputs;
  const Params& p = dc.params;
  SCOPED_TRACE(describe(spec));
  EXPECT_FALSE(validate(in, p).has_value()) << validate(in, p)->message;
  if (validate(in, p)) return 0.0;
  double kernel_worst = 0.0;
  std::vector<Tensor> outs;
  for (const Float32Member& m : float32_family()) outs.push_back(m.run(in, p));
  const PagedKvView view = kv_view(in);
  for (Semantics sem : kBoth) {
    const ReferenceResult ref = dense_reference(in, p, sem);
    const Tolerance tol = tolerance_for_case(in, p, ref);
    std::ostringstream line;
    line << std::setprecision(3) << "[family] " << describe(spec) << " | " << semantics_name(sem)
         << " | M " << ref.max_abs_v_eff << " |";
    double worst = -1.0, worst_u = 0.0;
    std::string worst_name;
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = float32_family()[i].name;
      const Comparison c = compare_outputs(outs[i], ref.out, view, tol);
      const double u = in_u_m(c, ref);
      line << " " << name << " " << c.max_budget_used << " (" << std::setprecision(4) << u
           << std::setprecision(3) << " uM)";
      if (c.max_budget_used > worst) {
        worst = c.max_budget_used;
        worst_u = u;
        worst_name = name;
      }
      EXPECT_TRUE(c.agree()) << name << " vs the reference (" << semantics_name(sem)
                             << " semantics): " << describe_mismatch(c) << "; max budget used "
                             << c.max_budget_used << ", error " << u << " uM";
    }
    line << " | worst " << worst_name << " " << worst << " (" << std::setprecision(4) << worst_u
         << " uM)";
    std::cout << line.str() << std::endl;
    if (sem == Semantics::kKernel) kernel_worst = worst;
  }
  return kernel_worst;
}

// The bound is as tight as its proof allows, not a blanket: on the shapes that drift most, a
// member of the family uses a good part of it (measured 0.38 and 0.12 of the kernel
// semantics' tolerance). A bound loosened tenfold, e.g. a planted atol or element term
// times 100, fails here while every agreement test above still passes.
TEST(Float32Family, TheWorstOrderUsesAGoodPartOfTheBound) {
  EXPECT_GT(check_family(DriftSpec{.shape = DriftShape::kDominant, .kv_len = 8192, .head_dim = 128}),
            0.1);
  EXPECT_GT(check_family(DriftSpec{.shape = DriftShape::kEqual, .kv_len = 8192, .head_dim = 128}),
            0.05);
}

class DriftShapes : public ::testing::TestWithParam<DriftShape> {};

// kv_len {1024, 8192, 32768} x head_dim {1, 128} x soft cap or not, float32 q and KV; at
// head_dim 128 without a cap, kv_len 1024 and 32768, also bfloat16 K / V values under a
// float32 q and bfloat16 q and KV; for the equal shape also head_dim 256.
TEST_P(DriftShapes, EveryMemberAgreesInBothSemantics) {
  const DriftShape shape = GetParam();
  for (int64_t kv_len : {1024, 8192, 32768}) {
    // Under ASan the numbers are the release build's to check: keep to the shorter lengths.
    if (props::sanitized_skip(kv_len)) continue;
    std::vector<int64_t> dims = {1, 128};
    if (shape == DriftShape::kEqual) dims.push_back(256);
    for (int64_t d : dims) {
      for (std::optional<double> cap : {std::optional<double>(), std::optional<double>(20.0)}) {
        check_family(DriftSpec{.shape = shape, .kv_len = kv_len, .head_dim = d, .soft_cap = cap});
      }
    }
  }
  for (int64_t kv_len : {1024, 32768}) {
    if (props::sanitized_skip(kv_len)) continue;
    check_family(DriftSpec{.shape = shape, .kv_len = kv_len, .head_dim = 128,
                           .kv_bf16_values = true});
    check_family(DriftSpec{.shape = shape, .kv_len = kv_len, .head_dim = 128, .q_dtype = BF16,
                           .kv_dtype = BF16});
  }
}

INSTANTIATE_TEST_SUITE_P(Float32Family, DriftShapes, ::testing::ValuesIn(kAllDriftShapes),
                         [](const ::testing::TestParamInfo<DriftShape>& shape_info) {
                           return std::string(drift_shape_name(shape_info.param));
                         });

// A few decode and prefill rows, GQA, causal masks and a sliding window: every member
// within 2^-18 M (64 float32 ulps of M) of the reference's kernel semantics (float32) or
// within the tolerance (bfloat16 q), and each member's output differs from the answer's
// negation, so none can pass by returning a constant.
TEST(Float32Family, EveryMemberMatchesTheReferenceOnRandomCases) {
  for (DType dt : {F32, BF16}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      RandomInputsSpec r;
      r.seqs = {{1, 37}, {3, 20}, {1, 1}, {4, 64}};
      r.num_q_heads = 4;
      r.num_kv_heads = 2;
      r.head_dim = 16;
      r.page_size = 4;
      r.q_dtype = dt;
      r.kv_dtype = dt;
      r.seed = seed;
      const Inputs in = random_inputs(r);
      Params p;
      p.sm_scale = 0.25;
      if (seed == 2) p.soft_cap = 5.0;
      if (seed == 3) p.sliding_window = 9;
      ASSERT_FALSE(validate(in, p).has_value()) << validate(in, p)->message;
      const PagedKvView view = kv_view(in);
      const ReferenceResult ref = dense_reference(in, p, Semantics::kKernel);
      for (const Float32Member& m : float32_family()) {
        SCOPED_TRACE(m.name + ", " + std::string(dtype_name(dt)) + ", seed " + std::to_string(seed));
        const Tensor got = m.run(in, p);
        const Comparison c = compare_outputs(got, ref.out, view, tolerance_for_case(in, p, ref));
        EXPECT_TRUE(c.agree()) << describe_mismatch(c);
        if (dt == F32) {
          EXPECT_LE(c.max_abs_err, std::ldexp(1.0, -18) * ref.max_abs_v_eff);
        }
        EXPECT_GT(c.max_abs_want, 0.1 * ref.max_abs_v_eff);  // the answer is not ~0
        // Rows of no sequence stay 0 (the literal schedule leaves what the Pallas program
        // writes there).
        if (m.name == "tiled_literal") continue;
        const int64_t defined = view.total_q_tokens() * view.num_q_heads() * view.head_dim();
        for (int64_t e = defined; e < got.numel(); ++e) ASSERT_EQ(got.float_at(e), 0.0) << e;
      }
    }
  }
}

// Every adversarial shape whose answer is not ~0 still rejects the all-zero output in both
// semantics, at the longest context and the widest head.
TEST(Float32Family, TheToleranceRejectsZeroOnEveryShape) {
  for (DriftShape shape : kAllDriftShapes) {
    for (int64_t kv_len : {1024, 32768}) {
      const DriftSpec spec{.shape = shape, .kv_len = kv_len, .head_dim = 128};
      SCOPED_TRACE(describe(spec));
      const DriftCase dc = drift_case(spec);
      const PagedKvView view = kv_view(dc.inputs);
      for (Semantics sem : kBoth) {
        const ReferenceResult ref = dense_reference(dc.inputs, dc.params, sem);
        const Tensor zero(ref.out.dtype(), ref.out.shape());
        const Comparison c =
            compare_outputs(zero, ref.out, view, tolerance_for_case(dc.inputs, dc.params, ref));
        if (c.max_abs_want < 0.25 * ref.max_abs_v_eff) {
          EXPECT_EQ(shape, DriftShape::kAlternatingSigns) << "an answer ~0 on this shape";
          continue;
        }
        EXPECT_FALSE(c.agree()) << semantics_name(sem);
        EXPECT_TRUE(c.rejects_zero()) << semantics_name(sem) << ": discrimination "
                                      << c.discrimination;
      }
    }
  }
}

}  // namespace
}  // namespace rpa::testing
