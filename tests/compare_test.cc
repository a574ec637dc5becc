// The tolerance (oracle/tolerance.h) and the comparator (oracle/compare.h), DESIGN.md
// section 6. Expected tolerances are worked out by hand from the formula in
// tolerance_for's comment, never by calling the formula again:
//   atol = M * [V narrow] (2^(1-prec_V) + kv_len * min_subnormal_V)
//          + [V narrow] min_subnormal_V + [prec_q < prec_V] min_subnormal_q
//          + (kv_len + 1) * 2^-126
//   rtol = [V narrow] 2^(1-prec_V) + [prec_q < prec_V] 2^(1-prec_q)
// with prec = 24 / 8 / 4 / 3 and min_subnormal = 2^-149 / 2^-133 / 2^-9 / 2^-16 for
// float32 / bfloat16 / float8_e4m3fn / float8_e5m2. The float32 arithmetic has no term in
// atol any more (the measured 1e-5 M budget is gone): item F of jax_tolerance.cc, per element
// (float32_terms), worked by hand in the Float32Terms tests below, with u = 2^-24,
// kExpError = 2^-21 and, per row, n the weights > 0, C = row_chain, R = row_blocks - 1,
// P' = passes - 1 where the MXU splits float32 V (kernel semantics, passes 6 or 3; then
// kappa = 1 + 2^-7, else P' = 0 and kappa = 1), D = n + R + P' + 1, B = B_max (kernel) or
// B' = max_logit_abs_sum + |soft_cap| (reference), and per column X, Y, V_c:
//   F = u [kappa (V_c C + X (R + 1 + P')) + X (C + R + 1)] / (1 - 2 D u)
//     + [(R + 1) kExpError Y + S + 2 u B Y] / (1 - 2 ((R + 1) kExpError + 4 u B)),
//   S = u spread (kernel) or 2 u B' Y (reference); min(F, 2M), and 2M where a divisor is
//   not positive.
#include "oracle/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "core/python_repr.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"
#include "reference/semantics.h"
#include "tests/inputs_builder.h"
#include "tests/random_inputs.h"

namespace rpa {
namespace {

using testing::InputsSpec;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------
// tolerance_for

TEST(PrecisionBits, KernelFloatTypes) {
  EXPECT_EQ(precision_bits(DType::kFloat32), 24);
  EXPECT_EQ(precision_bits(DType::kBFloat16), 8);
  EXPECT_EQ(precision_bits(DType::kFloat8E4M3FN), 4);
  EXPECT_EQ(precision_bits(DType::kFloat8E5M2), 3);
}

TEST(Tolerance, Float32HasOnlyTheSubnormalFloor) {
  // V float32: no narrow term. q float32: prec_q 24 == prec_V 24, no q term. No 1e-5 M
  // either (the float32 arithmetic is item F, per element): atol is the flushed subnormals'
  // (kv_len + 1) * 2^-126 alone, whatever M; rtol = 0.
  // M = 2.5, kv_len 100: atol = 101 * 2^-126 (exact in double).
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kFloat32, 2.5, 100);
  EXPECT_EQ(t.atol, 101 * std::ldexp(1.0, -126));
  EXPECT_EQ(t.rtol, 0.0);
  EXPECT_EQ(t.value_scale, 2.5);  // M, the scale of the check's power
  EXPECT_FALSE(t.element_atol);
  // kv_len 1'000'000: 1'000'001 * 2^-126; M does not enter: the same at M = 2.5 and 1e6.
  EXPECT_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 2.5, 1000000).atol,
            1000001 * std::ldexp(1.0, -126));
  EXPECT_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 1e6, 1000000).atol,
            1000001 * std::ldexp(1.0, -126));
  // M = 1, kv_len 1: 2 * 2^-126 = 2^-125.
  EXPECT_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 1.0, 1).atol, std::ldexp(1.0, -125));
}

TEST(Tolerance, BFloat16QAndV) {
  // V bfloat16: ulp 2^(1-8) = 2^-7 = 0.0078125; min_subnormal 2^-133.
  // M = 4, kv_len 10: atol = 4 * (0.0078125 + 10 * 2^-133) + 2^-133 + 11 * 2^-126
  //                        = 0.03125 + 41 * 2^-133 + 11 * 2^-126 (the tiny terms below
  //                          double's resolution of the sum, but written out anyway).
  // q bfloat16: prec_q 8 is not < prec_V 8, so rtol = 2^-7 only.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kBFloat16, 4.0, 10);
  EXPECT_DOUBLE_EQ(t.atol, 0.03125 + 41 * std::ldexp(1.0, -133) + 11 * std::ldexp(1.0, -126));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
}

TEST(Tolerance, BFloat16QOverFloat32V) {
  // V float32 (no v_scale, float32 KV): no narrow-V term and no M term at all; q bfloat16:
  // prec_q 8 < prec_V 24, so the output cast adds 2^(1-8) = 2^-7 to rtol and one bfloat16
  // subnormal to atol: atol = 2^-133 + 8 * 2^-126 (kv_len 7), the same for any M.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kFloat32, 2.0, 7);
  EXPECT_EQ(t.atol, std::ldexp(1.0, -133) + 8 * std::ldexp(1.0, -126));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
}

TEST(Tolerance, Float32QOverBFloat16V) {
  // V bfloat16: atol = 1 * (2^-7 + 3 * 2^-133) + 2^-133 + 4 * 2^-126
  //                  = 0.0078125 (+ 4 * 2^-133 + 4 * 2^-126).
  // q float32: prec_q 24 is not < 8, no q term: rtol = 2^-7.
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kBFloat16, 1.0, 3);
  EXPECT_DOUBLE_EQ(t.atol, 0.0078125 + 4 * std::ldexp(1.0, -133) + 4 * std::ldexp(1.0, -126));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
}

TEST(Tolerance, Float8E4M3FNUnderBFloat16Q) {
  // V e4m3fn: ulp 2^(1-4) = 2^-3 = 0.125; min_subnormal 2^-9 = 0.001953125.
  // M = 2, kv_len 4: atol = 2 * (0.125 + 4 * 2^-9) = 2 * (0.125 + 0.0078125)
  //                       = 0.25 + 0.015625 = 0.265625, plus one e4m3 subnormal
  //                       for a subnormal result: + 2^-9 = 0.267578125 (+ 5 * 2^-126).
  // q bfloat16: prec_q 8 is not < prec_V 4 (every e4m3 value is a bfloat16), so no q term:
  // rtol = 0.125.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kFloat8E4M3FN, 2.0, 4);
  EXPECT_DOUBLE_EQ(t.atol, 0.267578125);
  EXPECT_DOUBLE_EQ(t.rtol, 0.125);
}

TEST(Tolerance, Float8E4M3FNUnderFloat32Q) {
  // Same V term as above; q float32 (24 bits) is wider still: rtol = 0.125.
  // M = 2, kv_len 4: atol = 0.267578125 again.
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kFloat8E4M3FN, 2.0, 4);
  EXPECT_DOUBLE_EQ(t.atol, 0.267578125);
  EXPECT_DOUBLE_EQ(t.rtol, 0.125);
}

TEST(Tolerance, Float8E5M2UnderBFloat16Q) {
  // V e5m2: ulp 2^(1-3) = 2^-2 = 0.25; min_subnormal 2^-16 = 0.0000152587890625.
  // M = 8, kv_len 16: atol = 8 * (0.25 + 16 * 2^-16) = 8 * (0.25 + 2^-12)
  //                        = 2 + 2^-9 = 2.001953125,
  //                        plus one e5m2 subnormal 2^-16: 2.0019683837890625.
  // q bfloat16 (8 bits) is not narrower than e5m2 (3 bits): rtol = 0.25.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kFloat8E5M2, 8.0, 16);
  EXPECT_DOUBLE_EQ(t.atol, 2.0019683837890625);
  EXPECT_DOUBLE_EQ(t.rtol, 0.25);
}

TEST(Tolerance, Float8E5M2UnderFloat32Q) {
  // M = 1, kv_len 1: atol = 0.25 + 2^-16 = 0.2500152587890625, plus the subnormal floor
  //                       2^-16: 0.250030517578125 (= 0.25 + 2^-15). rtol = 0.25 (no q term).
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kFloat8E5M2, 1.0, 1);
  EXPECT_DOUBLE_EQ(t.atol, 0.250030517578125);
  EXPECT_DOUBLE_EQ(t.rtol, 0.25);
}

TEST(Tolerance, ZeroMaxVLeavesOnlyTheSubnormalFloor) {
  // atol = M * (...) + floor = floor: (kv_len + 1) * 2^-126 for float32's flushed
  // subnormals, plus one smallest subnormal of each narrower-than-float32 rounding; rtol
  // does not depend on M.
  EXPECT_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 0.0, 9).atol, 10 * std::ldexp(1.0, -126));
  EXPECT_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 0.0, 9).rtol, 0.0);
  EXPECT_EQ(tolerance_for(DType::kBFloat16, DType::kBFloat16, 0.0, 9).atol,
            std::ldexp(1.0, -133) + 10 * std::ldexp(1.0, -126));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBFloat16, DType::kBFloat16, 0.0, 9).rtol, 0.0078125);
  EXPECT_EQ(tolerance_for(DType::kBFloat16, DType::kFloat8E4M3FN, 0.0, 512).atol, std::ldexp(1.0, -9));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBFloat16, DType::kFloat8E4M3FN, 0.0, 512).rtol, 0.125);
  EXPECT_EQ(tolerance_for(DType::kFloat32, DType::kFloat8E5M2, 0.0, 512).atol, std::ldexp(1.0, -16));
  // bf16 q over float32 V: the q rounding's floor.
  EXPECT_EQ(tolerance_for(DType::kBFloat16, DType::kFloat32, 0.0, 512).atol,
            std::ldexp(1.0, -133) + 513 * std::ldexp(1.0, -126));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBFloat16, DType::kFloat32, 0.0, 512).rtol, 0.0078125);
}

