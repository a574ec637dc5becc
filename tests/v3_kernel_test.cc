// The tiled kernel on tpu-inference v3 calls (kernel/v3_kernel.h, DESIGN.md section 16): the
// fused KV-cache update in every packed layout, and the attention options v3 adds, each on a
// case small enough to work out by hand here (head_dim 1, a few tokens), with the expected
// values written as the softmax formulas themselves. The kernel against the dense v3
// reference on generated cases is the properties' job.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <string>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/v3_cache_layout.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "tests/v3_builder.h"

namespace rpa {
namespace {

using test::at;
using test::BF16;
using test::E4M3;
using test::F32;
using test::Seq;
using test::V3Builder;
using test::record_elements;

// The one-sequence case most tests share: q_len 2, kv_len 3 in one page (page 1). Token 0 is
// in the cache already (K 0.5, V 2); the new tokens 1 and 2 have K 1, -1 and V 4, 8; the
// queries are 1 and 2.
struct Small {
  V3Builder b;
  V3Inputs in;
  V3Params p;
  Small() {
    b.seqs = {{2, 3}};
    in = b.build();
    in.kv_cache.set_float(at(b, 1, 0, 0, false, 0), 0.5);
    in.kv_cache.set_float(at(b, 1, 0, 0, true, 0), 2.0);
    in.keys.set_float(0, 1.0);
    in.keys.set_float(1, -1.0);
    in.values.set_float(0, 4.0);
    in.values.set_float(1, 8.0);
    in.queries.set_float(0, 1.0);
    in.queries.set_float(1, 2.0);
  }
};

// sum_t exp(s_t) v_t / (exp(sink) + sum_t exp(s_t)).
double softmax_dot(const std::vector<double>& s, const std::vector<double>& v,
                   double sink = -std::numeric_limits<double>::infinity()) {
  double num = 0.0, den = std::exp(sink);
  for (size_t t = 0; t < s.size(); ++t) {
    num += std::exp(s[t]) * v[t];
    den += std::exp(s[t]);
  }
  return num / den;
}

constexpr double kF32 = 4e-6;  // a few float32 roundings of outputs of magnitude < 8

TEST(V3Kernel, CausalAttentionAfterTheFusedUpdate) {
  Small c;
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  // Row 0 is position 1: keys 0 and 1. Row 1 is position 2: keys 0, 1 and 2.
  EXPECT_NEAR(r.out.float_at(0), softmax_dot({0.5, 1.0}, {2.0, 4.0}), kF32);
  EXPECT_NEAR(r.out.float_at(1), softmax_dot({1.0, 2.0, -2.0}, {2.0, 4.0, 8.0}), kF32);
  // Rows past cu_q_lens[k] are 0.
  EXPECT_EQ(r.out.float_at(2), 0.0);
  EXPECT_EQ(r.out.float_at(3), 0.0);
  // The new tokens sit at positions 1 and 2 of the sequence.
  EXPECT_EQ(r.kv_cache.float_at(at(c.b, 1, 1, 0, false, 0)), 1.0);
  EXPECT_EQ(r.kv_cache.float_at(at(c.b, 1, 1, 0, true, 0)), 4.0);
  EXPECT_EQ(r.kv_cache.float_at(at(c.b, 1, 2, 0, false, 0)), -1.0);
  EXPECT_EQ(r.kv_cache.float_at(at(c.b, 1, 2, 0, true, 0)), 8.0);
}

TEST(V3Kernel, NoCausalMaskSeesEveryKey) {
  Small c;
  c.p.use_causal_mask = false;
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  EXPECT_NEAR(r.out.float_at(0), softmax_dot({0.5, 1.0, -1.0}, {2.0, 4.0, 8.0}), kF32);
  EXPECT_NEAR(r.out.float_at(1), softmax_dot({1.0, 2.0, -2.0}, {2.0, 4.0, 8.0}), kF32);
}

TEST(V3Kernel, SlidingWindowWithAndWithoutTheCausalMask) {
  Small c;
  c.p.sliding_window = 1;  // only key q_pos (causal); keys t > q_pos - 1 (not causal)
  V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  EXPECT_NEAR(r.out.float_at(0), 4.0, kF32);
  EXPECT_NEAR(r.out.float_at(1), 8.0, kF32);
  // The kernel masks by the window whatever use_causal_mask says (kernel.py's
  // flash_attention_step1: the window term is outside `if use_causal_mask`).
  c.p.use_causal_mask = false;
  r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  EXPECT_NEAR(r.out.float_at(0), softmax_dot({1.0, -1.0}, {4.0, 8.0}), kF32);
  EXPECT_NEAR(r.out.float_at(1), 8.0, kF32);
}

TEST(V3Kernel, ScalesAndSoftCap) {
  Small c;
  c.p.sm_scale = 0.5;
  c.p.k_scale = 3.0;
  c.p.v_scale = 0.25;
  c.p.soft_cap = 1.25;
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  const auto cap = [](double s) { return 1.25 * std::tanh(s * 1.5 / 1.25); };
  EXPECT_NEAR(r.out.float_at(0), 0.25 * softmax_dot({cap(0.5), cap(1.0)}, {2.0, 4.0}), kF32);
  EXPECT_NEAR(r.out.float_at(1), 0.25 * softmax_dot({cap(1.0), cap(2.0), cap(-2.0)}, {2.0, 4.0, 8.0}), kF32);
}

TEST(V3Kernel, QScaleQuantizesQueriesToTheKvDtypeWithClipping) {
  Small c;
  c.b.kv = E4M3;  // finite range +-448
  const V3Inputs base = c.in;
  c.in = c.b.build();
  c.in.kv_cache.set_float(at(c.b, 1, 0, 0, false, 0), 0.5);
  c.in.kv_cache.set_float(at(c.b, 1, 0, 0, true, 0), 2.0);
  for (int64_t i = 0; i < 2; ++i) {
    c.in.keys.set_float(i, base.keys.float_at(i));
    c.in.values.set_float(i, base.values.float_at(i));
  }
  c.in.queries.set_float(0, 2000.0);  // / q_scale 2 = 1000, clipped to 448
  c.in.queries.set_float(1, 3.0);     // / 2 = 1.5, exact in float8_e4m3fn
  c.p.q_scale = 2.0;
  c.p.sm_scale = 1.0 / 448.0;
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  // Logits are q_quant * K * sm_scale * q_scale.
  const double s0 = 448.0 * 2.0 / 448.0;
  EXPECT_NEAR(r.out.float_at(0), softmax_dot({s0 * 0.5, s0 * 1.0}, {2.0, 4.0}), kF32);
  const double s1 = 1.5 * 2.0 / 448.0;
  EXPECT_NEAR(r.out.float_at(1), softmax_dot({s1 * 0.5, s1, -s1}, {2.0, 4.0, 8.0}), kF32);
}

TEST(V3Kernel, UpdateOffReadsTheCacheAsGivenAndWritesNothing) {
  Small c;
  c.p.update_kv_cache = false;
  // Positions 1 and 2 hold other keys and values; keys / values must be ignored.
  c.in.kv_cache.set_float(at(c.b, 1, 1, 0, false, 0), 0.0);
  c.in.kv_cache.set_float(at(c.b, 1, 1, 0, true, 0), 1.0);
  c.in.kv_cache.set_float(at(c.b, 1, 2, 0, false, 0), 0.0);
  c.in.kv_cache.set_float(at(c.b, 1, 2, 0, true, 0), -1.0);
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  EXPECT_NEAR(r.out.float_at(0), softmax_dot({0.5, 0.0}, {2.0, 1.0}), kF32);
  EXPECT_NEAR(r.out.float_at(1), softmax_dot({1.0, 0.0, 0.0}, {2.0, 1.0, -1.0}), kF32);
  EXPECT_TRUE(r.kv_cache == c.in.kv_cache);
}

TEST(V3Kernel, FusedUpdateThenAttentionEqualsAttentionOverTheUpdatedCache) {
  Small c;
  const V3KernelResult fused = v3_tiled_attention(c.b.dialect, c.in, c.p);
  V3Inputs before = c.in;
  before.kv_cache = fused.kv_cache;
  V3Params off = c.p;
  off.update_kv_cache = false;
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, before, off);
  EXPECT_TRUE(r.out == fused.out);
  EXPECT_TRUE(r.kv_cache == fused.kv_cache);
}

// hd64: head_dim 64, [K | V] per head; the sink joins every row's denominator.
V3Builder hd64_builder() {
  V3Builder b;
  b.dialect = Dialect::kTpuInferenceV3Hd64;
  b.d = 64;
  b.seqs = {{1, 2}};
  return b;
}

TEST(V3Kernel, AttentionSinkJoinsTheDenominatorAndMinusInfinityIsNoSink) {
  const V3Builder b = hd64_builder();
  V3Inputs in = b.build();
  in.queries.set_float(0, 1.0);  // q = e_0: the logit of token t is K_t[0]
  for (int64_t c = 0; c < 64; ++c) {
    in.kv_cache.set_float(at(b, 1, 0, 0, false, c), c == 0 ? 0.25 : 0.0);
    in.kv_cache.set_float(at(b, 1, 0, 0, true, c), c == 0 ? 3.0 : 0.0);
    in.keys.set_float(c, c == 0 ? -0.5 : 0.0);
    in.values.set_float(c, c == 0 ? 5.0 : 1.0);
  }
  in.attention_sink = Tensor::from_floats(F32, {1}, std::vector<float>{0.75f});
  const V3Params p;
  V3KernelResult r = v3_tiled_attention(b.dialect, in, p);
  EXPECT_NEAR(r.out.float_at(0), softmax_dot({0.25, -0.5}, {3.0, 5.0}, 0.75), kF32);
  EXPECT_NEAR(r.out.float_at(1), softmax_dot({0.25, -0.5}, {0.0, 1.0}, 0.75), kF32);
  // The update writes hd64's record: K in lanes [0, 64), V in [64, 128).
  EXPECT_EQ(r.kv_cache.float_at(at(b, 1, 1, 0, false, 0)), -0.5);
  EXPECT_EQ(r.kv_cache.float_at(at(b, 1, 1, 0, true, 0)), 5.0);
  const Tensor with_sink = r.out;
  in.attention_sink = Tensor::from_floats(F32, {1}, std::vector<float>{-INFINITY});
  r = v3_tiled_attention(b.dialect, in, p);
  const V3KernelResult none = [&] {
    V3Inputs no_sink = in;
    no_sink.attention_sink.reset();
    return v3_tiled_attention(b.dialect, no_sink, p);
  }();
  EXPECT_TRUE(r.out == none.out);
  EXPECT_NEAR(none.out.float_at(0), softmax_dot({0.25, -0.5}, {3.0, 5.0}), kF32);
  EXPECT_FALSE(with_sink == none.out);
}

// Logits of -inf (an infinite K here) weigh nothing: beside a finite sink the row is the
// sink's alone, so the output is 0 (fuzz_raw_inputs found the kernel's local-max update
// giving exp(-inf - -inf) = NaN there); and a first KV block of -inf logits leaves the next
// block's key the whole weight.
TEST(V3Kernel, MinusInfinityLogitsWeighNothing) {
  V3Builder b = hd64_builder();
  b.seqs = {{1, 5}};  // tokens 0-3 in page 1 (in the cache), token 4 new in page 2
  V3Inputs in = b.build();
  in.queries.set_float(0, 1.0);  // q = e_0: the logit of token t is K_t[0]
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t c = 0; c < 64; ++c) {
      in.kv_cache.set_float(at(b, 1, t, 0, false, c), c == 0 ? -INFINITY : 0.0);
      in.kv_cache.set_float(at(b, 1, t, 0, true, c), 3.0);
    }
  }
  for (int64_t c = 0; c < 64; ++c) {
    in.keys.set_float(c, c == 0 ? -INFINITY : 0.0);
    in.values.set_float(c, 2.0);
  }
  in.attention_sink = Tensor::from_floats(F32, {1}, std::vector<float>{0.75f});
  V3Params p;
  for (int64_t pages : {1, 3}) {
    p.num_kv_pages_per_block = pages;
    const V3KernelResult r = v3_tiled_attention(b.dialect, in, p);
    for (int64_t c = 0; c < 64; ++c) EXPECT_EQ(r.out.float_at(c), 0.0) << pages << " " << c;
  }
  // The new token's key finite, no sink: the first block (page 1) is all -inf.
  in.keys.set_float(0, 0.5);
  in.attention_sink.reset();
  for (int64_t pages : {1, 3}) {
    p.num_kv_pages_per_block = pages;
    const V3KernelResult r = v3_tiled_attention(b.dialect, in, p);
    for (int64_t c = 0; c < 64; ++c) EXPECT_EQ(r.out.float_at(c), 2.0) << pages << " " << c;
  }
}

