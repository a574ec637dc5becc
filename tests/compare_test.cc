// The tolerance (oracle/tolerance.h) and the comparator (oracle/compare.h), DESIGN.md
// section 6. Expected tolerances are worked out by hand from the formula in
// tolerance_for's comment, never by calling the formula again:
//   atol = M * (1e-5 + [V narrow] (2^(1-prec_V) + kv_len * min_subnormal_V))
//   rtol = [V narrow] 2^(1-prec_V) + [prec_q < prec_V] 2^(1-prec_q)
// with prec = 24 / 8 / 4 / 3 and min_subnormal = 2^-149 / 2^-133 / 2^-9 / 2^-16 for
// float32 / bfloat16 / float8_e4m3fn / float8_e5m2.
#include "oracle/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernel/paged_kv_view.h"
#include "kernel/python_repr.h"
#include "oracle/tolerance.h"
#include "tests/inputs_builder.h"

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

TEST(Tolerance, Float32IsOneE5OfMaxV) {
  // V float32: no narrow term. q float32: prec_q 24 == prec_V 24, no q term.
  // atol = 2.5 * 1e-5 = 2.5e-5, rtol = 0.
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kFloat32, 2.5, 100);
  EXPECT_DOUBLE_EQ(t.atol, 2.5e-5);
  EXPECT_EQ(t.rtol, 0.0);
  // kv_len plays no part for float32: 1e-5 * 2.5 again with kv_len 1'000'000.
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 2.5, 1000000).atol, 2.5e-5);
  // M = 1: atol = 1e-5.
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kFloat32, DType::kFloat32, 1.0, 1).atol, 1e-5);
}

TEST(Tolerance, BFloat16QAndV) {
  // V bfloat16: ulp 2^(1-8) = 2^-7 = 0.0078125; min_subnormal 2^-133.
  // M = 4, kv_len 10: atol = 4 * (1e-5 + 0.0078125 + 10 * 2^-133)
  //                        = 4e-5 + 0.03125 + 40 * 2^-133 (the last term below double's
  //                          resolution of the sum, but written out anyway).
  // q bfloat16: prec_q 8 is not < prec_V 8, so rtol = 2^-7 only.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kBFloat16, 4.0, 10);
  EXPECT_DOUBLE_EQ(t.atol, 4e-5 + 0.03125 + 40 * std::ldexp(1.0, -133));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
}

TEST(Tolerance, BFloat16QOverFloat32V) {
  // V float32 (no v_scale, float32 KV): no narrow-V term, atol = 2 * 1e-5 = 2e-5.
  // q bfloat16: prec_q 8 < prec_V 24, so the output cast adds 2^(1-8) = 2^-7 to rtol.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kFloat32, 2.0, 7);
  EXPECT_DOUBLE_EQ(t.atol, 2e-5);
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
}

TEST(Tolerance, Float32QOverBFloat16V) {
  // V bfloat16: atol = 1 * (1e-5 + 2^-7 + 3 * 2^-133) = 1e-5 + 0.0078125 (+ 3 * 2^-133).
  // q float32: prec_q 24 is not < 8, no q term: rtol = 2^-7.
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kBFloat16, 1.0, 3);
  EXPECT_DOUBLE_EQ(t.atol, 1e-5 + 0.0078125 + 3 * std::ldexp(1.0, -133));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
}

TEST(Tolerance, Float8E4M3FNUnderBFloat16Q) {
  // V e4m3fn: ulp 2^(1-4) = 2^-3 = 0.125; min_subnormal 2^-9 = 0.001953125.
  // M = 2, kv_len 4: atol = 2 * (1e-5 + 0.125 + 4 * 2^-9) = 2 * (1e-5 + 0.125 + 0.0078125)
  //                       = 2e-5 + 0.25 + 0.015625 = 0.265645, plus one e4m3 subnormal
  //                       for a subnormal result: + 2^-9 = 0.267598125.
  // q bfloat16: prec_q 8 is not < prec_V 4 (every e4m3 value is a bfloat16), so no q term:
  // rtol = 0.125.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kFloat8E4M3FN, 2.0, 4);
  EXPECT_DOUBLE_EQ(t.atol, 0.267598125);
  EXPECT_DOUBLE_EQ(t.rtol, 0.125);
}