TEST(Tolerance, Float8SubnormalTermGrowsPerToken) {
  // e4m3fn, M = 1: each token adds 2^-9 = 0.001953125 to atol.
  // (each value below also carries the fixed floor of one subnormal, 2^-9)
  // (and the flushed float32 subnormals' (kv_len + 1) * 2^-126, below double's resolution)
  // kv_len 0:   atol = 0.125 + 2^-9              = 0.126953125
  // kv_len 1:   atol = 0.125 + 2^-9 + 2^-9       = 0.12890625
  // kv_len 512: atol = 0.125 + 512 * 2^-9 + 2^-9 = 1.126953125
  const auto atol = [](int64_t kv_len) {
    return tolerance_for(DType::kBFloat16, DType::kFloat8E4M3FN, 1.0, kv_len).atol;
  };
  EXPECT_DOUBLE_EQ(atol(0), 0.126953125);
  EXPECT_DOUBLE_EQ(atol(1), 0.12890625);
  EXPECT_DOUBLE_EQ(atol(512), 1.126953125);
  EXPECT_DOUBLE_EQ(atol(1) - atol(0), 0.001953125);
  // Scaled by M (the floor is not): M = 4, kv_len 512: 4 * 1.125 + 2^-9 = 4.501953125.
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kFloat32, DType::kFloat8E4M3FN, 4.0, 512).atol, 4.501953125);
  // e5m2, M = 1: 2^-16 per token; kv_len 65536 adds 65536 * 2^-16 = 1:
  // atol = 0.25 + 1 + 2^-16 = 1.2500152587890625.
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBFloat16, DType::kFloat8E5M2, 1.0, 65536).atol, 1.2500152587890625);
}

// ---------------------------------------------------------------------------------------
// compare_outputs

// Three sequences, (q_len, kv_len) = (2, 5), (0, 3), (3, 3): rows 0-1 are sequence 0,
// sequence 1 has none, rows 2-4 are sequence 2; rows 5..15 belong to no sequence.
// 4 query heads, head_dim 8: 5 * 4 * 8 = 160 defined elements.
constexpr int64_t kHeads = 4;
constexpr int64_t kDim = 8;
constexpr int64_t kDefinedRows = 5;
constexpr int64_t kDefined = kDefinedRows * kHeads * kDim;

InputsSpec spec(DType q_dtype = DType::kFloat32) {
  InputsSpec s;
  s.seqs = {{2, 5}, {0, 3}, {3, 3}};
  s.q_dtype = q_dtype;
  s.kv_dtype = q_dtype;
  return s;
}

int64_t at(int64_t row, int64_t head, int64_t col) { return (row * kHeads + head) * kDim + col; }

// A tensor of q's shape holding small values exact in every float dtype used here
// ((k - 50) / 64, |k - 50| <= 50: at most 6 significant bits).
Tensor filled(const Inputs& in) {
  Tensor t(in.q.dtype(), in.q.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_float(i, static_cast<double>((i * 37) % 101 - 50) / 64.0);
  return t;
}

class Compare : public ::testing::Test {
 protected:
  Inputs in = testing::build_inputs(spec());
  PagedKvView view = kv_view(in);
  Tensor want = filled(in);
  Tensor got = filled(in);
};

TEST_F(Compare, IdenticalAgreeOverDefinedElements) {
  const Comparison c = compare_outputs(got, want, view, Tolerance{1e-5, 0.0});
  EXPECT_TRUE(c.agree());
  EXPECT_EQ(c.compared, kDefined);  // 5 rows * 4 heads * 8 columns
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_FALSE(c.first.has_value());
  EXPECT_EQ(c.max_abs_err, 0.0);
  EXPECT_EQ(c.max_rel_err, 0.0);
  EXPECT_EQ(c.tol.atol, 1e-5);
  EXPECT_EQ(c.tol.rtol, 0.0);
  EXPECT_EQ(describe_mismatch(c), "all 160 elements agree");
}

TEST_F(Compare, DiscriminationSaysWhetherAnAllZeroOutputIsRejected) {
  // max |want| over the defined elements is 50/64 (element 0). Uniform atol 0.01, rtol 0.5:
  // discrimination = 0.01 / (50/64) + 0.5 < 1, and the all-zero output is rejected.
  Tensor zeros(in.q.dtype(), in.q.shape());
  const Comparison tight = compare_outputs(got, want, view, Tolerance{0.01, 0.5});
  EXPECT_DOUBLE_EQ(tight.max_abs_want, 50.0 / 64.0);
  EXPECT_DOUBLE_EQ(tight.discrimination, 0.01 / (50.0 / 64.0) + 0.5);
  EXPECT_TRUE(tight.rejects_zero());
  EXPECT_FALSE(compare_outputs(zeros, want, view, Tolerance{0.01, 0.5}).agree());
  // atol 1 > max |want|: nothing can tell zero from the answer.
  const Comparison loose = compare_outputs(got, want, view, Tolerance{1.0, 0.0});
  EXPECT_DOUBLE_EQ(loose.discrimination, 1.0 / (50.0 / 64.0));
  EXPECT_FALSE(loose.rejects_zero());
  EXPECT_TRUE(compare_outputs(zeros, want, view, Tolerance{1.0, 0.0}).agree());
  // An element's own allowance counts for that element only: with 1.0 more at the four
  // elements of |want| 50/64 (0, 30, 101, 131), the least ratio moves to |want| 49/64
  // (elements 60 and 71).
  Tolerance per{0.01, 0.0};
  auto extra = std::make_shared<std::vector<double>>(static_cast<size_t>(in.q.numel()), 0.0);
  for (size_t i : {0, 30, 101, 131}) (*extra)[i] = 1.0;
  per.element_atol = extra;
  ASSERT_EQ(std::fabs(want.float_at(30)), 50.0 / 64.0);
  ASSERT_EQ(std::fabs(want.float_at(71)), 49.0 / 64.0);
  const Comparison c = compare_outputs(got, want, view, per);
  EXPECT_DOUBLE_EQ(c.discrimination, 0.01 / (49.0 / 64.0));
  EXPECT_FALSE(compare_outputs(zeros, want, view, per).agree());
}

TEST_F(Compare, IdenticalAgreeWithZeroTolerance) {
  const Comparison c = compare_outputs(got, want, view, Tolerance{});
  EXPECT_TRUE(c.agree());
  EXPECT_EQ(c.compared, kDefined);
}

TEST_F(Compare, RowsPastTheLastSequenceAreIgnored) {
  // Rows 5..15 are past cu_q_lens[num_seqs] = 5: NaN, infinities and garbage there on
  // either side change nothing.
  for (int64_t row = kDefinedRows; row < in.q.dim(0); ++row) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t d = 0; d < kDim; ++d) {
        got.set_float(at(row, h, d), (d % 3 == 0) ? kNaN : (d % 3 == 1 ? kInf : 1e30));
        want.set_float(at(row, h, d), (d % 2 == 0) ? -7.0 : -kInf);
      }
    }
  }
  const Comparison c = compare_outputs(got, want, view, Tolerance{1e-5, 0.0});
  EXPECT_TRUE(c.agree()) << describe_mismatch(c);
  EXPECT_EQ(c.compared, kDefined);
  EXPECT_EQ(c.max_abs_err, 0.0);
}

TEST_F(Compare, EmptyBatchComparesNothing) {
  InputsSpec s = spec();
  s.seqs = {};
  const Inputs empty = testing::build_inputs(s);
  Tensor g = filled(empty);
  g.set_float(0, kNaN);
  const Comparison c = compare_outputs(g, filled(empty), kv_view(empty), Tolerance{});
  EXPECT_TRUE(c.agree());
  EXPECT_EQ(c.compared, 0);
}

TEST_F(Compare, SinglePlantedErrorIsLocatedExactly) {
  // Sequence 2, its row 1: q row cu_q_lens[2] + 1 = 2 + 1 = 3; head 3, column 5. (A uniform
  // atol of 1e-5: tolerance_for's float32 atol is now only the subnormal floor, 6 * 2^-126,
  // far below what a float32 output can be moved by.)
  const Tolerance tol{1e-5, 0.0};
  const int64_t i = at(3, 3, 5);
  const double w = want.float_at(i);
  const double allowed = tol.atol + tol.rtol * std::fabs(w);
  got.set_float(i, w + 10 * allowed);
  const double g = got.float_at(i);  // what the float32 tensor holds
  ASSERT_GT(std::fabs(g - w), 9 * allowed);

  const Comparison c = compare_outputs(got, want, view, tol);
  EXPECT_FALSE(c.agree());
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.compared, kDefined);
  ASSERT_TRUE(c.first.has_value());
  const ElementMismatch& m = *c.first;
  EXPECT_EQ(m.seq, 2);
  EXPECT_EQ(m.row_in_seq, 1);
  EXPECT_EQ(m.row, 3);
  EXPECT_EQ(m.head, 3);
  EXPECT_EQ(m.col, 5);
  EXPECT_EQ(m.got, g);
  EXPECT_EQ(m.want, w);
  EXPECT_DOUBLE_EQ(m.allowed, allowed);
  EXPECT_DOUBLE_EQ(c.max_abs_err, std::fabs(g - w));
  ASSERT_NE(w, 0.0);
  EXPECT_DOUBLE_EQ(c.max_rel_err, std::fabs(g - w) / std::fabs(w));

  const std::string d = describe_mismatch(c);
  EXPECT_EQ(d, "sequence 2, row 1 (q row 3), head 3, column 5: got " + py_float_repr(g) +
                   ", want " + py_float_repr(w) + ", allowed difference " +
                   py_float_repr(m.allowed) + "; 1 of 160 elements differ");
}

