// The dense reference against closed forms worked out by hand (one comment each) and
// against tests/naive_attention.h on JAX's test scenarios, scaled down.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "reference/jax_reference.h"
#include "tests/inputs_builder.h"
#include "tests/naive_attention.h"
#include "tests/random_inputs.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

using testing::InputsSpec;
using testing::RandomInputsSpec;
using testing::SeqLens;

// One sequence, head_dim 1, one page: q[r], k[t], v[t], the same in every head (one q
// head per kv head; float8 KV needs 2 kv heads to fill a 32-bit word).
Inputs tiny(std::vector<float> q, std::vector<float> k, std::vector<float> v,
            DType q_dtype = DType::kFloat32, DType kv_dtype = DType::kFloat32,
            int64_t num_heads = 1) {
  const int64_t num_q_heads = num_heads;
  InputsSpec s = testing::one_page_spec(
      {static_cast<int32_t>(q.size()), static_cast<int32_t>(k.size())},
      static_cast<int64_t>(k.size()));
  s.num_q_heads = num_q_heads;
  s.num_kv_heads = num_heads;
  s.q_dtype = q_dtype;
  s.kv_dtype = kv_dtype;
  Inputs in = testing::build_inputs(s);
  for (size_t r = 0; r < q.size(); ++r) {
    for (int64_t h = 0; h < num_q_heads; ++h) {
      in.q.set_float(static_cast<int64_t>(r) * num_q_heads + h, q[r]);
    }
  }
  for (size_t t = 0; t < k.size(); ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      const int64_t at = (static_cast<int64_t>(t) * num_heads + h) * 2;
      in.kv_pages.set_float(at, k[t]);
      in.kv_pages.set_float(at + 1, v[t]);
    }
  }
  return in;
}

// Runs the reference after checking that strict validation accepts the case.
std::vector<double> reference(const Inputs& in, const Params& p = {},
                              Semantics semantics = Semantics::kKernel) {
  const auto f = validate(in, p);
  EXPECT_FALSE(f.has_value()) << rule_info(f->rule).name << ": " << f->message;
  const ReferenceResult r = dense_reference(in, p, semantics);
  std::vector<double> out(static_cast<size_t>(r.out.numel()));
  for (int64_t i = 0; i < r.out.numel(); ++i) out[static_cast<size_t>(i)] = r.out.float_at(i);
  return out;
}

// Within a float32 ulp or two of a closed form evaluated in double.
void expect_f32(double got, double closed_form) {
  EXPECT_NEAR(got, closed_form, 2.5e-7 * std::max(1.0, std::fabs(closed_form)));
}

TEST(DenseReference, OneQueryTwoKeys) {
  // s = (1, 2): o = (3 e^1 + 5 e^2) / (e^1 + e^2) = 3 + 2 / (1 + e^-1).
  expect_f32(reference(tiny({1}, {1, 2}, {3, 5}))[0], 3.0 + 2.0 / (1.0 + std::exp(-1.0)));
}

TEST(DenseReference, SmScaleScalesLogits) {
  Params p;
  p.sm_scale = 0.5;
  // s = (0.5, 1): o = 3 + 2 / (1 + e^-0.5).
  expect_f32(reference(tiny({1}, {1, 2}, {3, 5}), p)[0], 3.0 + 2.0 / (1.0 + std::exp(-0.5)));
}

// sm_scale is the float32 the kernel multiplies by, subnormals flushed as on a TPU
// (float32_scalar): 1e-40 and 3e-322 are a scale of 0. The keys then weigh equally: o = 4;
// a -inf query meets 0 and gives NaN, as in the kernel, even through a soft cap (the double
// -inf * 1e-40 = -inf would be capped to -50 and answer a finite 4).
TEST(DenseReference, SmScaleIsTheKernelsFloat32) {
  for (double sm : {1e-40, 3e-322}) {
    Params p;
    p.sm_scale = sm;
    p.soft_cap = 50.0;
    EXPECT_EQ(reference(tiny({1}, {1, 2}, {3, 5}), p)[0], 4.0) << sm;
    for (Semantics s : {Semantics::kKernel, Semantics::kReference}) {
      EXPECT_TRUE(std::isnan(reference(tiny({-INFINITY}, {1, 2}, {3, 5}), p, s)[0])) << sm;
    }
  }
}

