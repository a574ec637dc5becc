// oracle/bias.h: the step a difference is counted in, what is counted, and the verdict at each
// of its boundaries (6 standard errors, 0.1 ulp), on both sides.
#include "oracle/bias.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace rpa {
namespace {

constexpr DType kBf16 = DType::kBFloat16;

TEST(BiasStats, UlpIsTheSpacingOfTheBinade) {
  EXPECT_EQ(ulp_at(1.0, kBf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_at(1.99, kBf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_at(0.99, kBf16), std::ldexp(1.0, -8));
  EXPECT_EQ(ulp_at(-3.0, kBf16), std::ldexp(1.0, -6));
  EXPECT_EQ(ulp_at(1.0, DType::kFloat32), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_at(std::ldexp(1.0, -126), kBf16), std::ldexp(1.0, -133));
}

// One step up from 1.0 and one step down (where the spacing halves) both count one.
TEST(BiasStats, OneStepEitherWayFromAPowerOfTwoCountsOne) {
  BiasStats up, down;
  up.add(1.0 + std::ldexp(1.0, -7), 1.0, kBf16);
  up.end_unit();
  down.add(1.0 - std::ldexp(1.0, -8), 1.0, kBf16);
  down.end_unit();
  EXPECT_EQ(up.mean_signed(), 1.0);
  EXPECT_EQ(down.mean_signed(), -1.0);
  EXPECT_EQ(down.mean_magnitude(), -1.0);  // toward zero
  BiasStats negative;
  negative.add(-1.0 + std::ldexp(1.0, -8), -1.0, kBf16);  // toward zero from below
  negative.end_unit();
  EXPECT_EQ(negative.mean_signed(), 1.0);
  EXPECT_EQ(negative.mean_magnitude(), -1.0);
}

TEST(BiasStats, ErrorsAreClippedAndAGotNearZeroIsNotCountedInTinySteps) {
  BiasStats far, zero;
  far.add(1.0 + 100 * std::ldexp(1.0, -7), 1.0, kBf16);
  far.end_unit();
  EXPECT_EQ(far.mean_signed(), kBiasClipUlps);
  zero.add(0.0, 1.0, kBf16);  // counted in steps at |want| / 2, then clipped
  zero.end_unit();
  EXPECT_EQ(zero.mean_signed(), -kBiasClipUlps);
}

TEST(BiasStats, CountsOnlyFiniteNormalWantsAndJudgesOnlyNarrowOutputs) {
  BiasStats b;
  b.add(NAN, 1.0, kBf16);
  b.add(1.0, INFINITY, kBf16);
  b.add(0.0, std::ldexp(1.0, -130), kBf16);  // a subnormal want: a flush, not a rounding
  b.add(1.0, 1.0, DType::kInt32);            // not a kernel float dtype
  b.end_unit();
  EXPECT_EQ(b.elements, 0);
  EXPECT_EQ(b.units, 0);
  EXPECT_FALSE(b.judged);
  EXPECT_EQ(b.exact_share(), 1.0);
  BiasStats f32;
  for (int j = 0; j < 1000; ++j) {
    f32.add(1.0 - std::ldexp(1.0, -24), 1.0, DType::kFloat32);
    f32.end_unit();
  }
  EXPECT_FALSE(f32.judged);
  EXPECT_FALSE(f32.biased()) << "float32 outputs are reported, not judged";
  EXPECT_EQ(f32.mean_magnitude(), -1.0);
}

// n units of one element each, every one a step toward zero: the ratio is sqrt(n), so 36
// units are not biased (6.0, not beyond 6) and 37 are.
BiasStats steps_down(int units) {
  BiasStats b;
  for (int j = 0; j < units; ++j) {
    b.add(1.0 - std::ldexp(1.0, -8), 1.0, kBf16);
    b.end_unit();
  }
  return b;
}

TEST(BiasStats, SixStandardErrorsIsTheBoundary) {
  const BiasStats at = steps_down(36), past = steps_down(37);
  EXPECT_DOUBLE_EQ(at.mean_magnitude() / at.se_magnitude(), -6.0);
  EXPECT_FALSE(at.biased());
  EXPECT_TRUE(past.judged);
  EXPECT_TRUE(past.biased());
}

// Units whose errors cancel have a standard error and no bias.
TEST(BiasStats, SymmetricUnitsAreNotBiased) {
  BiasStats b;
  for (int j = 0; j < 1000; ++j) {
    b.add(j % 2 ? 1.0 + std::ldexp(1.0, -7) : 1.0 - std::ldexp(1.0, -8), 1.0, kBf16);
    b.end_unit();
  }
  EXPECT_EQ(b.mean_signed(), 0.0);
  EXPECT_DOUBLE_EQ(b.se_signed(), std::sqrt(1000.0) / 1000.0);
  EXPECT_FALSE(b.biased());
}

// 400 units of 100 elements, k of each a step toward zero: mean -k / 100 ulp, far beyond 6
// standard errors either way; 0.1 ulp decides. Also: the columns of a unit are summed.
BiasStats units_of_100(int k) {
  BiasStats b;
  for (int j = 0; j < 400; ++j) {
    for (int e = 0; e < 100; ++e) b.add(e < k ? 1.0 - std::ldexp(1.0, -8) : 1.0, 1.0, kBf16);
    b.end_unit();
  }
  return b;
}

TEST(BiasStats, APointOneUlpFloor) {
  const BiasStats below = units_of_100(9), above = units_of_100(11);
  EXPECT_EQ(below.units, 400);
  EXPECT_EQ(below.elements, 40000);
  EXPECT_DOUBLE_EQ(below.exact_share(), 0.91);
  EXPECT_DOUBLE_EQ(below.se_magnitude(), std::sqrt(400.0 * 81.0) / 40000.0);
  EXPECT_GT(std::fabs(below.mean_magnitude() / below.se_magnitude()), 6.0);
  EXPECT_FALSE(below.biased()) << "mean -0.09 ulp is below the floor";
  EXPECT_TRUE(above.biased()) << "mean -0.11 ulp";
}

}  // namespace
}  // namespace rpa