TEST_F(Compare, PlantedErrorInFirstSequence) {
  // Sequence 0 row 0 is q row 0; head 0, column 0: the very first defined element.
  got.set_float(at(0, 0, 0), want.float_at(at(0, 0, 0)) + 1.0);
  const Comparison c = compare_outputs(got, want, view, Tolerance{1e-3, 0.0});
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->seq, 0);
  EXPECT_EQ(c.first->row_in_seq, 0);
  EXPECT_EQ(c.first->row, 0);
  EXPECT_EQ(c.first->head, 0);
  EXPECT_EQ(c.first->col, 0);
  EXPECT_EQ(c.mismatches, 1);
}

TEST_F(Compare, ErrorAtTheBoundaryAgreesJustAboveMismatches) {
  // atol alone: want 1.0, got 1 + 2^-10 (exact in float32), atol 2^-10: |err| == allowed.
  const int64_t i = at(1, 2, 4);
  want.set_float(i, 1.0);
  got.set_float(i, 1.0 + std::ldexp(1.0, -10));
  const double boundary = std::ldexp(1.0, -10);
  EXPECT_TRUE(compare_outputs(got, want, view, Tolerance{boundary, 0.0}).agree());
  // The next double below the boundary as atol: the same error is now too large.
  const Comparison below =
      compare_outputs(got, want, view, Tolerance{std::nextafter(boundary, 0.0), 0.0});
  EXPECT_EQ(below.mismatches, 1);
  // The next float above 1 + 2^-10 as got: an error just above the tolerance.
  got.set_float(i, std::nextafter(static_cast<float>(1.0 + boundary), 2.0f));
  EXPECT_EQ(compare_outputs(got, want, view, Tolerance{boundary, 0.0}).mismatches, 1);

  // atol and rtol together: want -2.0, got -2 - 2^-8, atol 2^-9, rtol 2^-10:
  // allowed = 2^-9 + 2^-10 * 2 = 2^-8 == |err|.
  want.set_float(i, -2.0);
  got.set_float(i, -2.0 - std::ldexp(1.0, -8));
  const Tolerance both{std::ldexp(1.0, -9), std::ldexp(1.0, -10)};
  EXPECT_TRUE(compare_outputs(got, want, view, both).agree());
  // (rtol one double ulp lower would be absorbed when atol is added: 2^-9 + 2 * (2^-10 -
  // 2^-63) rounds back to 2^-8. 2^-40 lower survives: allowed = 2^-8 - 2^-39.)
  EXPECT_EQ(compare_outputs(got, want, view, Tolerance{both.atol, both.rtol - std::ldexp(1.0, -40)})
                .mismatches,
            1);
  got.set_float(i, std::nextafter(static_cast<float>(-2.0 - std::ldexp(1.0, -8)), -3.0f));
  EXPECT_EQ(compare_outputs(got, want, view, both).mismatches, 1);
}

// The two values put at one defined element (sequence 2 row 2 = q row 4, head 1, col 6).
Comparison compare_one(Tensor got, Tensor want, const PagedKvView& view, double g, double w,
                       Tolerance tol) {
  const int64_t i = at(4, 1, 6);
  got.set_float(i, g);
  want.set_float(i, w);
  return compare_outputs(got, want, view, tol);
}

TEST_F(Compare, NaNAndInfinities) {
  // Both a zero-rtol (float32) and a nonzero-rtol (bfloat16-like) tolerance.
  for (const Tolerance& tol : {Tolerance{1e-5, 0.0}, Tolerance{0.03, 0.0078125}}) {
    SCOPED_TRACE("atol " + py_float_repr(tol.atol) + " rtol " + py_float_repr(tol.rtol));
    EXPECT_TRUE(compare_one(got, want, view, kNaN, kNaN, tol).agree()) << "NaN vs NaN";
    EXPECT_TRUE(compare_one(got, want, view, -kNaN, kNaN, tol).agree()) << "-NaN vs NaN";
    EXPECT_EQ(compare_one(got, want, view, kNaN, 0.5, tol).mismatches, 1) << "NaN vs 0.5";
    EXPECT_EQ(compare_one(got, want, view, 0.5, kNaN, tol).mismatches, 1) << "0.5 vs NaN";
    EXPECT_EQ(compare_one(got, want, view, kNaN, kInf, tol).mismatches, 1) << "NaN vs inf";
    EXPECT_EQ(compare_one(got, want, view, kInf, kNaN, tol).mismatches, 1) << "inf vs NaN";
    EXPECT_TRUE(compare_one(got, want, view, kInf, kInf, tol).agree()) << "inf vs inf";
    EXPECT_TRUE(compare_one(got, want, view, -kInf, -kInf, tol).agree()) << "-inf vs -inf";
    EXPECT_EQ(compare_one(got, want, view, kInf, -kInf, tol).mismatches, 1) << "inf vs -inf";
    EXPECT_EQ(compare_one(got, want, view, -kInf, kInf, tol).mismatches, 1) << "-inf vs inf";
    EXPECT_EQ(compare_one(got, want, view, kInf, 0.5, tol).mismatches, 1) << "inf vs 0.5";
    EXPECT_EQ(compare_one(got, want, view, 0.5, kInf, tol).mismatches, 1) << "0.5 vs inf";
    EXPECT_EQ(compare_one(got, want, view, -kInf, 0.5, tol).mismatches, 1) << "-inf vs 0.5";
    EXPECT_EQ(compare_one(got, want, view, 0.5, -kInf, tol).mismatches, 1) << "0.5 vs -inf";
  }
}

TEST_F(Compare, SpecialValueMismatchIsReportedWithItsValues) {
  const Comparison c = compare_one(got, want, view, kNaN, 0.5, Tolerance{1e-5, 0.0});
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->seq, 2);
  EXPECT_EQ(c.first->row_in_seq, 2);
  EXPECT_EQ(c.first->row, 4);
  EXPECT_EQ(c.first->head, 1);
  EXPECT_EQ(c.first->col, 6);
  EXPECT_TRUE(std::isnan(c.first->got));
  EXPECT_EQ(c.first->want, 0.5);
  // Errors with a special value are not finite and stay out of the maxima.
  EXPECT_EQ(c.max_abs_err, 0.0);
  EXPECT_EQ(c.max_rel_err, 0.0);
  const Comparison inf = compare_one(got, want, view, 0.5, -kInf, Tolerance{1e-5, 0.0});
  EXPECT_EQ(inf.max_abs_err, 0.0);
  EXPECT_EQ(inf.max_rel_err, 0.0);
}

TEST_F(Compare, FirstMismatchIsFirstInRowMajorOrder) {
  // Planted in reverse order of position: (q row 4, head 0, col 0), (row 2, head 3, col 7),
  // (row 1, head 2, col 1), (row 1, head 1, col 6). The first in row-major order is
  // q row 1 (sequence 0, row 1), head 1, column 6.
  for (const int64_t i : {at(4, 0, 0), at(2, 3, 7), at(1, 2, 1), at(1, 1, 6)}) {
    got.set_float(i, want.float_at(i) + 0.5);
  }
  const Comparison c = compare_outputs(got, want, view, Tolerance{1e-3, 0.0});
  EXPECT_EQ(c.mismatches, 4);
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->seq, 0);
  EXPECT_EQ(c.first->row_in_seq, 1);
  EXPECT_EQ(c.first->row, 1);
  EXPECT_EQ(c.first->head, 1);
  EXPECT_EQ(c.first->col, 6);
  EXPECT_NE(describe_mismatch(c).find("; 4 of 160 elements differ"), std::string::npos)
      << describe_mismatch(c);

  // Within one row and head, the lower column comes first; a lower head beats a lower column.
  Tensor g2 = want;
  g2.set_float(at(3, 2, 1), 9.0);
  g2.set_float(at(3, 1, 7), 9.0);
  g2.set_float(at(3, 1, 3), 9.0);
  const Comparison c2 = compare_outputs(g2, want, view, Tolerance{1e-3, 0.0});
  ASSERT_TRUE(c2.first.has_value());
  EXPECT_EQ(c2.first->seq, 2);
  EXPECT_EQ(c2.first->row_in_seq, 1);
  EXPECT_EQ(c2.first->head, 1);
  EXPECT_EQ(c2.first->col, 3);
  EXPECT_EQ(c2.mismatches, 3);
}