// q, K and V are read as a TPU computes with them (load_flushed): a float32 subnormal is 0.
// A subnormal q element then meets a -inf key as 0 * -inf = NaN, as in the kernel (1e-40 *
// -inf would be -inf and give key 1 the whole weight: 5); the least normal float32 stays.
// A subnormal V is 0 in the output.
TEST(DenseReference, SubnormalInputsAreZero) {
  for (Semantics s : {Semantics::kKernel, Semantics::kReference}) {
    EXPECT_TRUE(std::isnan(reference(tiny({1e-40f}, {-INFINITY, 0}, {3, 5}), {}, s)[0]));
    EXPECT_EQ(reference(tiny({0x1p-126f}, {-INFINITY, 0}, {3, 5}), {}, s)[0], 5.0);
    EXPECT_EQ(reference(tiny({1}, {-INFINITY, 0}, {3, 1e-40f}), {}, s)[0], 0.0);
    EXPECT_TRUE(std::isnan(reference(tiny({INFINITY}, {1e-40f, -1}, {3, 5}), {}, s)[0]));
  }
}

TEST(DenseReference, CausalOffsetIsKvLenMinusQLen) {
  // q_len 2 over kv_len 3, all logits 0: row 0 sits at position 1 and sees keys 0..1, row 1
  // at position 2 sees keys 0..2. Uniform weights over what each sees.
  const auto o = reference(tiny({0, 0}, {0, 0, 0}, {1, 2, 6}));
  expect_f32(o[0], 1.5);
  expect_f32(o[1], 3.0);
}

TEST(DenseReference, SlidingWindowMasksKeysAtOrBeforeQposMinusW) {
  // One query at position 3 over keys 0..3, logits 0: W keeps keys t > 3 - W.
  const Inputs in = tiny({0}, {0, 0, 0, 0}, {1, 2, 4, 8});
  Params p;
  p.sliding_window = 1;
  expect_f32(reference(in, p)[0], 8.0);  // key 3 only
  p.sliding_window = 2;
  expect_f32(reference(in, p)[0], 6.0);  // keys 2, 3
  p.sliding_window = 4;                  // W >= kv_len: nothing masked
  expect_f32(reference(in, p)[0], 3.75);
  p.sliding_window = 1000;
  expect_f32(reference(in, p)[0], 3.75);
}

TEST(DenseReference, SoftCapBeforeTheMask) {
  // s = (3, 0), cap 2: s = (2 tanh(1.5), 0); o = (1 e^a + 0) / (e^a + 1) with v = (1, 0).
  Params p;
  p.soft_cap = 2.0;
  const double a = 2.0 * std::tanh(1.5);
  expect_f32(reference(tiny({3}, {1, 0}, {1, 0}), p)[0], std::exp(a) / (std::exp(a) + 1.0));
  // Key 0 masked by a window of 1: capping first keeps it at -0.7 * FLT_MAX, so it has no
  // weight at all; capping after the mask would bring it back to -2.
  p.sliding_window = 1;
  EXPECT_EQ(reference(tiny({3}, {1, 0}, {1, 5}), p)[0], 5.0);
}

TEST(DenseReference, SmallMaskValueIsAddedNotSubstituted) {
  // Logits 0, key 0 masked by a window of 1, mask_value -1: s = (-1, 0), so the masked
  // key still carries weight e^-1 / (1 + e^-1). (Strict mode rejects a mask this small
  // because the tiled kernel cannot match it; the definition itself is sound, so the
  // reference is called directly.)
  Params p;
  p.sliding_window = 1;
  p.mask_value = -1.0;
  const double w = std::exp(-1.0) / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(dense_reference(tiny({0}, {0, 0}, {1, 0}), p).out.float_at(0), w, 2.5e-7);
}

TEST(DenseReference, GqaHeadMapsToHeadOverGroupSize) {
  // 4 q heads over 2 kv heads: heads 0, 1 read kv head 0 (v = 10), heads 2, 3 kv head 1
  // (v = 20). A h % Hkv mapping would give 10, 20, 10, 20.
  Inputs in = testing::build_inputs(testing::one_page_spec({1, 2}, 2));
  for (int64_t t = 0; t < 2; ++t) {
    in.kv_pages.set_float(t * 4 + 1, 10.0);  // V of kv head 0
    in.kv_pages.set_float(t * 4 + 3, 20.0);  // V of kv head 1
  }
  const auto o = reference(in);
  EXPECT_EQ(o, (std::vector<double>{10, 10, 20, 20}));
}