// A softmax weight below 2^-126 is flushed to 0 by the kernel (FTZ, as on a TPU): exp(-88) =
// 6.1e-39 beside a sink of 0, times V = 2^20, is 6.3e-33 in the exact definition and 0 in the
// kernel. The comparison allows each key's weight that may end below 2^-126 times M_row,
// where it allowed 2^-126 per key only for products p_t v_t flushed (fuzz_raw_inputs found
// such a row: corpus/fuzz/fuzz_raw_inputs/v3-hd64-flushed-weight-times-large-v). A normal
// weight, exp(-80) = 1.8e-35, still counts: an output that drops it fails.
TEST(V3Kernel, WeightsFlushedBelowTheLeastNormalFloat32AreWithinTolerance) {
  V3Builder b = hd64_builder();
  b.seqs = {{1, 1}};  // one key: the new token's
  V3Inputs in = b.build();
  in.queries.set_float(0, 1.0);  // q = e_0: the logit is K[0]
  in.keys.set_float(0, -88.0);
  for (int64_t c = 0; c < 64; ++c) in.values.set_float(c, 0x1p20);
  in.attention_sink = Tensor::from_floats(F32, {1}, std::vector<float>{0.0f});
  const V3Params p;
  V3KernelResult got = v3_tiled_attention(b.dialect, in, p);
  V3ReferenceResult ref = v3_reference(b.dialect, in, p, Semantics::kKernel);
  EXPECT_EQ(got.out.float_at(0), 0.0);
  EXPECT_NEAR(ref.out.float_at(0), std::exp(-88.0) * 0x1p20, 1e-6 * std::exp(-88.0) * 0x1p20);
  V3Comparison cmp = v3_compare(b.dialect, in, p, ref, got.out, got.kv_cache,
                                {.float32_accumulators = true});
  EXPECT_TRUE(cmp.agree()) << describe_v3_comparison(cmp);

  in.keys.set_float(0, -80.0);
  got = v3_tiled_attention(b.dialect, in, p);
  ref = v3_reference(b.dialect, in, p, Semantics::kKernel);
  EXPECT_GT(got.out.float_at(0), 0.0);
  cmp = v3_compare(b.dialect, in, p, ref, got.out, got.kv_cache, {.float32_accumulators = true});
  EXPECT_TRUE(cmp.agree()) << describe_v3_comparison(cmp);
  const Tensor zero(got.out.dtype(), got.out.shape());
  EXPECT_FALSE(v3_compare(b.dialect, in, p, ref, zero, got.kv_cache, {.float32_accumulators = true})
                   .agree());
}