TEST_F(Compare, MaxErrorsOverFiniteElements) {
  // Finite errors: 0.25 against want 0.5 (rel 0.5), 0.125 against want -0.0625 (rel 2),
  // 1.0 against want 0 (not in max_rel_err: want is zero). Special values elsewhere:
  // NaN vs 1, inf vs 1, NaN vs NaN: none may enter either maximum.
  const auto put = [&](int64_t i, double g, double w) {
    got.set_float(i, g);
    want.set_float(i, w);
  };
  put(at(0, 0, 1), 0.75, 0.5);
  put(at(2, 1, 2), 0.0625, -0.0625);
  put(at(4, 3, 3), 1.0, 0.0);
  put(at(1, 3, 0), kNaN, 1.0);
  put(at(3, 0, 0), kInf, 1.0);
  put(at(3, 0, 1), kNaN, kNaN);
  const Comparison c = compare_outputs(got, want, view, Tolerance{1e-3, 0.0});
  EXPECT_EQ(c.max_abs_err, 1.0);
  EXPECT_EQ(c.max_rel_err, 2.0);
  EXPECT_EQ(c.mismatches, 5);  // all but NaN vs NaN
  EXPECT_EQ(c.compared, kDefined);
  // Errors within the tolerance count towards the maxima too.
  Tensor g2 = want;
  g2.set_float(at(0, 0, 1), 0.5 + 1.0 / 1024);
  const Comparison within = compare_outputs(g2, want, view, Tolerance{1e-2, 0.0});
  EXPECT_TRUE(within.agree());
  EXPECT_EQ(within.max_abs_err, 1.0 / 1024);
  EXPECT_EQ(within.max_rel_err, 1.0 / 512);
}

TEST_F(Compare, BudgetUsedIsTheWorstErrorOverItsAllowance) {
  // atol 2^-10, rtol 2^-4: an error of 2^-10 at want 0 uses 1 budget (allowed 2^-10);
  // 2^-6 at want 1 uses 2^-6 / (2^-10 + 2^-4) = 0.2424...; a NaN elsewhere is no finite error.
  const Tolerance tol{std::ldexp(1.0, -10), std::ldexp(1.0, -4)};
  want.set_float(at(0, 0, 0), 1.0);
  got.set_float(at(0, 0, 0), 1.0 + std::ldexp(1.0, -6));
  got.set_float(at(1, 1, 1), kNaN);
  const Comparison one = compare_outputs(got, want, view, tol);
  EXPECT_DOUBLE_EQ(one.max_budget_used, std::ldexp(1.0, -6) / (std::ldexp(1.0, -10) + std::ldexp(1.0, -4)));
  want.set_float(at(2, 0, 0), 0.0);
  got.set_float(at(2, 0, 0), std::ldexp(1.0, -10));
  EXPECT_DOUBLE_EQ(compare_outputs(got, want, view, tol).max_budget_used, 1.0);
  // Zero tolerance: an exact match uses nothing, any finite error is infinitely over.
  EXPECT_EQ(compare_outputs(want, want, view, Tolerance{}).max_budget_used, 0.0);
  EXPECT_EQ(compare_outputs(got, want, view, Tolerance{}).max_budget_used, kInf);
}

TEST(CompareBFloat16, BFloat16Tensors) {
  const Inputs in = testing::build_inputs(spec(DType::kBFloat16));
  const PagedKvView view = kv_view(in);
  const Tensor want = filled(in);
  Tensor got = filled(in);
  ASSERT_EQ(want.dtype(), DType::kBFloat16);
  const Tolerance tol = tolerance_for(DType::kBFloat16, DType::kBFloat16, 1.0, 5);
  const Comparison same = compare_outputs(got, want, view, tol);
  EXPECT_TRUE(same.agree());
  EXPECT_EQ(same.compared, kDefined);

  // Undefined rows ignored in bfloat16 too.
  got.set_float(at(7, 0, 0), kNaN);
  got.set_float(at(15, 3, 7), kInf);
  EXPECT_TRUE(compare_outputs(got, want, view, tol).agree());

  // One bfloat16 ulp at 1.0 is 2^-7: with atol 0, rtol 2^-7 allows exactly it; rtol 2^-8
  // does not.
  Tensor w1 = want;
  Tensor g1 = got;
  const int64_t i = at(2, 0, 7);  // sequence 2, row 0, head 0, column 7
  w1.set_float(i, 1.0);
  g1.set_float(i, 1.0 + 0.0078125);
  EXPECT_EQ(g1.float_at(i), 1.0078125);
  EXPECT_TRUE(compare_outputs(g1, w1, view, Tolerance{0.0, 0.0078125}).agree());
  const Comparison c = compare_outputs(g1, w1, view, Tolerance{0.0, 0.00390625});
  EXPECT_EQ(c.mismatches, 1);
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->seq, 2);
  EXPECT_EQ(c.first->row_in_seq, 0);
  EXPECT_EQ(c.first->row, 2);
  EXPECT_EQ(c.first->head, 0);
  EXPECT_EQ(c.first->col, 7);
  EXPECT_EQ(c.first->got, 1.0078125);
  EXPECT_EQ(c.first->want, 1.0);
  EXPECT_EQ(c.first->allowed, 0.00390625);
  EXPECT_EQ(c.max_abs_err, 0.0078125);
  EXPECT_EQ(c.max_rel_err, 0.0078125);
  EXPECT_EQ(describe_mismatch(c),
            "sequence 2, row 0 (q row 2), head 0, column 7: got 1.0078125, want 1.0, allowed "
            "difference 0.00390625; 1 of 160 elements differ");

  // Special values in bfloat16.
  Tensor g2 = want;
  Tensor w2 = want;
  g2.set_float(i, kNaN);
  w2.set_float(i, kNaN);
  EXPECT_TRUE(compare_outputs(g2, w2, view, tol).agree());
  g2.set_float(i, kInf);
  w2.set_float(i, -kInf);
  EXPECT_EQ(compare_outputs(g2, w2, view, tol).mismatches, 1);
}

TEST(CompareFloat32VsBFloat16, MixedDtypesCompareByValue) {
  // got float32 against want bfloat16 of the same values: read as doubles, they agree.
  const Inputs in = testing::build_inputs(spec());
  Inputs bf = testing::build_inputs(spec(DType::kBFloat16));
  const Comparison c = compare_outputs(filled(in), filled(bf), kv_view(in), Tolerance{});
  EXPECT_TRUE(c.agree());
  EXPECT_EQ(c.compared, kDefined);
}

// ---- Hand-built reference results -------------------------------------------------------

constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16, kE4M3 = DType::kFloat8E4M3FN;
constexpr double kU = 0x1p-24;                // u, float32's unit roundoff
constexpr double kKappa = 1.0 + 0x1p-7;       // the MXU's partial products, item F (a)
constexpr double kExp = 0x1p-21;              // kExpError, eight float32 ulps
static_assert(kExpError == kExp, "the hand values below assume kExpError = 2^-21");

// One sequence (q_len, kv_len) over pages of page_size, head_dim 2, one head (two for e4m3fn
// KV, which needs them to fill a 32-bit word): q is [16, heads, 2], row i of one head covers
// elements 2i and 2i + 1.
Inputs one_row(DType q_dtype, DType kv_dtype, int32_t q_len = 1, int32_t kv_len = 10,
               int64_t page_size = 4) {
  testing::InputsSpec spec;
  spec.seqs = {{q_len, kv_len}};
  spec.head_dim = 2;
  spec.page_size = page_size;
  spec.pages_per_seq = std::max<int64_t>(4, (kv_len + page_size - 1) / page_size);
  spec.q_dtype = q_dtype;
  spec.kv_dtype = kv_dtype;
  spec.num_kv_heads = kv_dtype == DType::kFloat8E4M3FN ? 2 : 1;
  spec.num_q_heads = spec.num_kv_heads;
  return testing::build_inputs(spec);
}

// A kernel-semantics result for `in` (max_kv_len 10): spread starts with the given elements
// (0 elsewhere), every (row, head) has B_max row_logit_max, and the float32 sums of item F
// are 0 everywhere (row_terms 0: no row has weights, so float32_terms is 0 until set_row
// gives one some).
ReferenceResult kernel_result(const Inputs& in, double max_v, std::vector<double> spread,
                              double row_logit_max) {
  ReferenceResult r;
  r.semantics = Semantics::kKernel;
  r.max_abs_v_eff = max_v;
  r.max_kv_len = 10;
  r.spread = std::move(spread);
  r.spread.resize(static_cast<size_t>(in.q.numel()), 0.0);
  const auto rows = static_cast<size_t>(in.q.dim(0) * in.q.dim(1));
  r.row_logit_max.assign(rows, row_logit_max);
  r.zero_sums(static_cast<size_t>(in.q.numel()), rows);
  return r;
}

// The same in the reference semantics: no spread, no row_logit_max; B' = max_logit_abs_sum.
ReferenceResult reference_result(const Inputs& in, double max_v, double max_logit_abs_sum) {
  ReferenceResult r = kernel_result(in, max_v, {}, 0.0);
  r.semantics = Semantics::kReference;
  r.spread.clear();
  r.row_logit_max.clear();
  r.max_logit_abs_sum = max_logit_abs_sum;
  return r;
}

// Row `row` (q row * Hq + head) of r gets item F's sums: n weights > 0, chain C, `blocks`
// page blocks, and per column c (two) X_c, Y_c and V_c.
void set_row(ReferenceResult& r, size_t row, double n, double chain, double blocks,
             std::vector<double> x, std::vector<double> y, std::vector<double> v) {
  r.row_terms[row] = n;
  r.row_chain[row] = chain;
  r.row_blocks[row] = blocks;
  for (size_t c = 0; c < 2; ++c) {
    r.abs_weighted[2 * row + c] = x[c];
    r.deviation[2 * row + c] = y[c];
    r.column_max[2 * row + c] = v[c];
  }
}