TEST(DenseReference, KAndVScalesMultiplyInFloat32) {
  // k_eff = 2 * 0.5 = 1, v_eff = 3 * v: s = (1, 0), o = 3 (e^1 * 1 + 2) / (e^1 + 1).
  Params p;
  p.k_scale = 0.5;
  p.v_scale = 3.0;
  expect_f32(reference(tiny({1}, {2, 0}, {1, 2}), p)[0],
             3.0 * (std::exp(1.0) + 2.0) / (std::exp(1.0) + 1.0));
}

TEST(DenseReference, ProbabilitiesRoundToBFloat16VInTheReferenceSemantics) {
  // bf16 q, k, v. s = (bf16(0.01), 0) = (0.010009765625, 0): p = (0.50250242, 0.49749758),
  // rounded to bf16: (0.50390625, 0.498046875). v = (1, -1): o = 0.005859375, exactly a
  // bf16. The kernel semantics keeps p: bf16(0.0050048...) = 0.0050048828125.
  const Inputs in = tiny({1}, {0.01f, 0}, {1, -1}, DType::kBFloat16, DType::kBFloat16);
  EXPECT_EQ(reference(in, {}, Semantics::kReference)[0], 0.005859375);
  EXPECT_EQ(reference(in, {}, Semantics::kKernel)[0], 0.0050048828125);
}

TEST(DenseReference, OutputRoundsToFloat8VThenToQInTheReferenceSemantics) {
  // float32 q over e4m3fn KV: equal logits, p = (0.5, 0.5) exact in e4m3fn; v = (1, 1.125):
  // o = 1.0625, the midpoint of e4m3fn's 1 and 1.125, rounds to even 1 before the cast to
  // float32. The kernel semantics rounds only to q's float32: 1.0625 stays.
  const Inputs in = tiny({0}, {0, 0}, {1, 1.125f}, DType::kFloat32, DType::kFloat8E4M3FN, 2);
  EXPECT_EQ(reference(in, {}, Semantics::kReference)[0], 1.0);
  EXPECT_EQ(reference(in, {}, Semantics::kKernel)[0], 1.0625);
}

TEST(DenseReference, Float8ProbabilitiesUnderflowOnlyInTheReferenceSemantics) {
  // 40 equal logits: p = 1/40 = 0.025 each, which e4m3fn (a step of 2^-9 below 2^-5) rounds
  // to 0.025390625 (13 * 2^-9). v = (1, 0, 0, ...) shows the weight itself: the reference
  // semantics gives 0.025390625, the kernel semantics float32(1/40).
  std::vector<float> k(40, 0.0f), v(40, 0.0f);
  v[0] = 1.0f;
  const Inputs in = tiny({39}, k, v, DType::kFloat32, DType::kFloat8E4M3FN, 2);
  EXPECT_EQ(reference(in, {}, Semantics::kReference)[0], 0.025390625);
  EXPECT_EQ(reference(in, {}, Semantics::kKernel)[0], static_cast<double>(0.025f));
}

TEST(DenseReference, NothingPastKvLenIsRead) {
  RandomInputsSpec spec;
  spec.seqs = {{1, 5}, {3, 9}, {4, 4}, {0, 6}};
  Inputs a = testing::random_inputs(spec);
  Inputs b = a;
  // Different garbage in every page slot and page_indices entry the definition never
  // reads: slots at or past kv_len, pages past ceil(kv_len / S), padding sequence slots.
  const PagedKvView view = kv_view(a);
  std::vector<bool> read(static_cast<size_t>(a.kv_pages.numel()), false);
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    if (view.q_len(s) == 0) continue;
    for (int64_t t = 0; t < view.kv_len(s); ++t) {
      for (int64_t e = 0; e < 2 * view.num_kv_heads() * view.head_dim(); ++e) {
        read[static_cast<size_t>(view.k_offset(s, t, 0) + e)] = true;
      }
    }
  }
  for (int64_t i = 0; i < b.kv_pages.numel(); ++i) {
    if (!read[static_cast<size_t>(i)]) b.kv_pages.set_float(i, i % 2 ? 1e30 : -INFINITY);
  }
  for (int64_t s = 0; s < 4; ++s) {
    const int64_t used = view.q_len(s) == 0 ? 0 : (view.kv_len(s) + 3) / 4;
    for (int64_t j = used; j < b.page_indices.dim(1); ++j) {
      b.page_indices.set_int(s * b.page_indices.dim(1) + j, 1 << 30);
    }
  }
  const ReferenceResult ra = dense_reference(a, Params{});
  const ReferenceResult rb = dense_reference(b, Params{});
  EXPECT_EQ(ra.out, rb.out);  // bit for bit
}

