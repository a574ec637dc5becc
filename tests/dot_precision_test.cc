// How a TPU's MXU evaluates float32 dots (oracle/dot_precision.h): the bounds per product
// worked out from the split in dot_precision.cc's comment, and what they do to the kernel
// semantics' tolerance (oracle/jax_tolerance.cc, items K2 and K3).
#include "oracle/dot_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"
#include "tests/random_inputs.h"

namespace rpa {
namespace {

TEST(DotPasses, ParsesSixThreeAndOne) {
  EXPECT_EQ(parse_dot_passes("6"), DotPasses::kSix);
  EXPECT_EQ(parse_dot_passes("3"), DotPasses::kThree);
  EXPECT_EQ(parse_dot_passes("1"), DotPasses::kOne);
  EXPECT_EQ(dot_pass_count(DotPasses::kSix), 6);
  EXPECT_EQ(dot_pass_count(DotPasses::kThree), 3);
  EXPECT_EQ(dot_pass_count(DotPasses::kOne), 1);
  for (const char* bad : {"2", "", "six", "0", "9", " 6", "6 ", "06", "+6", "-1", "3.0"}) {
    EXPECT_FALSE(parse_dot_passes(bad).has_value()) << "'" << bad << "'";
  }
}

// x = x1 + x2 + x3 in bfloat16s, |x2| <= 2^-8 |x|, |x3| <= 2^-16 |x|; an exact (bfloat16 or
// float8) operand is x1 alone. What each mode drops, relative to |a b|:
//   six passes (a1b1 + a1b2 + a2b1 + a2b2 + a1b3 + a3b1): a2b3 + a3b2 + a3b3 <= 2 2^-24 +
//     2^-32 <= 2^-22; nothing with one exact operand (b2 = b3 = 0).
//   three passes (a1b1 + a1b2 + a2b1): a2b2 + a1b3 + a3b1 + ... <= 2^-14; with b exact,
//     only a3b1 <= 2^-16.
//   one pass (a1b1 of the rounded operands): 2^-8 + 2^-8 + 2^-16 = 2^-7 + 2^-14 =
//     2^-7 (1 + 2^-7); with b exact, 2^-8.
//   two exact operands: their product is exact in every mode.
TEST(DotPasses, ProductErrorForEveryPassesAndOperands) {
  struct Row {
    DotPasses passes;
    double both, one;
  };
  for (const Row& row : {Row{DotPasses::kSix, std::ldexp(1.0, -22), 0.0},
                         Row{DotPasses::kThree, std::ldexp(1.0, -14), std::ldexp(1.0, -16)},
                         Row{DotPasses::kOne, std::ldexp(1.0, -7) + std::ldexp(1.0, -14),
                             std::ldexp(1.0, -8)}}) {
    SCOPED_TRACE(dot_pass_count(row.passes));
    EXPECT_EQ(mxu_product_error(row.passes, true, true), row.both);
    EXPECT_EQ(mxu_product_error(row.passes, true, false), row.one);
    EXPECT_EQ(mxu_product_error(row.passes, false, true), row.one);
    EXPECT_EQ(mxu_product_error(row.passes, false, false), 0.0);
  }
  // One pass on two float32 operands is 2^-7 (1 + 2^-7): the kappa of item F.
  EXPECT_EQ(mxu_product_error(DotPasses::kOne, true, true),
            std::ldexp(1.0, -7) * (1.0 + std::ldexp(1.0, -7)));
}

TEST(DotPasses, MostLogitErrorGrowsAsThePassesFall) {
  // kLeastLogitError (2^-21, float32 accumulation) plus the float32 x float32 product error.
  EXPECT_EQ(most_logit_error(DotPasses::kSix), std::ldexp(1.0, -21) + std::ldexp(1.0, -22));
  EXPECT_EQ(most_logit_error(DotPasses::kThree), std::ldexp(1.0, -21) + std::ldexp(1.0, -14));
  EXPECT_EQ(most_logit_error(DotPasses::kOne),
            std::ldexp(1.0, -21) + std::ldexp(1.0, -7) + std::ldexp(1.0, -14));
  EXPECT_LT(most_logit_error(DotPasses::kSix), most_logit_error(DotPasses::kThree));
  EXPECT_LT(most_logit_error(DotPasses::kThree), most_logit_error(DotPasses::kOne));
  // The reference's default (kMostLogitError = 2^-20) covers six passes, not three or one.
  EXPECT_LE(most_logit_error(DotPasses::kSix), kMostLogitError);
  EXPECT_GT(most_logit_error(DotPasses::kThree), kMostLogitError);
  EXPECT_GT(most_logit_error(DotPasses::kOne), kMostLogitError);
}

Inputs random_case(DType q_dtype, DType kv_dtype) {
  testing::RandomInputsSpec spec;
  spec.seqs = {{3, 12}, {1, 7}};
  spec.q_dtype = q_dtype;
  spec.kv_dtype = kv_dtype;
  return testing::random_inputs(spec);
}

TEST(DotPasses, KernelToleranceNeedsAReferenceForItsPasses) {
  // float32 q and K: e_qk = 2^-21 + mxu(passes, float32, float32), which for three (2^-21 +
  // 2^-14) and one (2^-21 + 2^-7 + 2^-14) pass exceeds the default reference's 2^-20.
  const Inputs in = random_case(DType::kFloat32, DType::kFloat32);
  const ReferenceResult r = dense_reference(in, Params{}, Semantics::kKernel);
  EXPECT_EQ(r.most_logit_error, kMostLogitError);
  EXPECT_NO_THROW(kernel_tolerance(in, Params{}, r, DotPasses::kSix));
  EXPECT_THROW(kernel_tolerance(in, Params{}, r, DotPasses::kThree), std::logic_error);
  EXPECT_THROW(kernel_tolerance(in, Params{}, r, DotPasses::kOne), std::logic_error);
  EXPECT_THROW(tolerance_for_case(in, Params{}, r, DotPasses::kOne), std::logic_error);
  // A reference computed for one pass serves all three.
  const ReferenceResult wide =
      dense_reference(in, Params{}, Semantics::kKernel, most_logit_error(DotPasses::kOne));
  for (const DotPasses passes : {DotPasses::kSix, DotPasses::kThree, DotPasses::kOne}) {
    EXPECT_NO_THROW(kernel_tolerance(in, Params{}, wide, passes)) << dot_pass_count(passes);
  }
  // float32 q over bfloat16 K: one exact operand, e_qk = 2^-21 + 2^-16 (three) or 2^-8
  // (one), still past 2^-20; six passes are exact there (2^-21).
  const Inputs mixed = random_case(DType::kFloat32, DType::kBFloat16);
  const ReferenceResult rm = dense_reference(mixed, Params{}, Semantics::kKernel);
  EXPECT_EQ(kernel_logit_error(mixed, Params{}, DotPasses::kSix), std::ldexp(1.0, -21));
  EXPECT_EQ(kernel_logit_error(mixed, Params{}, DotPasses::kThree),
            std::ldexp(1.0, -21) + std::ldexp(1.0, -16));
  EXPECT_NO_THROW(kernel_tolerance(mixed, Params{}, rm, DotPasses::kSix));
  EXPECT_THROW(kernel_tolerance(mixed, Params{}, rm, DotPasses::kThree), std::logic_error);
  EXPECT_THROW(kernel_tolerance(mixed, Params{}, rm, DotPasses::kOne), std::logic_error);
  // bfloat16 q and K: every product exact, e_qk = 2^-21 in every mode: the default will do.
  const Inputs bf = random_case(DType::kBFloat16, DType::kBFloat16);
  const ReferenceResult rb = dense_reference(bf, Params{}, Semantics::kKernel);
  EXPECT_EQ(kernel_logit_error(bf, Params{}, DotPasses::kOne), std::ldexp(1.0, -21));
  EXPECT_NO_THROW(kernel_tolerance(bf, Params{}, rb, DotPasses::kOne));
}

TEST(DotPasses, FewerPassesAllowMoreOnFloat32Operands) {
  // float32 q, K and V: per element the MXU's p.V term e_pv X (2^-22, 2^-14, 2^-7 + 2^-14)
  // and the logit term (e_qk as above) grow far more than item F shrinks without the
  // split (at most ~5u X + 2^-7 u V_c C): one pass > three > six wherever X > 0, which is
  // every defined element of random values. Rows of no sequence stay 0; atol and rtol do not
  // depend on the passes.
  const Inputs in = random_case(DType::kFloat32, DType::kFloat32);
  const ReferenceResult r =
      dense_reference(in, Params{}, Semantics::kKernel, most_logit_error(DotPasses::kOne));
  const Tolerance six = tolerance_for_case(in, Params{}, r, DotPasses::kSix);
  const Tolerance three = tolerance_for_case(in, Params{}, r, DotPasses::kThree);
  const Tolerance one = tolerance_for_case(in, Params{}, r, DotPasses::kOne);
  EXPECT_EQ(six.atol, three.atol);
  EXPECT_EQ(six.atol, one.atol);
  EXPECT_EQ(six.rtol, 0.0);
  EXPECT_EQ(one.rtol, 0.0);
  const int64_t defined = 4 * in.q.dim(1) * in.q.dim(2);  // q_len 3 + 1 rows
  const double cut = 2.0 * r.max_abs_v_eff;
  for (int64_t i = 0; i < in.q.numel(); ++i) {
    const auto e = static_cast<size_t>(i);
    const double s = (*six.element_atol)[e], t = (*three.element_atol)[e], o = (*one.element_atol)[e];
    if (i >= defined) {
      EXPECT_EQ(s, 0.0) << i;
      EXPECT_EQ(o, 0.0) << i;
      continue;
    }
    ASSERT_GT(r.abs_weighted[e], 0.0) << i;
    EXPECT_GT(s, 0.0) << i;
    EXPECT_LT(s, t) << i;
    EXPECT_LT(t, o) << i;
    EXPECT_LT(o, cut) << i;  // below the 2M cut, so the comparison above means something
    // The p.V term alone sets a floor: one pass allows at least (2^-7 + 2^-14) X.
    EXPECT_GE(o, (std::ldexp(1.0, -7) + std::ldexp(1.0, -14)) * r.abs_weighted[e]) << i;
  }
  EXPECT_GT(one.max_element_atol(), three.max_element_atol());
  EXPECT_GT(three.max_element_atol(), six.max_element_atol());
}

}  // namespace
}  // namespace rpa