TEST(Tolerance, CaseToleranceGrowsWithLogitMagnitude) {
  // tolerance_for_case = tolerance_for + 2 * 2^-24 * max_logit_abs_sum * M, and item F per
  // element. float32, M = 4, kv_len 10, bound 2^20: base atol 11 * 2^-126 (no 1e-5 M any
  // more), plus 2 * 2^-24 * 2^20 * 4 = 0.5. No row has weights here (row_terms 0), so the
  // element term is 0 everywhere (Float32Terms below gives rows weights).
  const Inputs in = one_row(kF32, kF32);
  const ReferenceResult r = reference_result(in, 4.0, std::ldexp(1.0, 20));
  const Tolerance t = tolerance_for_case(in, Params{}, r);
  EXPECT_DOUBLE_EQ(t.atol, 0.5 + 11 * std::ldexp(1.0, -126));
  EXPECT_EQ(t.rtol, 0.0);
  EXPECT_EQ(t.value_scale, 4.0);
  ASSERT_TRUE(t.element_atol);
  EXPECT_EQ(t.element_atol->size(), static_cast<size_t>(in.q.numel()));
  EXPECT_EQ(t.max_element_atol(), 0.0);
  // With v_scale, V_eff takes q's dtype (float32 here too): same numbers.
  Params scaled;
  scaled.v_scale = 2.0;
  EXPECT_DOUBLE_EQ(tolerance_for_case(in, scaled, r).atol, 0.5 + 11 * std::ldexp(1.0, -126));
  // Twice the bound, twice the logit term: 1.0.
  EXPECT_DOUBLE_EQ(tolerance_for_case(in, Params{}, reference_result(in, 4.0, std::ldexp(1.0, 21))).atol,
                   1.0 + 11 * std::ldexp(1.0, -126));
}

// ---- Item F, float32_terms, worked by hand (the formula in the comment at the top) ------

TEST(Float32Terms, OneTokenHasNoChain) {
  // n = 1: the one weight is 1 and sits at depth n - 1 = 0, C = 0; kv_len 1, one page
  // block, R = 0. bfloat16 V: no MXU split (P' = 0, kappa = 1), D = 1 + 0 + 0 + 1 = 2.
  // o = v, so Y = 0, and X = V_c = |v|; spread 0, B_max 0: the weights add nothing.
  // F = u [(V_c 0 + X (0 + 1 + 0)) + X (0 + 0 + 1)] / (1 - 4u) = 2 u X / (1 - 4u):
  // column 0, v = 3: 6u / (1 - 4u); column 1, v = -0.5: u / (1 - 4u).
  const Inputs in = one_row(kF32, kBF16, 1, 1);
  ReferenceResult r = kernel_result(in, 3.0, {}, 0.0);
  set_row(r, 0, 1, 0, 1, {3.0, 0.5}, {0.0, 0.0}, {3.0, 0.5});
  const std::vector<double> f = float32_terms(in, Params{}, r);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_DOUBLE_EQ(f[0], 6 * kU / (1 - 4 * kU));
  EXPECT_DOUBLE_EQ(f[1], kU / (1 - 4 * kU));
  for (size_t e = 2; e < f.size(); ++e) EXPECT_EQ(f[e], 0.0) << e;  // rows of no sequence
}

TEST(Float32Terms, EqualWeightsOverFourTokens) {
  // n = 4, p_t = 1/4: depths n - 1, n - 1, n - 2, n - 3 = 3, 3, 2, 1, so
  // C = (3 + 3 + 2 + 1) / 4 = 9/4 (= (n + 1)/2 - 1/n = 5/2 - 1/4). kv_len 4 in one page of
  // 4: R = 0. bfloat16 V: P' = 0, kappa = 1; D = 4 + 0 + 0 + 1 = 5, 1 - 2Du = 1 - 10u.
  // Logits 0: spread 0, B_max 0, so the weights add only kExpError Y / (1 - 2 kExpError).
  // Column 0, v = (1, -1, 1, -1): o = 0, X = 1, Y = 1, V_c = 1:
  //   F = u (9/4 + 1 + 9/4 + 1) / (1 - 10u) + kExp / (1 - 2 kExp) = 6.5u / (1 - 10u) + ...
  // Column 1, v = (2, 2, 2, 2): X = 2, Y = 0, V_c = 2:
  //   F = u (2 9/4 + 2 + 2 (9/4 + 1)) / (1 - 10u) = 13u / (1 - 10u).
  const Inputs in = one_row(kF32, kBF16, 1, 4, 4);
  ReferenceResult r = kernel_result(in, 2.0, {}, 0.0);
  set_row(r, 0, 4, 9.0 / 4, 1, {1.0, 2.0}, {1.0, 0.0}, {1.0, 2.0});
  const std::vector<double> f = float32_terms(in, Params{}, r);
  EXPECT_DOUBLE_EQ(f[0], 6.5 * kU / (1 - 10 * kU) + kExp / (1 - 2 * kExp));
  EXPECT_DOUBLE_EQ(f[1], 13 * kU / (1 - 10 * kU));
}

TEST(Float32Terms, OneDominantWeightSitsDeepest) {
  // n = 4, p = (1 - 3d, d, d, d) with d = 2^-20: C = 3 (1 - 3d) + 3d + 2d + d = 3 - 3d,
  // nearly n - 1 = 3 (the chain's deepest leaf), against 9/4 for equal weights. Row 0 has
  // the dominant weight, row 1 equal weights, both over v = 1 in column 0 (X = 1, Y = 0,
  // V_c = 1) and 0 in column 1; D = 5 as above:
  //   row 0: u (C + 1 + C + 1) / (1 - 10u) = u (8 - 6d) / (1 - 10u),
  //   row 1: u (9/4 + 1 + 9/4 + 1) / (1 - 10u) = 6.5u / (1 - 10u).
  const double d = std::ldexp(1.0, -20);
  const Inputs in = one_row(kF32, kBF16, 2, 4, 4);
  ReferenceResult r = kernel_result(in, 1.0, {}, 0.0);
  set_row(r, 0, 4, 3 - 3 * d, 1, {1.0, 0.0}, {0.0, 0.0}, {1.0, 0.0});
  set_row(r, 1, 4, 9.0 / 4, 1, {1.0, 0.0}, {0.0, 0.0}, {1.0, 0.0});
  const std::vector<double> f = float32_terms(in, Params{}, r);
  EXPECT_DOUBLE_EQ(f[0], kU * (8 - 6 * d) / (1 - 10 * kU));
  EXPECT_DOUBLE_EQ(f[2], 6.5 * kU / (1 - 10 * kU));
  EXPECT_GT(f[0], f[2]);
  EXPECT_EQ(f[1], 0.0);
  EXPECT_EQ(f[3], 0.0);
}

TEST(Float32Terms, RescalesBetweenPageBlocks) {
  // n = 2, p = (1/2, 1/2), v = (1, -1) in column 0: C = 1/2 + 1/2 = 1, o = 0, X = Y = V_c = 1;
  // bfloat16 V (P' = 0), spread 0, B_max 0. Rows with R = row_blocks - 1 = 0, 1, 2 (kv_len 2
  // over pages of 2, over pages of 1; kv_len 10 over pages of 4: ceil(10/4) = 3 blocks):
  //   R = 0: D = 3: u (1 + 1 + (1 + 0 + 1)) / (1 - 6u) + kExp / (1 - 2 kExp)
  //        = 4u / (1 - 6u) + kExp / (1 - 2 kExp);
  //   R = 1: D = 4: u (1 + 2 + (1 + 1 + 1)) / (1 - 8u) + 2 kExp / (1 - 4 kExp)
  //        = 6u / (1 - 8u) + 2 kExp / (1 - 2^-20);
  //   R = 2: D = 5: u (1 + 3 + (1 + 2 + 1)) / (1 - 10u) + 3 kExp / (1 - 6 kExp)
  //        = 8u / (1 - 10u) + 3 kExp / (1 - 6 kExp).
  const double r0 = 4 * kU / (1 - 6 * kU) + kExp / (1 - 2 * kExp);
  const double r1 = 6 * kU / (1 - 8 * kU) + 2 * kExp / (1 - 4 * kExp);
  const double r2 = 8 * kU / (1 - 10 * kU) + 3 * kExp / (1 - 6 * kExp);
  const Inputs in = one_row(kF32, kBF16, 3, 10, 4);
  ReferenceResult r = kernel_result(in, 1.0, {}, 0.0);
  for (size_t row = 0; row < 3; ++row) {
    set_row(r, row, 2, 1, static_cast<double>(row + 1), {1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0});
  }
  const std::vector<double> f = float32_terms(in, Params{}, r);
  EXPECT_DOUBLE_EQ(f[0], r0);
  EXPECT_DOUBLE_EQ(f[2], r1);
  EXPECT_DOUBLE_EQ(f[4], r2);
  EXPECT_LT(f[0], f[2]);
  EXPECT_LT(f[2], f[4]);

  // The same rows through the dense reference, where the page size sets row_blocks: q = 0
  // (logits 0, p = 1/2 exactly), V column 0 = (1, -1) (bfloat16, exact), column 1 = 0.
  for (const int64_t page_size : {2, 1}) {
    SCOPED_TRACE("page_size " + std::to_string(page_size));
    Inputs two = one_row(kF32, kBF16, 1, 2, page_size);
    // Token t is slot t of the consecutive pages 0, 1, ...: its V row starts at (2t + 1) * 2.
    two.kv_pages.set_float((2 * 0 + 1) * 2, 1.0);
    two.kv_pages.set_float((2 * 1 + 1) * 2, -1.0);
    const std::vector<double> g = float32_terms(two, Params{}, dense_reference(two, Params{}));
    EXPECT_DOUBLE_EQ(g[0], page_size == 2 ? r0 : r1);
    EXPECT_EQ(g[1], 0.0);
  }
}