TEST(DenseReference, ZeroLengthSequencesProduceNoRows) {
  // q_len 0 with kv_len 6, and q_len 0 with kv_len 0, between two real sequences: the real
  // ones' rows are unchanged by the empty ones' presence.
  RandomInputsSpec with_empty;
  with_empty.seqs = {{2, 5}, {0, 6}, {0, 0}, {3, 3}};
  const Inputs in = testing::random_inputs(with_empty);
  // The definition holds; strict mode rejects the case for the TPU kernel's sake: the step
  // after the kv_len-0 sequence reads the block prefetched for it (finding 8).
  const auto f = validate(in, Params{});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, RuleId::stale_kv_block) << f->message;
  const ReferenceResult r = dense_reference(in, Params{});
  const auto naive = testing::naive_attention(in, Params{});
  ASSERT_EQ(r.out.numel(), static_cast<int64_t>(naive.size()));
  for (int64_t i = 0; i < r.out.numel(); ++i) {
    EXPECT_NEAR(r.out.float_at(i), naive[static_cast<size_t>(i)], 1e-6) << i;
  }
  EXPECT_EQ(r.max_kv_len, 5);  // the q_len 0 sequences produced no rows
}

// ---- The float32 sums of the tolerance's item F (ReferenceResult), by hand ---------------

// Relative agreement with a closed form evaluated in double: the reference sums in another
// order (Eigen), a few double ulps away.
void expect_close(double got, double closed_form) {
  EXPECT_NEAR(got, closed_form, 1e-14 * std::max(1.0, std::fabs(closed_form)));
}

TEST(DenseReferenceSums, ThreeWeightedTokensAndAMaskedOne) {
  // One query at position 3 over keys 0..3, q = 1, k = (0, 0, 1, 2): logits s = (0, 0, 1, 2);
  // a window of 3 masks key 0 (3 - 3 >= 0): its logit gets -0.7 * FLT_MAX added and its
  // weight is exactly 0. The others: p = (0, 1, e, e^2) / Z, Z = 1 + e + e^2.
  // v = (100, 4, -2, 1): o = (4 - 2e + e^2) / Z = 0.5359..., between -2 and 1, so
  //   abs_weighted = (4 + 2e + e^2) / Z,
  //   deviation    = ((4 - o) + e (2 + o) + e^2 (1 - o)) / Z,
  //   column_max   = 100: the masked key's value counts (the max over the sequence's keys),
  //   row_terms    = 3 (p > 0 on keys 1..3 only),
  //   row_chain    = sorted p = (e^2, e, 1) / Z with depths n - 1, n - 1, n - 2 = 2, 2, 1:
  //                  (2 e^2 + 2 e + 1) / Z,
  //   row_blocks   = ceil(4 / 4) = 1 (one page of 4).
  // float32 V: the reference semantics rounds nothing more, so both semantics agree.
  const Inputs in = tiny({1}, {0, 0, 1, 2}, {100, 4, -2, 1});
  Params p;
  p.sliding_window = 3;
  const double e = std::exp(1.0), e2 = std::exp(2.0), z = 1 + e + e2;
  const double o = (4 - 2 * e + e2) / z;
  for (const Semantics semantics : {Semantics::kKernel, Semantics::kReference}) {
    SCOPED_TRACE(std::string(semantics_name(semantics)));
    const ReferenceResult r = dense_reference(in, p, semantics);
    ASSERT_EQ(r.abs_weighted.size(), 1u);
    ASSERT_EQ(r.row_terms.size(), 1u);
    expect_close(r.out.float_at(0), static_cast<float>(o));
    expect_close(r.abs_weighted[0], (4 + 2 * e + e2) / z);
    expect_close(r.deviation[0], ((4 - o) + e * (2 + o) + e2 * (1 - o)) / z);
    EXPECT_EQ(r.column_max[0], 100.0);
    EXPECT_EQ(r.row_terms[0], 3.0);
    expect_close(r.row_chain[0], (2 * e2 + 2 * e + 1) / z);
    EXPECT_EQ(r.row_blocks[0], 1.0);
  }
}