// The fused update in each packing: exactly the new tokens' records change, each written
// whole (K and V of every head, zeros in the padding heads and head_dim lanes), nothing else.
TEST(V3Kernel, FusedUpdateWritesWholeRecordsOfTheNewTokensOnly) {
  struct Layout {
    Dialect dialect;
    DType q, kv;
    int64_t hkv, d, page_size;
  };
  for (const Layout& l : {Layout{Dialect::kTpuInferenceV3, F32, F32, 3, 80, 2},
                          Layout{Dialect::kTpuInferenceV3, BF16, BF16, 3, 80, 2},
                          Layout{Dialect::kTpuInferenceV3, BF16, E4M3, 3, 80, 4},
                          Layout{Dialect::kTpuInferenceV3, BF16, E4M3, 1, 128, 4},
                          Layout{Dialect::kTpuInferenceV3Hd64, BF16, BF16, 3, 64, 2},
                          Layout{Dialect::kTpuInferenceV3Hd64, BF16, E4M3, 3, 64, 4}}) {
    SCOPED_TRACE(std::string(dialect_name(l.dialect)) + " kv " + std::string(dtype_name(l.kv)) +
                 " Hkv " + std::to_string(l.hkv));
    V3Builder b;
    b.dialect = l.dialect;
    b.q = l.q;
    b.kv = l.kv;
    b.hq = l.hkv;
    b.hkv = l.hkv;
    b.d = l.d;
    b.page_size = l.page_size;
    b.tokens = 8;
    b.pps = 4;
    b.seqs = {{3, 5}, {2, 2}};  // seq 0: positions 2..4 (across a page end); seq 1: 0..1
    b.fill = 1.5f;              // the old cache: every lane 1.5
    V3Inputs in = b.build();
    for (int64_t i = 0; i < in.keys.numel(); ++i) {
      in.keys.set_float(i, static_cast<double>(i % 7) - 3.0);
      in.values.set_float(i, static_cast<double>(i % 5) + 0.5);
    }
    const V3KernelResult r = v3_tiled_attention(b.dialect, in, V3Params{});
    const int64_t record = record_elements(b);
    std::vector<char> written(static_cast<size_t>(in.kv_cache.numel()), 0);
    int64_t token = 0;
    for (size_t s = 0; s < b.seqs.size(); ++s) {
      for (int32_t j = 0; j < b.seqs[s].q_len; ++j, ++token) {
        const int64_t pos = b.seqs[s].kv_len - b.seqs[s].q_len + j;
        const int64_t page = in.page_indices.int_at(static_cast<int64_t>(s) * b.pps + pos / b.page_size);
        const int64_t base = at(b, page, pos % b.page_size, 0, false, 0);
        for (int64_t e = 0; e < record; ++e) written[static_cast<size_t>(base + e)] = 1;
        for (int64_t e = 0; e < record; ++e) {
          double want = 0.0;  // padding
          for (int64_t h = 0; h < b.hkv; ++h) {
            const int64_t src = (token * b.hkv + h) * b.d;
            const int64_t k0 = at(b, 0, 0, h, false, 0), v0 = at(b, 0, 0, h, true, 0);
            if (e >= k0 && e < k0 + b.d) want = in.keys.float_at(src + e - k0);
            if (e >= v0 && e < v0 + b.d) want = in.values.float_at(src + e - v0);
          }
          ASSERT_EQ(r.kv_cache.float_at(base + e), want) << "token " << token << " lane " << e;
        }
      }
    }
    for (int64_t i = 0; i < in.kv_cache.numel(); ++i) {
      if (!written[static_cast<size_t>(i)]) {
        ASSERT_EQ(r.kv_cache.float_at(i), 1.5) << "element " << i;
      }
    }
    // Sequence 0's rows read the fused tokens: finite, since no lane of the cache is NaN.
    for (int64_t i = 0; i < 5 * b.hq * b.d; ++i) ASSERT_TRUE(std::isfinite(r.out.float_at(i)));
  }
}