TEST(Float32Terms, MxuSplitsFloat32V) {
  // The n = 2 row of RescalesBetweenPageBlocks (C = 1, X = Y = V_c = 1, R = 0), kernel
  // semantics, W = kExp / (1 - 2 kExp) from the weights. float32 V: the MXU sums P partial
  // products per term, P' = P - 1 more roundings, each within kappa = 1 + 2^-7 of |w v|:
  //   six passes:   P' = 5, D = 8:  u (kappa (1 + 1 (1 + 5)) + 2) / (1 - 16u) + W
  //                                 = u (7 kappa + 2) / (1 - 16u) + W;
  //   three passes: P' = 2, D = 5:  u (kappa (1 + 3) + 2) / (1 - 10u) + W
  //                                 = u (4 kappa + 2) / (1 - 10u) + W;
  //   one pass:     no split (V and p rounded to bfloat16 up front: the MXU term, not this
  //                 one, pays for it), D = 3: u (1 + 1 + 2) / (1 - 6u) + W = 4u / (1 - 6u) + W.
  // bfloat16 V (any passes) and the reference semantics (no MXU) get the one-pass value.
  const double w = kExp / (1 - 2 * kExp);
  const double six = kU * (7 * kKappa + 2) / (1 - 16 * kU) + w;
  const double three = kU * (4 * kKappa + 2) / (1 - 10 * kU) + w;
  const double plain = 4 * kU / (1 - 6 * kU) + w;
  const auto first = [](const Inputs& in, const Params& p, DotPasses passes, bool kernel) {
    ReferenceResult r = kernel ? kernel_result(in, 1.0, {}, 0.0) : reference_result(in, 1.0, 0.0);
    set_row(r, 0, 2, 1, 1, {1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0});
    return float32_terms(in, p, r, passes)[0];
  };
  const Inputs f32 = one_row(kF32, kF32, 1, 2, 2);
  EXPECT_DOUBLE_EQ(first(f32, Params{}, DotPasses::kSix, true), six);
  EXPECT_DOUBLE_EQ(first(f32, Params{}, DotPasses::kThree, true), three);
  EXPECT_DOUBLE_EQ(first(f32, Params{}, DotPasses::kOne, true), plain);
  EXPECT_DOUBLE_EQ(first(f32, Params{}, DotPasses::kSix, false), plain);
  const Inputs bf16 = one_row(kF32, kBF16, 1, 2, 2);
  for (const DotPasses passes : {DotPasses::kSix, DotPasses::kThree, DotPasses::kOne}) {
    EXPECT_DOUBLE_EQ(first(bf16, Params{}, passes, true), plain);
  }
  // With v_scale, V_eff takes q's dtype: float32 under a float32 q (split), bfloat16 under
  // a bfloat16 q (no split), over the same e4m3fn KV.
  Params scaled;
  scaled.v_scale = 0.5;
  EXPECT_DOUBLE_EQ(first(one_row(kF32, kE4M3, 1, 2, 2), scaled, DotPasses::kSix, true), six);
  EXPECT_DOUBLE_EQ(first(one_row(kBF16, kE4M3, 1, 2, 2), scaled, DotPasses::kSix, true), plain);
  EXPECT_DOUBLE_EQ(first(one_row(kF32, kE4M3, 1, 2, 2), Params{}, DotPasses::kSix, true), plain);
}

TEST(Float32Terms, ReferenceSemanticsHasNoSpread) {
  // The n = 2 row again (C = 1, R = 0, bfloat16 V: sums 4u / (1 - 6u)) in column 0, and
  // column 1 with X = Y = V_c = 0.
  // Reference semantics: B = B' = max_logit_abs_sum + |soft_cap| = 1016 + 8 = 1024 for every
  // row, and the subtraction s_t - m costs 2 u B' Y (no spread):
  //   eta = kExp + 4u 1024 = kExp + 2^-12,
  //   weights = (kExp Y + 2u 1024 Y + 2u 1024 Y) / (1 - 2 eta) = (kExp + 2^-12) / (1 - 2 kExp - 2^-11);
  //   column 1 (Y = 0): 0.
  const Inputs in = one_row(kF32, kBF16, 1, 2, 2);
  Params p;
  p.soft_cap = 8.0;
  ReferenceResult ref = reference_result(in, 1.0, 1016.0);
  set_row(ref, 0, 2, 1, 1, {1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0});
  const double want0 = 4 * kU / (1 - 6 * kU) + (kExp + 0x1p-12) / (1 - 2 * kExp - 0x1p-11);
  const std::vector<double> f = float32_terms(in, p, ref);
  EXPECT_DOUBLE_EQ(f[0], want0);
  EXPECT_EQ(f[1], 0.0);
  // The passes play no part in the reference semantics.
  EXPECT_EQ(float32_terms(in, p, ref, DotPasses::kOne), f);
  // tolerance_for_case puts the same terms into element_atol.
  const Tolerance t = tolerance_for_case(in, p, ref);
  ASSERT_TRUE(t.element_atol);
  EXPECT_DOUBLE_EQ((*t.element_atol)[0], want0);

  // Kernel semantics, the same row with spread (5, 5) and B_max 8 (the soft cap is in B_t
  // already): the subtraction costs u spread, eta = kExp + 4u 8 = kExp + 2^-19:
  //   column 0: (kExp + 5u + 2u 8) / (1 - 2 kExp - 2^-18) = (kExp + 21u) / (1 - 2 kExp - 2^-18);
  //   column 1: 5u / (1 - 2 kExp - 2^-18) (X = Y = 0 but the spread is there).
  ReferenceResult ker = kernel_result(in, 1.0, {5.0, 5.0}, 8.0);
  set_row(ker, 0, 2, 1, 1, {1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0});
  const std::vector<double> k = float32_terms(in, p, ker);
  EXPECT_DOUBLE_EQ(k[0], 4 * kU / (1 - 6 * kU) + (kExp + 21 * kU) / (1 - 2 * kExp - 0x1p-18));
  EXPECT_DOUBLE_EQ(k[1], 5 * kU / (1 - 2 * kExp - 0x1p-18));
}

TEST(Float32Terms, RowsThatCannotBeBoundedGetTwiceMaxV) {
  // M = 1: the cut is 2M = 2. bfloat16 V, R = 0, X = V_c = 1, Y = 0 in column 0.
  //   row 0: n = 2^23: D = 2^23 + 1, 1 - 2Du = 1 - (2^24 + 2) 2^-24 < 0: Phi infinite -> 2.
  //   row 1: n = 2^23 - 2, C = n - 1: D = 2^23 - 1, 1 - 2Du = 2^-23, Phi = 2^23:
  //          2^23 u (C + 1 + C + 1) = C + 1 = 2^23 - 2, finite but past 2 -> 2.
  //   row 2: n = 1 but B_max = 2^30: eta = kExp + 4u 2^30 = kExp + 2^8 > 1/2, Phi_w
  //          infinite -> 2 (even with Y = 0 and spread 0).
  //   row 3: n = 1, B_max 0: 2u / (1 - 4u), as in OneTokenHasNoChain; the cut is per row.
  const Inputs in = one_row(kF32, kBF16, 4, 10, 4);
  ReferenceResult r = kernel_result(in, 1.0, {}, 0.0);
  const double big = std::ldexp(1.0, 23);
  set_row(r, 0, big, big - 1, 1, {1.0, 0.0}, {0.0, 0.0}, {1.0, 0.0});
  set_row(r, 1, big - 2, big - 3, 1, {1.0, 0.0}, {0.0, 0.0}, {1.0, 0.0});
  set_row(r, 2, 1, 0, 1, {1.0, 0.0}, {0.0, 0.0}, {1.0, 0.0});
  r.row_logit_max[2] = std::ldexp(1.0, 30);
  set_row(r, 3, 1, 0, 1, {1.0, 0.0}, {0.0, 0.0}, {1.0, 0.0});
  const std::vector<double> f = float32_terms(in, Params{}, r);
  EXPECT_EQ(f[0], 2.0);
  EXPECT_EQ(f[1], 2.0);  // column 1 of an unbounded row too: its Phi is infinite
  EXPECT_EQ(f[2], 2.0);
  EXPECT_EQ(f[4], 2.0);
  EXPECT_DOUBLE_EQ(f[6], 2 * kU / (1 - 4 * kU));
  EXPECT_EQ(f[7], 0.0);
  // M = 0.25: the same rows stop at 0.5.
  r.max_abs_v_eff = 0.25;
  EXPECT_EQ(float32_terms(in, Params{}, r)[2], 0.5);
}