TEST(DenseReferenceSums, OneTokenAndEqualWeights) {
  // One key: p = 1 at depth 0: row_chain 0, row_terms 1; v = -3: X = V_c = 3, Y = 0.
  const ReferenceResult one = dense_reference(tiny({0.5f}, {2}, {-3}), Params{});
  EXPECT_EQ(one.row_terms[0], 1.0);
  EXPECT_EQ(one.row_chain[0], 0.0);
  EXPECT_EQ(one.abs_weighted[0], 3.0);
  EXPECT_EQ(one.deviation[0], 0.0);
  EXPECT_EQ(one.column_max[0], 3.0);
  // Four equal logits (q = 0): p = 1/4 exactly, depths 3, 3, 2, 1: row_chain = 9/4
  // (= (n + 1)/2 - 1/n); v = (1, -1, 1, -1): o = 0, X = Y = 1, V_c = 1; page of 4: 1 block.
  const ReferenceResult four = dense_reference(tiny({0}, {5, 6, 7, 8}, {1, -1, 1, -1}), Params{});
  EXPECT_EQ(four.row_terms[0], 4.0);
  EXPECT_EQ(four.row_chain[0], 2.25);
  EXPECT_EQ(four.abs_weighted[0], 1.0);
  EXPECT_EQ(four.deviation[0], 1.0);
  EXPECT_EQ(four.column_max[0], 1.0);
  EXPECT_EQ(four.row_blocks[0], 1.0);
}

TEST(DenseReferenceSums, ReferenceSemanticsSumsTheRoundedWeights) {
  // Three equal logits over bfloat16 V = (1, 1, 1): p = 1/3, which the reference semantics
  // rounds to bfloat16 171/512 (1/3 = 1.0101010|1... 2^-2 rounds up to 1.0101011 2^-2):
  //   abs_weighted = 3 171/512 = 513/512, o = 513/512 (unrounded),
  //   deviation = 513/512 |1 - 513/512| = 513/512^2, row_chain = (2 + 2 + 1) 171/512 = 855/512.
  // The kernel semantics keeps p = 1/3: abs_weighted 1, deviation ~0, row_chain 5/3.
  const Inputs in = tiny({0}, {0, 0, 0}, {1, 1, 1}, DType::kBFloat16, DType::kBFloat16);
  const ReferenceResult ref = dense_reference(in, Params{}, Semantics::kReference);
  EXPECT_EQ(ref.abs_weighted[0], 513.0 / 512);
  EXPECT_EQ(ref.deviation[0], 513.0 / (512.0 * 512.0));
  EXPECT_EQ(ref.row_chain[0], 855.0 / 512);
  EXPECT_EQ(ref.row_terms[0], 3.0);
  const ReferenceResult ker = dense_reference(in, Params{}, Semantics::kKernel);
  expect_close(ker.abs_weighted[0], 1.0);
  EXPECT_NEAR(ker.deviation[0], 0.0, 1e-15);
  expect_close(ker.row_chain[0], 5.0 / 3);
  EXPECT_EQ(ker.row_terms[0], 3.0);
}