TEST(V3Kernel, GarbageTheDefinitionNeverReadsStaysUnread) {
  // NaN everywhere in the cache except the sequence's tokens: pages past kv_len, slots past
  // kv_len in its last page, page 0, and the unused page_indices entries (out of range).
  Small c;
  c.in.page_indices.set_int(1, 1 << 30);
  c.in.page_indices.set_int(2, -7);
  c.in.page_indices.set_int(3, 1 << 30);
  const V3KernelResult r = v3_tiled_attention(c.b.dialect, c.in, c.p);
  EXPECT_TRUE(std::isfinite(r.out.float_at(0)));
  EXPECT_TRUE(std::isfinite(r.out.float_at(1)));
}

TEST(V3Kernel, ThreadsAndBlockSizesDoNotChangeTheBits) {
  V3Builder b;
  b.q = BF16;
  b.kv = BF16;
  b.hq = 8;
  b.hkv = 2;
  b.d = 128;
  b.page_size = 16;
  b.pages = 64;
  b.pps = 16;
  b.max_seqs = 4;
  b.tokens = 200;
  b.seqs = {{1, 200}, {150, 180}, {1, 17}, {40, 40}};
  b.fill = 0.0f;
  V3Inputs in = b.build();
  for (Tensor* t : {&in.queries, &in.keys, &in.values}) {
    for (int64_t i = 0; i < t->numel(); ++i) t->set_float(i, std::sin(static_cast<double>(i) * 0.37));
  }
  for (int64_t i = 0; i < in.kv_cache.numel(); ++i) in.kv_cache.set_float(i, std::cos(static_cast<double>(i) * 0.11));
  V3Params p;
  KernelOptions one;
  one.threads = 1;
  KernelOptions two;
  two.threads = 2;
  const V3KernelResult a = v3_tiled_attention(b.dialect, in, p, one);
  const V3KernelResult c = v3_tiled_attention(b.dialect, in, p, two);
  EXPECT_TRUE(a.out == c.out);
  EXPECT_TRUE(a.kv_cache == c.kv_cache);
  p.m_block_sizes = V3BlockSizes{32, 16, 16, 16};  // one page per online-softmax step
  const V3KernelResult small = v3_tiled_attention(b.dialect, in, p, two);
  EXPECT_TRUE(small.kv_cache == a.kv_cache);
  double worst = 0.0;
  for (int64_t i = 0; i < a.out.numel(); ++i) worst = std::max(worst, std::abs(small.out.float_at(i) - a.out.float_at(i)));
  EXPECT_LE(worst, 0x1p-7);  // one bfloat16 rounding of outputs below 1 apart, at most
}

}  // namespace
}  // namespace rpa