TEST(Float32Terms, RowsOfNoSequenceGetZero) {
  // A row without weights (row_terms 0, as the reference leaves every row no sequence
  // defines) gets 0 whatever else it holds.
  const Inputs in = one_row(kF32, kBF16, 1, 10, 4);
  ReferenceResult r = kernel_result(in, 1.0, {}, 0.0);
  set_row(r, 5, 0, 3, 3, {1.0, 1.0}, {1.0, 1.0}, {1.0, 1.0});
  for (const double x : float32_terms(in, Params{}, r)) EXPECT_EQ(x, 0.0);

  // Through the dense reference, on random values: q_len 2 over kv_len 10, rows 2..6 past
  // cu_q_lens (NaN in q) get exactly 0, every element of rows 0 and 1 something positive.
  testing::RandomInputsSpec spec;
  spec.seqs = {{2, 10}};
  const Inputs rin = testing::random_inputs(spec);
  const int64_t defined = 2 * rin.q.dim(1) * rin.q.dim(2);
  for (const Semantics semantics : {Semantics::kKernel, Semantics::kReference}) {
    SCOPED_TRACE(std::string(semantics_name(semantics)));
    const std::vector<double> f = float32_terms(rin, Params{}, dense_reference(rin, Params{}, semantics));
    ASSERT_EQ(static_cast<int64_t>(f.size()), rin.q.numel());
    for (int64_t e = 0; e < rin.q.numel(); ++e) {
      if (e < defined) {
        EXPECT_GT(f[static_cast<size_t>(e)], 0.0) << e;
        EXPECT_LT(f[static_cast<size_t>(e)], 1e-4) << e;
      } else {
        EXPECT_EQ(f[static_cast<size_t>(e)], 0.0) << e;
      }
    }
  }
}

TEST(Float32Terms, NeedsTheSums) {
  const Inputs in = one_row(kF32, kF32);
  ReferenceResult none;
  none.semantics = Semantics::kReference;
  EXPECT_THROW(float32_terms(in, Params{}, none), std::logic_error);
  ReferenceResult no_spread = kernel_result(in, 1.0, {}, 0.0);
  no_spread.spread.clear();
  EXPECT_THROW(float32_terms(in, Params{}, no_spread), std::logic_error);
}

// ---- The kernel semantics' tolerance (kernel_tolerance), worked by hand -----------------

TEST(KernelTolerance, Float32PaysTheMxuPassesOnBothOperands) {
  // p.V with float32 V: both operands float32, six bfloat16 passes drop up to 2^-22 of each
  // |p_t v_tc|: element_atol[e] = e_pv X_c (no longer 2^-22 M in atol). Row 0 has no weights
  // here (row_terms 0) so that item F is 0 and the MXU term shows alone: X = (3, 0.5) gives
  // 3 * 2^-22 and 2^-23. atol is the flushed subnormals' 11 * 2^-126 alone (no 1e-5 M); rtol 0.
  const Inputs in = one_row(kF32, kF32);
  ReferenceResult r = kernel_result(in, 4.0, {0.0, 0.0}, 0.0);
  r.abs_weighted[0] = 3.0;
  r.abs_weighted[1] = 0.5;
  const Tolerance t = tolerance_for_case(in, Params{}, r);
  EXPECT_EQ(t.atol, 11 * std::ldexp(1.0, -126));
  EXPECT_EQ(t.rtol, 0.0);
  EXPECT_EQ(t.value_scale, 4.0);
  ASSERT_TRUE(t.element_atol);
  EXPECT_EQ((*t.element_atol)[0], 3 * std::ldexp(1.0, -22));
  EXPECT_EQ((*t.element_atol)[1], std::ldexp(1.0, -23));
  EXPECT_EQ(t.max_element_atol(), 3 * std::ldexp(1.0, -22));
  // M itself plays no part (below the 2M cut): M = 400 gives the same.
  r.max_abs_v_eff = 400.0;
  EXPECT_EQ((*tolerance_for_case(in, Params{}, r).element_atol)[0], 3 * std::ldexp(1.0, -22));
  // Fewer passes (r allowing their logit errors, 2^-21 + 2^-7 + 2^-14 for one pass):
  // three drop 2^-14 of each product, one 2^-7 + 2^-14.
  r.most_logit_error = std::ldexp(1.0, -21) + std::ldexp(1.0, -7) + std::ldexp(1.0, -14);
  const Tolerance three = tolerance_for_case(in, Params{}, r, DotPasses::kThree);
  EXPECT_EQ((*three.element_atol)[0], 3 * std::ldexp(1.0, -14));
  EXPECT_EQ((*three.element_atol)[1], std::ldexp(1.0, -15));
  const Tolerance one = tolerance_for_case(in, Params{}, r, DotPasses::kOne);
  EXPECT_EQ((*one.element_atol)[0], 3 * (std::ldexp(1.0, -7) + std::ldexp(1.0, -14)));
  EXPECT_EQ((*one.element_atol)[1], std::ldexp(1.0, -8) + std::ldexp(1.0, -15));
  EXPECT_EQ(one.atol, 11 * std::ldexp(1.0, -126));
  // bfloat16 V under a float32 q: p.V has one exact operand: 0 with six passes, 2^-16 X with
  // three, 2^-8 X with one.
  const Inputs bf = one_row(kF32, kBF16);
  ReferenceResult rb = kernel_result(bf, 4.0, {0.0, 0.0}, 0.0);
  rb.abs_weighted[0] = 3.0;
  rb.most_logit_error = r.most_logit_error;
  EXPECT_EQ((*tolerance_for_case(bf, Params{}, rb).element_atol)[0], 0.0);
  EXPECT_EQ((*tolerance_for_case(bf, Params{}, rb, DotPasses::kThree).element_atol)[0],
            3 * std::ldexp(1.0, -16));
  EXPECT_EQ((*tolerance_for_case(bf, Params{}, rb, DotPasses::kOne).element_atol)[0],
            3 * std::ldexp(1.0, -8));
}

TEST(KernelTolerance, ElementAddsItemFTheMxuAndTheLogits) {
  // One token (n = 1, C = 0, R = 0), float32 q and KV, M = 4, six passes: item F with the
  // MXU's split (P' = 5, kappa = 1 + 2^-7, D = 1 + 0 + 5 + 1 = 7; Y = 0 and spread 0):
  //   F = u (kappa X (0 + 1 + 5) + X (0 + 0 + 1)) / (1 - 14u) = u X (6 kappa + 1) / (1 - 14u),
  // plus e_pv X = 2^-22 X, plus no logit term: column 0 (X = 3) and column 1 (X = 1).
  const Inputs in = one_row(kF32, kF32, 1, 1);
  ReferenceResult r = kernel_result(in, 4.0, {0.0, 0.0}, 0.0);
  set_row(r, 0, 1, 0, 1, {3.0, 1.0}, {0.0, 0.0}, {3.0, 1.0});
  const Tolerance t = tolerance_for_case(in, Params{}, r);
  EXPECT_DOUBLE_EQ((*t.element_atol)[0],
                   3 * kU * (6 * kKappa + 1) / (1 - 14 * kU) + 3 * std::ldexp(1.0, -22));
  EXPECT_DOUBLE_EQ((*t.element_atol)[1],
                   kU * (6 * kKappa + 1) / (1 - 14 * kU) + std::ldexp(1.0, -22));
  // One pass: no split (D = 2, F = 2uX / (1 - 4u)), e_pv = 2^-7 + 2^-14.
  r.most_logit_error = std::ldexp(1.0, -21) + std::ldexp(1.0, -7) + std::ldexp(1.0, -14);
  EXPECT_DOUBLE_EQ((*tolerance_for_case(in, Params{}, r, DotPasses::kOne).element_atol)[0],
                   6 * kU / (1 - 4 * kU) + 3 * (std::ldexp(1.0, -7) + std::ldexp(1.0, -14)));
  // The logit term adds on top: spread 2 in column 1 with B_max 0 (g = 1), e_qk = 2^-21 +
  // 2^-22 with six passes: 2 e_qk, and item F's u spread / (1 - 2 kExp) (eta = kExp).
  ReferenceResult s = kernel_result(in, 4.0, {0.0, 2.0}, 0.0);
  set_row(s, 0, 1, 0, 1, {3.0, 1.0}, {0.0, 0.0}, {3.0, 1.0});
  EXPECT_DOUBLE_EQ((*tolerance_for_case(in, Params{}, s).element_atol)[1],
                   kU * (6 * kKappa + 1) / (1 - 14 * kU) + 2 * kU / (1 - 2 * kExp) +
                       std::ldexp(1.0, -22) + 2 * (std::ldexp(1.0, -21) + std::ldexp(1.0, -22)));
}

TEST(KernelTolerance, Float8UnderBFloat16HasNoRoundedPTerm) {
  // bf16 q over e4m3fn KV: p.V has one float32 operand (p), which six passes multiply
  // exactly (no element term even where X > 0); one bf16 ulp rtol; atol the flushed
  // subnormals (kv_len + 1) 2^-126 and the bf16 smallest subnormal 2^-133, no M term at all.
  // No kv_len * 2^-9 term: at kv_len 8192 atol is 8193 * 2^-126 + 2^-133, tiny.
  const Inputs in = one_row(kBF16, kE4M3);
  ReferenceResult r = kernel_result(in, 2.0, {}, 0.0);
  r.abs_weighted[0] = 2.0;
  const Tolerance t = tolerance_for_case(in, Params{}, r);
  EXPECT_EQ(t.atol, 11 * std::ldexp(1.0, -126) + std::ldexp(1.0, -133));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
  EXPECT_EQ(t.max_element_atol(), 0.0);
  r.max_kv_len = 8192;
  r.max_abs_v_eff = 2000.0;
  EXPECT_EQ(tolerance_for_case(in, Params{}, r).atol,
            8193 * std::ldexp(1.0, -126) + std::ldexp(1.0, -133));
}