TEST(DenseReferenceSums, RowBlocksAndRowsOfNoSequence) {
  // (q_len, kv_len) = (1, 5), (2, 9), (0, 7), (1, 4): q rows 0 | 1, 2 | none | 3; rows 4..15
  // belong to no sequence (NaN in q there: never read). 4 q heads over 2 kv heads, head_dim 8,
  // q = 0 (equal logits over what each row sees), every K and V value 1.5.
  // Row r of a sequence sees kv_len - q_len + r + 1 keys (causal): n = 5 | 8, 9 | 4, with
  // row_chain (n + 1)/2 - 1/n = 14/5 | 35/8, 44/9 | 9/4; X = V_c = 1.5, Y = 0.
  // row_blocks = ceil(kv_len / page_size): page 4: 2 | 3, 3 | 1; page 2: 3 | 5, 5 | 2.
  for (const int64_t page_size : {4, 2}) {
    InputsSpec spec;
    spec.seqs = {{1, 5}, {2, 9}, {0, 7}, {1, 4}};
    spec.page_size = page_size;
    spec.pages_per_seq = 5;
    Inputs in = testing::build_inputs(spec);
    for (int64_t i = 0; i < in.kv_pages.numel(); ++i) in.kv_pages.set_float(i, 1.5);
    for (int64_t i = 4 * 4 * 8; i < in.q.numel(); ++i) in.q.set_float(i, NAN);
    const std::vector<double> n = {5, 8, 9, 4};
    const std::vector<double> chain = {14.0 / 5, 35.0 / 8, 44.0 / 9, 9.0 / 4};
    const std::vector<double> blocks =
        page_size == 4 ? std::vector<double>{2, 3, 3, 1} : std::vector<double>{3, 5, 5, 2};
    for (const Semantics semantics : {Semantics::kKernel, Semantics::kReference}) {
      SCOPED_TRACE(std::string(semantics_name(semantics)) + ", page_size " +
                   std::to_string(page_size));
      const ReferenceResult r = dense_reference(in, Params{}, semantics);
      ASSERT_EQ(r.row_terms.size(), 16u * 4);
      ASSERT_EQ(r.abs_weighted.size(), 16u * 4 * 8);
      for (size_t i = 0; i < r.row_terms.size(); ++i) {
        const size_t row = i / 4;
        if (row >= 4) {
          EXPECT_EQ(r.row_terms[i], 0.0) << i;
          EXPECT_EQ(r.row_chain[i], 0.0) << i;
          EXPECT_EQ(r.row_blocks[i], 0.0) << i;
          continue;
        }
        EXPECT_EQ(r.row_terms[i], n[row]) << i;
        expect_close(r.row_chain[i], chain[row]);
        EXPECT_EQ(r.row_blocks[i], blocks[row]) << i;
      }
      for (size_t e = 0; e < r.abs_weighted.size(); ++e) {
        const bool defined = e < 4u * 4 * 8;
        expect_close(r.abs_weighted[e], defined ? 1.5 : 0.0);
        // (o is 1.5 up to the rounding of the weights 1/n: deviation a few double ulps)
        if (defined) {
          EXPECT_NEAR(r.deviation[e], 0.0, 1e-14) << e;
        } else {
          EXPECT_EQ(r.deviation[e], 0.0) << e;
        }
        EXPECT_EQ(r.column_max[e], defined ? 1.5 : 0.0) << e;
      }
    }
  }
}

// ---- JAX's test scenarios, scaled down, against the naive loop -------------------------

struct Scenario {
  const char* name;
  std::vector<SeqLens> seqs;
  int64_t num_q_heads, num_kv_heads;
  DType q_dtype, kv_dtype;
  Params params;
};

// Agreement up to one ulp of the output dtype: the two sum in different orders, so a
// result next to a rounding tie may land on either side.
void expect_matches_naive(const Inputs& in, const Params& p, Semantics semantics) {
  const auto f = validate(in, p);
  ASSERT_FALSE(f.has_value()) << rule_info(f->rule).name << ": " << f->message;
  const ReferenceResult r = dense_reference(in, p, semantics);
  const auto naive = testing::naive_attention(in, p, semantics);
  const int prec = in.q.dtype() == DType::kBFloat16 ? 8 : 24;
  const int64_t defined = kv_view(in).total_q_tokens() * in.q.dim(1) * in.q.dim(2);
  int64_t off_by_one_ulp = 0;
  for (int64_t i = 0; i < r.out.numel(); ++i) {
    const double got = r.out.float_at(i);
    const double want = naive[static_cast<size_t>(i)];
    if (i >= defined) {
      EXPECT_EQ(got, 0.0) << "row past cu_q_lens[num_seqs] at " << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(got)) << "NaN at " << i;
    if (got == want) continue;
    ++off_by_one_ulp;
    EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), 1 - prec) + 1e-30) << i;
  }
  EXPECT_LE(off_by_one_ulp, defined / 100 + 1) << "too many rounding differences";
}