namespace rpa {
namespace {

// corpus/fuzz/fuzz_raw_inputs/v3-hd64-huge-kv-pages-per-block: a KV block far past the page
// table is strict-valid (only int32 positions bound it) and must compute what a block of the
// whole page table does, without sizing the kernel's scratch by it.
TEST(V3Kernel, HugeKvBlocksAreClampedToThePageTable) {
  V3Builder b = hd64_builder();
  b.seqs = {{1, 9}};
  V3Inputs in = b.build();
  for (Tensor* t : {&in.queries, &in.keys, &in.values}) {
    for (int64_t i = 0; i < t->numel(); ++i) t->set_float(i, std::sin(0.3 * static_cast<double>(i)));
  }
  for (int64_t i = 0; i < in.kv_cache.numel(); ++i) in.kv_cache.set_float(i, std::cos(0.7 * static_cast<double>(i)));
  V3Params whole;
  whole.num_kv_pages_per_block = b.pps;
  V3Params huge;
  huge.num_kv_pages_per_block = int64_t{1} << 40;
  EXPECT_EQ(v3_kv_pages_per_block(b.dialect, in, huge), b.pps);
  EXPECT_TRUE(v3_tiled_attention(b.dialect, in, huge).out == v3_tiled_attention(b.dialect, in, whole).out);

  V3Builder k;
  k.seqs = {{2, 9}};
  V3Inputs kin = k.build();
  for (int64_t i = 0; i < kin.kv_cache.numel(); ++i) kin.kv_cache.set_float(i, std::cos(0.7 * static_cast<double>(i)));
  V3Params big;
  big.m_block_sizes = V3BlockSizes{16, int64_t{1} << 30, 16, int64_t{1} << 30};
  EXPECT_EQ(v3_kv_pages_per_block(k.dialect, kin, big), k.pps);
  V3Params table;
  table.m_block_sizes = V3BlockSizes{16, k.pps * k.page_size, 16, k.pps * k.page_size};
  EXPECT_TRUE(v3_tiled_attention(k.dialect, kin, big).out == v3_tiled_attention(k.dialect, kin, table).out);
}

}  // namespace
}  // namespace rpa