TEST(KernelTolerance, LogitTermFollowsEachElementsSpread) {
  // float32 q and K: e_qk = 2^-21 + 2^-22. Row B_max = 100: x = e_qk * 100, g = expm1(2x)/2x.
  // Element 0 spread 3 -> e_qk g 3; element 1 spread 0 -> nothing; both rows' bound under 2M.
  const Inputs in = one_row(DType::kFloat32, DType::kFloat32);
  const double e_qk = std::ldexp(1.0, -21) + std::ldexp(1.0, -22);
  const double x = e_qk * 100.0;
  const double g = std::expm1(2 * x) / (2 * x);
  const Tolerance t = tolerance_for_case(in, Params{}, kernel_result(in, 4.0, {3.0, 0.0}, 100.0));
  ASSERT_TRUE(t.element_atol);
  EXPECT_DOUBLE_EQ((*t.element_atol)[0], e_qk * g * 3.0);
  EXPECT_EQ((*t.element_atol)[1], 0.0);
  EXPECT_DOUBLE_EQ(t.allowed(0, -1.0), t.atol + e_qk * g * 3.0);
  EXPECT_EQ(t.allowed(1, -1.0), t.atol);
  // Huge logits: the bound stops at 2M = 8 (the outputs are averages of the same values).
  const Tolerance big = tolerance_for_case(in, Params{}, kernel_result(in, 4.0, {1e9, 1.0}, 1e9));
  EXPECT_EQ((*big.element_atol)[0], 8.0);
  EXPECT_EQ((*big.element_atol)[1], 8.0);
}

TEST(KernelTolerance, BFloat16OperandsMakeExactProducts) {
  // bf16 q and K: only the float32 accumulation, e_qk = 2^-21 (g = expm1(2e)/2e at B_max 1).
  const Inputs in = one_row(DType::kBFloat16, DType::kBFloat16);
  const Tolerance t = tolerance_for_case(in, Params{}, kernel_result(in, 1.0, {1.0, 2.0}, 1.0));
  const double e = std::ldexp(1.0, -21);
  const double g = std::expm1(2 * e) / (2 * e);
  EXPECT_DOUBLE_EQ((*t.element_atol)[1], 2.0 * e * g);
  // With k_scale, K_eff takes q's dtype: still bf16, still exact products.
  Params scaled;
  scaled.k_scale = 0.5;
  EXPECT_DOUBLE_EQ(
      (*tolerance_for_case(in, scaled, kernel_result(in, 1.0, {1.0, 2.0}, 1.0)).element_atol)[1],
      2.0 * e * g);
  // float32 q and float32 K (k_scale under a float32 q): 2^-22 more.
  const Inputs f32q = one_row(DType::kFloat32, DType::kFloat8E4M3FN);
  const double e32 = e + std::ldexp(1.0, -22);
  EXPECT_DOUBLE_EQ(
      (*tolerance_for_case(f32q, scaled, kernel_result(f32q, 1.0, {1.0, 2.0}, 1.0)).element_atol)[1],
      2.0 * e32 * std::expm1(2 * e32) / (2 * e32));
  // float32 q over float8 K without a scale: one operand exact, six passes exact, 2^-21 only.
  EXPECT_DOUBLE_EQ(
      (*tolerance_for_case(f32q, Params{}, kernel_result(f32q, 1.0, {1.0, 2.0}, 1.0)).element_atol)[1],
      2.0 * e * g);
}

TEST(KernelTolerance, ScaledMultipliesEveryAllowance) {
  Tolerance t{0.01, 0.5};
  t.element_atol = std::make_shared<std::vector<double>>(std::vector<double>{1.0, 2.0});
  const Tolerance twice = t.scaled(2.0);
  EXPECT_EQ(twice.atol, 0.02);
  EXPECT_EQ(twice.rtol, 1.0);
  EXPECT_EQ((*twice.element_atol)[1], 4.0);
  EXPECT_EQ(twice.max_element_atol(), 4.0);
}


// ---- The check's power in key weights (detectable_key_weight) ---------------------------

TEST(DetectableKeyWeight, InfiniteWithoutAValueScale) {
  EXPECT_EQ(detectable_key_weight(0.01, 0.5, 0.0, kF32), kInf);
  EXPECT_EQ(detectable_key_weight(0.01, 0.5, -1.0, kF32), kInf);
  EXPECT_EQ(detectable_key_weight(0.01, 0.5, kNaN, kBF16), kInf);
}

TEST(DetectableKeyWeight, AllowanceAndHalfAnUlpOverTheValueScale) {
  // w = (allowed + h) / M, h = 2^-prec (|want| + 2 allowed). allowed 2^-10, want 0.5, M = 2:
  //   float32 (prec 24): h = 2^-24 (2^-1 + 2^-9) = 2^-25 + 2^-33,
  //                      w = (2^-10 + 2^-25 + 2^-33) / 2 = 2^-11 + 2^-26 + 2^-34;
  //   bfloat16 (prec 8): h = 2^-8 (2^-1 + 2^-9) = 2^-9 + 2^-17,
  //                      w = (2^-10 + 2^-9 + 2^-17) / 2 = 2^-11 + 2^-10 + 2^-18;
  //   e4m3fn (prec 4):   h = 2^-4 (2^-1 + 2^-9) = 2^-5 + 2^-13,
  //                      w = (2^-10 + 2^-5 + 2^-13) / 2 = 2^-11 + 2^-6 + 2^-14.
  const double a = std::ldexp(1.0, -10);
  EXPECT_EQ(detectable_key_weight(a, 0.5, 2.0, kF32),
            std::ldexp(1.0, -11) + std::ldexp(1.0, -26) + std::ldexp(1.0, -34));
  EXPECT_EQ(detectable_key_weight(a, 0.5, 2.0, kBF16),
            std::ldexp(1.0, -11) + std::ldexp(1.0, -10) + std::ldexp(1.0, -18));
  EXPECT_EQ(detectable_key_weight(a, 0.5, 2.0, kE4M3),
            std::ldexp(1.0, -11) + std::ldexp(1.0, -6) + std::ldexp(1.0, -14));
  // The sign of want does not matter; a wider dtype's half ulp is smaller.
  EXPECT_EQ(detectable_key_weight(a, -0.5, 2.0, kF32), detectable_key_weight(a, 0.5, 2.0, kF32));
  EXPECT_LT(detectable_key_weight(a, 0.5, 2.0, kF32), detectable_key_weight(a, 0.5, 2.0, kBF16));
  // A hand case in round numbers: allowed 0.25, want 0 (h = 2^-8 0.5 = 2^-9), bfloat16,
  // M = 0.5: (0.25 + 2^-9) / 0.5 = 0.5 + 2^-8.
  EXPECT_EQ(detectable_key_weight(0.25, 0.0, 0.5, kBF16), 0.5 + std::ldexp(1.0, -8));
}

TEST(CompareKeyWeights, LeastAndLargestOverTheComparedElements) {
  // One row, one head, head_dim 2: the two compared elements. want = (0.5, -1) in float32,
  // atol 2^-10, element_atol (0, 2^-6), M = 2:
  //   element 0: allowed 2^-10, h = 2^-24 (0.5 + 2^-9) = 2^-25 + 2^-33,
  //              w0 = 2^-11 + 2^-26 + 2^-34;
  //   element 1: allowed 2^-10 + 2^-6, h = 2^-24 (1 + 2^-9 + 2^-5) = 2^-24 + 2^-33 + 2^-29,
  //              w1 = (2^-10 + 2^-6 + 2^-24 + 2^-29 + 2^-33) / 2
  //                 = 2^-11 + 2^-7 + 2^-25 + 2^-30 + 2^-34.
  // Row 1 (no sequence) holds a larger allowance that must not count.
  const Inputs in = one_row(kF32, kF32, 1, 3);
  const PagedKvView view = kv_view(in);
  Tensor want(kF32, in.q.shape());
  want.set_float(0, 0.5);
  want.set_float(1, -1.0);
  want.set_float(2, 4.0);
  Tolerance tol{std::ldexp(1.0, -10), 0.0};
  tol.value_scale = 2.0;
  auto extra = std::make_shared<std::vector<double>>(static_cast<size_t>(in.q.numel()), 0.0);
  (*extra)[1] = std::ldexp(1.0, -6);
  (*extra)[2] = 100.0;
  tol.element_atol = extra;
  const double w0 = std::ldexp(1.0, -11) + std::ldexp(1.0, -26) + std::ldexp(1.0, -34);
  const double w1 = std::ldexp(1.0, -11) + std::ldexp(1.0, -7) + std::ldexp(1.0, -25) +
                    std::ldexp(1.0, -30) + std::ldexp(1.0, -34);
  const Comparison c = compare_outputs(want, want, view, tol);
  EXPECT_EQ(c.compared, 2);
  EXPECT_EQ(c.min_detectable_key_weight, w0);
  EXPECT_EQ(c.key_weight_every_row, w1);
  // A non-finite want leaves its element out: element 1 NaN on both sides, so both are w0.
  Tensor nan = want;
  nan.set_float(1, kNaN);
  const Comparison one = compare_outputs(nan, nan, view, tol);
  EXPECT_TRUE(one.agree());
  EXPECT_EQ(one.min_detectable_key_weight, w0);
  EXPECT_EQ(one.key_weight_every_row, w0);
  // No value scale: infinite, however tight the allowance.
  tol.value_scale = 0.0;
  const Comparison none = compare_outputs(want, want, view, tol);
  EXPECT_EQ(none.min_detectable_key_weight, kInf);
  EXPECT_EQ(none.key_weight_every_row, kInf);
}

}  // namespace
}  // namespace rpa