const std::vector<SeqLens> kMixed = {{1, 40}, {5, 18}, {1, 29}, {20, 29}, {1, 22}, {1, 16},
                                     {8, 30}, {25, 46}, {1, 18}, {1, 17}, {9, 23}};

class JaxScenario : public ::testing::TestWithParam<Scenario> {};

TEST_P(JaxScenario, MatchesNaiveLoop) {
  const Scenario& sc = GetParam();
  RandomInputsSpec spec;
  spec.seqs = sc.seqs;
  spec.num_q_heads = sc.num_q_heads;
  spec.num_kv_heads = sc.num_kv_heads;
  spec.q_dtype = sc.q_dtype;
  spec.kv_dtype = sc.kv_dtype;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    spec.seed = seed;
    for (Semantics semantics : {Semantics::kKernel, Semantics::kReference}) {
      SCOPED_TRACE(std::string(semantics_name(semantics)) + " semantics");
      expect_matches_naive(testing::random_inputs(spec), sc.params, semantics);
    }
  }
}

Params with(std::optional<int64_t> window, std::optional<double> cap,
            std::optional<double> k_scale = std::nullopt,
            std::optional<double> v_scale = std::nullopt) {
  Params p;
  p.sliding_window = window;
  p.soft_cap = cap;
  p.k_scale = k_scale;
  p.v_scale = v_scale;
  return p;
}

constexpr DType F32 = DType::kFloat32, BF16 = DType::kBFloat16, E4M3 = DType::kFloat8E4M3FN,
                E5M2 = DType::kFloat8E5M2;

INSTANTIATE_TEST_SUITE_P(
    Reference, JaxScenario,
    ::testing::Values(
        Scenario{"basic", {{1, 12}, {5, 16}, {3, 9}}, 4, 2, F32, F32, {}},
        Scenario{"basic_bf16", {{1, 12}, {5, 16}, {3, 9}}, 4, 2, BF16, BF16, {}},
        Scenario{"decode_only", {{1, 23}, {1, 8}, {1, 40}, {1, 1}}, 8, 2, F32, F32, {}},
        Scenario{"prefill_only", {{13, 23}, {8, 8}, {30, 40}}, 8, 2, BF16, BF16, {}},
        Scenario{"mixed", kMixed, 4, 2, F32, F32, {}},
        Scenario{"complex_32_8", kMixed, 32, 8, BF16, BF16, {}},
        Scenario{"complex_32_16", kMixed, 32, 16, F32, F32, {}},
        Scenario{"complex_16_2", kMixed, 16, 2, BF16, BF16, {}},
        Scenario{"complex_4_4", kMixed, 4, 4, F32, F32, {}},
        Scenario{"complex_8_1", kMixed, 8, 1, BF16, BF16, {}},
        Scenario{"sliding_window_5", kMixed, 4, 2, F32, F32, with(5, std::nullopt)},
        Scenario{"sliding_window_128", kMixed, 4, 2, BF16, BF16, with(128, std::nullopt)},
        Scenario{"soft_cap_50", kMixed, 4, 2, F32, F32, with(std::nullopt, 50.0)},
        Scenario{"window_and_cap", kMixed, 4, 2, BF16, BF16, with(5, 50.0)},
        Scenario{"fp8_e4m3fn_kv", kMixed, 8, 4, BF16, E4M3, {}},
        Scenario{"fp8_e5m2_kv_scaled", kMixed, 8, 4, BF16, E5M2, with(std::nullopt, std::nullopt, 0.5, 2.0)},
        Scenario{"fp8_kv_f32_q_scaled", kMixed, 8, 4, F32, E4M3, with(std::nullopt, std::nullopt, 1.5, 0.25)},
        Scenario{"f32_scaled", kMixed, 4, 2, F32, F32, with(std::nullopt, 30.0, 0.75, 1.25)}),
    [](const ::testing::TestParamInfo<Scenario>& p) { return p.param.name; });

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

}  // namespace
}  // namespace rpa