TEST(Tolerance, Float8E4M3FNUnderFloat32Q) {
  // Same V term as above; q float32 (24 bits) is wider still: rtol = 0.125.
  // M = 2, kv_len 4: atol = 0.267598125 again.
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kFloat8E4M3FN, 2.0, 4);
  EXPECT_DOUBLE_EQ(t.atol, 0.267598125);
  EXPECT_DOUBLE_EQ(t.rtol, 0.125);
}

TEST(Tolerance, Float8E5M2UnderBFloat16Q) {
  // V e5m2: ulp 2^(1-3) = 2^-2 = 0.25; min_subnormal 2^-16 = 0.0000152587890625.
  // M = 8, kv_len 16: atol = 8 * (1e-5 + 0.25 + 16 * 2^-16) = 8 * (1e-5 + 0.25 + 2^-12)
  //                        = 8e-5 + 2 + 2^-9 = 2.00008 + 0.001953125 = 2.002033125,
  //                        plus one e5m2 subnormal 2^-16: 2.0020483837890625.
  // q bfloat16 (8 bits) is not narrower than e5m2 (3 bits): rtol = 0.25.
  const Tolerance t = tolerance_for(DType::kBFloat16, DType::kFloat8E5M2, 8.0, 16);
  EXPECT_DOUBLE_EQ(t.atol, 2.0020483837890625);
  EXPECT_DOUBLE_EQ(t.rtol, 0.25);
}

TEST(Tolerance, Float8E5M2UnderFloat32Q) {
  // M = 1, kv_len 1: atol = 1e-5 + 0.25 + 2^-16 = 0.25001 + 0.0000152587890625
  //                       = 0.2500252587890625, plus the subnormal floor 2^-16:
  //                       0.250040517578125. rtol = 0.25 (no q term).
  const Tolerance t = tolerance_for(DType::kFloat32, DType::kFloat8E5M2, 1.0, 1);
  EXPECT_DOUBLE_EQ(t.atol, 0.250040517578125);
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
  // kv_len 0:   atol = 1e-5 + 0.125 + 2^-9              = 0.126963125
  // kv_len 1:   atol = 1e-5 + 0.125 + 2^-9 + 2^-9       = 0.12891625
  // kv_len 512: atol = 1e-5 + 0.125 + 512 * 2^-9 + 2^-9 = 1.126963125
  const auto atol = [](int64_t kv_len) {
    return tolerance_for(DType::kBFloat16, DType::kFloat8E4M3FN, 1.0, kv_len).atol;
  };
  EXPECT_DOUBLE_EQ(atol(0), 0.126963125);
  EXPECT_DOUBLE_EQ(atol(1), 0.12891625);
  EXPECT_DOUBLE_EQ(atol(512), 1.126963125);
  EXPECT_DOUBLE_EQ(atol(1) - atol(0), 0.001953125);
  // Scaled by M (the floor is not): M = 4, kv_len 512: 4 * 1.12501 + 2^-9 = 4.501993125.
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kFloat32, DType::kFloat8E4M3FN, 4.0, 512).atol, 4.501993125);
  // e5m2, M = 1: 2^-16 per token; kv_len 65536 adds 65536 * 2^-16 = 1:
  // atol = 1e-5 + 0.25 + 1 + 2^-16 = 1.2500252587890625.
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBFloat16, DType::kFloat8E5M2, 1.0, 65536).atol, 1.2500252587890625);
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
  PagedKvView view{in};
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
  const Comparison c = compare_outputs(g, filled(empty), PagedKvView(empty), Tolerance{});
  EXPECT_TRUE(c.agree());
  EXPECT_EQ(c.compared, 0);
}

TEST_F(Compare, SinglePlantedErrorIsLocatedExactly) {
  // Sequence 2, its row 1: q row cu_q_lens[2] + 1 = 2 + 1 = 3; head 3, column 5.
  const Tolerance tol = tolerance_for(DType::kFloat32, DType::kFloat32, 1.0, 5);  // atol 1e-5
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
  const PagedKvView view(in);
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
  const Comparison c = compare_outputs(filled(in), filled(bf), PagedKvView(in), Tolerance{});
  EXPECT_TRUE(c.agree());
  EXPECT_EQ(c.compared, kDefined);
}

TEST(Tolerance, CaseToleranceGrowsWithLogitMagnitude) {
  // tolerance_for_case = tolerance_for + 2 * 2^-24 * max_logit_abs_sum * M. float32, M = 4,
  // kv_len 10, bound 2^20: base atol 4e-5 + 11 * 2^-126, plus 2 * 2^-24 * 2^20 * 4 = 0.5.
  testing::InputsSpec spec;
  spec.seqs = {{1, 10}};
  const Inputs in = testing::build_inputs(spec);
  ReferenceResult r;
  r.max_abs_v_eff = 4.0;
  r.max_kv_len = 10;
  r.max_logit_abs_sum = std::ldexp(1.0, 20);
  r.semantics = Semantics::kReference;
  const Tolerance t = tolerance_for_case(in, Params{}, r);
  EXPECT_DOUBLE_EQ(t.atol, 4e-5 + 0.5);
  EXPECT_EQ(t.rtol, 0.0);
  // With v_scale, V_eff takes q's dtype (float32 here too): same numbers.
  Params scaled;
  scaled.v_scale = 2.0;
  EXPECT_DOUBLE_EQ(tolerance_for_case(in, scaled, r).atol, 4e-5 + 0.5);
}

// ---- The kernel semantics' tolerance (kernel_tolerance), worked by hand -----------------

// A kernel-semantics result for `in` (one sequence of kv_len 10): spread starts with the
// given elements (0 elsewhere), every (row, head) has B_max row_logit_max.
ReferenceResult kernel_result(const Inputs& in, double max_v, std::vector<double> spread,
                              double row_logit_max) {
  ReferenceResult r;
  r.semantics = Semantics::kKernel;
  r.max_abs_v_eff = max_v;
  r.max_kv_len = 10;
  r.spread = std::move(spread);
  r.spread.resize(static_cast<size_t>(in.q.numel()), 0.0);
  r.row_logit_max.assign(static_cast<size_t>(in.q.dim(0) * in.q.dim(1)), row_logit_max);
  return r;
}

Inputs one_row(DType q_dtype, DType kv_dtype) {
  testing::InputsSpec spec;
  spec.seqs = {{1, 10}};
  spec.head_dim = 2;
  spec.q_dtype = q_dtype;
  spec.kv_dtype = kv_dtype;
  spec.num_kv_heads = kv_dtype == DType::kFloat8E4M3FN ? 2 : 1;
  spec.num_q_heads = spec.num_kv_heads;
  return testing::build_inputs(spec);
}

TEST(KernelTolerance, Float32PaysTheMxuPassesOnBothOperands) {
  // M = 4: atol = 4 (1e-5 + 2^-22) + 11 * 2^-126 (p.V with float32 V: both operands float32,
  // six bfloat16 passes drop up to 2^-22 of each product).
  const Inputs in = one_row(DType::kFloat32, DType::kFloat32);
  const Tolerance t = tolerance_for_case(in, Params{}, kernel_result(in, 4.0, {0.0, 0.0}, 0.0));
  EXPECT_DOUBLE_EQ(t.atol, 4.0 * (1e-5 + std::ldexp(1.0, -22)) + 11 * std::ldexp(1.0, -126));
  EXPECT_EQ(t.rtol, 0.0);
  EXPECT_EQ(t.max_element_atol(), 0.0);
}

TEST(KernelTolerance, Float8UnderBFloat16HasNoRoundedPTerm) {
  // bf16 q over e4m3fn KV: p.V has one float32 operand (p), which six passes multiply
  // exactly; one bf16 ulp rtol; the bf16 smallest subnormal. No kv_len * 2^-9 term: atol
  // stays 1e-5 of M at any kv_len.
  const Inputs in = one_row(DType::kBFloat16, DType::kFloat8E4M3FN);
  ReferenceResult r = kernel_result(in, 2.0, {}, 0.0);
  const Tolerance t = tolerance_for_case(in, Params{}, r);
  EXPECT_DOUBLE_EQ(t.atol, 2.0 * 1e-5 + 11 * std::ldexp(1.0, -126) + std::ldexp(1.0, -133));
  EXPECT_DOUBLE_EQ(t.rtol, 0.0078125);
  r.max_kv_len = 8192;
  EXPECT_LT(tolerance_for_case(in, Params{}, r).atol, 2.0 * 1.1e-5);
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

}  // namespace
}  // namespace rpa
