// The literal v3 schedule (schedule/v3_program.h): the pieces of XLA's arithmetic it follows
// (the bfloat16 row sum's order, measured against jax 0.11.2 on the CPU; kernel.py's default
// block sizes, the values tpu-inference 0.32.0's get_default_block_sizes returns), and on
// calls laid out by hand what the kernel's program does where it leaves the definition: rows
// no pass stores keep the queries (and the prefill range's new tokens never reach the cache),
// skip_kv_mask reads the KV buffer's NaN scratch past kv_len, a decode-range sequence of two
// rows gets one computed. Against tpu-inference's kernels themselves: ctest -L jax_v3.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "schedule/xla_row_sum.h"
#include "tests/v3_builder.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

using test::at;
using test::BF16;
using test::F32;
using test::V3Builder;

// Expected sums: jax.jit(lambda v: jnp.sum(v, dtype=jnp.bfloat16)) on jax 0.11.2's CPU backend.
TEST(XlaRowSum, BFloat16IsSummedInWindowsOf32) {
  std::vector<float> head_heavy(40, 0x1p-9f), tail_heavy(40, 0x1p-9f);
  head_heavy[0] = 1.0f;
  tail_heavy[39] = 1.0f;
  EXPECT_EQ(xla_row_sum(head_heavy, BF16), 1.0390625f);  // in order: 1.0; once: 1.078125
  EXPECT_EQ(xla_row_sum(tail_heavy, BF16), 1.078125f);
  EXPECT_EQ(xla_row_sum(std::vector<float>(1100, 1.0f), BF16), 1104.0f);
  EXPECT_EQ(xla_row_sum({0.5f, 0.25f}, F32), 0.75f);
}

// A call of kernel.py's shape only: what get_default_block_sizes reads.
V3Inputs shaped(DType q, DType kv, int64_t hq, int64_t hkv, int64_t d, int64_t page_size,
                int64_t tokens, int64_t max_seqs, int64_t pps) {
  V3Inputs in;
  in.queries = Tensor(q, {tokens, hq, d});
  in.keys = Tensor(kv, {tokens, hkv, d});
  in.values = Tensor(kv, {tokens, hkv, d});
  in.kv_cache = Tensor(kv, V3CacheLayout(Dialect::kTpuInferenceV3, kv, hkv, d).cache_shape(1, page_size));
  in.kv_lens = Tensor(DType::kInt32, {max_seqs});
  in.page_indices = Tensor(DType::kInt32, {max_seqs * pps});
  return in;
}

// A malformed call (what a shape mutation makes: zero heads, head_dim, page_size or slots)
// has no default block sizes, rather than a division by zero (found by the production
// properties' v3 mutations on calls that leave the block sizes to the defaults); the
// smallest well-formed call still has them.
TEST(V3Program, NoDefaultBlockSizesForAMalformedCall) {
  const V3Params none;
  const V3Inputs ok = shaped(BF16, BF16, 1, 1, 1, 2, 1, 1, 1);
  EXPECT_TRUE(v3_block_sizes(ok, none, V3Pass::kMixed, 6).has_value());
  for (const V3Inputs& in : {shaped(BF16, BF16, 8, 0, 128, 16, 512, 8, 4),
                             shaped(BF16, BF16, 0, 1, 128, 16, 512, 8, 4),
                             shaped(BF16, BF16, 8, 1, 0, 16, 512, 8, 4),
                             shaped(BF16, BF16, 8, 1, 128, 0, 512, 8, 4),
                             shaped(BF16, BF16, 8, 1, 128, 16, 512, 0, 4),
                             shaped(BF16, BF16, 1, 2, 128, 16, 512, 8, 4)}) {
    for (V3Pass pass : {V3Pass::kDecode, V3Pass::kPrefill, V3Pass::kMixed}) {
      EXPECT_FALSE(v3_block_sizes(in, none, pass, 6).has_value());
    }
  }
  V3Inputs flat = shaped(BF16, BF16, 8, 1, 128, 16, 512, 8, 4);
  flat.queries = Tensor(BF16, {512, 8 * 128});
  EXPECT_FALSE(v3_block_sizes(flat, none, V3Pass::kMixed, 6).has_value());
  EXPECT_THROW(v3_pass_block_sizes(flat, none, V3Pass::kMixed, 6), V3ProgramError);
}

TEST(V3Program, DefaultBlockSizesAreTpuInferences) {
  const V3Params none;
  const V3Inputs a = shaped(BF16, BF16, 8, 1, 128, 16, 512, 256, 1024);
  const V3Inputs b = shaped(F32, DType::kFloat8E4M3FN, 12, 2, 80, 16, 100, 8, 5);
  const V3Inputs c = shaped(BF16, BF16, 6, 2, 128, 16, 48, 4, 3);
  EXPECT_EQ(v3_pass_block_sizes(a, none, V3Pass::kDecode, 6), (V3BlockSizes{1, 16384, 1, 16384}));
  EXPECT_EQ(v3_pass_block_sizes(a, none, V3Pass::kMixed, 5), (V3BlockSizes{128, 1024, 64, 512}));
  EXPECT_EQ(v3_pass_block_sizes(a, none, V3Pass::kMixed, 7), (V3BlockSizes{256, 2048, 128, 512}));
  EXPECT_EQ(v3_pass_block_sizes(b, none, V3Pass::kDecode, 7), (V3BlockSizes{1, 80, 1, 80}));
  EXPECT_EQ(v3_pass_block_sizes(b, none, V3Pass::kMixed, 6), (V3BlockSizes{64, 80, 64, 48}));
  EXPECT_EQ(v3_pass_block_sizes(b, none, V3Pass::kPrefill, 7), (V3BlockSizes{64, 48, 64, 48}));
  EXPECT_EQ(v3_pass_block_sizes(c, none, V3Pass::kMixed, 5), (V3BlockSizes{32, 48, 64, 32}));
  EXPECT_EQ(v3_pass_block_sizes(c, none, V3Pass::kMixed, 7), (V3BlockSizes{32, 32, 32, 32}));
  V3Params given;
  given.m_block_sizes = V3BlockSizes{8, 16, 4, 8};
  EXPECT_EQ(v3_pass_block_sizes(c, given, V3Pass::kMixed, -1), (V3BlockSizes{8, 16, 4, 8}));
  try {
    v3_pass_block_sizes(c, none, V3Pass::kMixed, -1);
    FAIL() << "no block sizes and no generation";
  } catch (const V3ProgramError& e) {
    EXPECT_EQ(e.kind(), V3ProgramError::Kind::kTrace);
    EXPECT_NE(std::string(e.what()).find("Unsupported tpu_version=-1"), std::string::npos) << e.what();
  }
}

// Three sequences with fresh queries, keys and values (q rows 1 + 3 + 2, kv 5, 7, 6).
struct Batch {
  V3Builder b;
  V3Inputs in;
  V3Params p;
  explicit Batch(DType dtype = F32) {
    b.q = b.kv = dtype;
    b.hq = 2;
    b.d = 8;
    b.page_size = 4;
    b.pages = 12;
    b.max_seqs = 3;
    b.tokens = 8;
    b.seqs = {{1, 5}, {3, 7}, {2, 6}};
    b.fill = 0.0f;
    in = b.build();
    uint32_t x = 12345;
    const auto next = [&x] {
      x = x * 1664525u + 1013904223u;
      return static_cast<float>(static_cast<int>(x >> 9) % 2001 - 1000) / 500.0f;
    };
    for (Tensor* t : {&in.queries, &in.keys, &in.values, &in.kv_cache}) {
      for (int64_t i = 0; i < t->numel(); ++i) t->set_float(i, next());
    }
    p.d_block_sizes = V3BlockSizes{1, 8, 1, 4};
    p.p_block_sizes = V3BlockSizes{2, 8, 2, 4};
    p.m_block_sizes = V3BlockSizes{2, 8, 2, 4};
  }
  void distribute(int32_t decode_end, int32_t prefill_end) {
    in.distribution.set_int(0, decode_end);
    in.distribution.set_int(1, prefill_end);
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel() * dtype_size(a.dtype()))) == 0;
}

TEST(V3Program, AgreesWithTheKernelSemanticsOnAStrictValidCall) {
  for (const DType dtype : {F32, BF16}) {
    Batch c(dtype);
    c.distribute(1, 1);
    ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kStrict).has_value());
    const V3KernelResult lit = v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p);
    const V3ReferenceResult ref = v3_reference(Dialect::kTpuInferenceV3, c.in, c.p, Semantics::kKernel);
    const V3Comparison cmp = v3_compare(Dialect::kTpuInferenceV3, c.in, c.p, ref, lit.out, lit.kv_cache);
    EXPECT_TRUE(cmp.agree()) << describe_v3_comparison(cmp);
    // and the schedule tolerance takes the literal schedule's own answer, not the tiled kernel's
    // cache with one bit flipped
    const V3LiteralRun run = v3_literal_run(Dialect::kTpuInferenceV3, c.in, c.p, {});
    EXPECT_EQ(run.outside, 0);
    const V3Comparison self = v3_compare_literal(Dialect::kTpuInferenceV3, c.in, run, lit.out, lit.kv_cache);
    EXPECT_TRUE(self.agree());
    EXPECT_EQ(self.max_abs_err, 0.0);
    Tensor flipped = lit.kv_cache;
    flipped.set_float(at(c.b, 1, 0, 0, true, 0), flipped.float_at(at(c.b, 1, 0, 0, true, 0)) + 1.0f);
    EXPECT_FALSE(v3_compare_literal(Dialect::kTpuInferenceV3, c.in, run, lit.out, flipped).agree());
  }
}

// The literal schedule writes the fused cache update into its own copy of the cache, never
// into a borrowed input (the Python package hands the caller's numpy arrays in borrowed):
// jax_v3.harness found rpa.check, which runs the literal schedule since issue 47, writing the
// new tokens into the caller's kv_cache through a const pointer cast away.
TEST(V3Program, NeverWritesIntoABorrowedCache) {
  Batch c(F32);
  c.distribute(1, 1);
  const Tensor owned = c.in.kv_cache;
  V3Inputs in = c.in;
  in.kv_cache = Tensor::borrow(owned.dtype(), owned.shape(), owned.data());
  const std::vector<std::byte> before(owned.data(), owned.data() + owned.nbytes());
  const V3KernelResult lit = v3_literal_attention(Dialect::kTpuInferenceV3, in, c.p);
  EXPECT_EQ(std::memcmp(owned.data(), before.data(), before.size()), 0);
  EXPECT_FALSE(same_bits(lit.kv_cache, owned));  // the update happened, in the result
  EXPECT_TRUE(same_bits(lit.kv_cache, v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p).kv_cache));
  const V3LiteralRun run = v3_literal_run(Dialect::kTpuInferenceV3, in, c.p, {});
  EXPECT_EQ(std::memcmp(owned.data(), before.data(), before.size()), 0);
}

// finding 15: a prefill range without chunk_prefill_size has no pass. Its rows keep the
// queries (the output aliases q) and its new keys and values never reach the cache.
TEST(V3Program, APrefillRangeWithoutChunkSizeIsNeverComputed) {
  Batch c;
  c.distribute(1, 2);  // sequence 1 (rows 1..3) in the prefill range
  ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kJax).has_value());
  const V3KernelResult lit = v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p);
  for (int64_t e = 1 * 2 * 8; e < 4 * 2 * 8; ++e) {
    EXPECT_EQ(lit.out.float_at(e), c.in.queries.float_at(e)) << "element " << e;
  }
  // sequence 1's new tokens (kv positions 4..6: its second page, page 4, slots 0..2) are not
  // written
  for (int64_t slot : {0, 1, 2}) {
    EXPECT_EQ(lit.kv_cache.float_at(at(c.b, 4, slot, 0, false, 0)),
              c.in.kv_cache.float_at(at(c.b, 4, slot, 0, false, 0)));
  }
  // the other two sequences are computed
  const V3ReferenceResult ref = v3_reference(Dialect::kTpuInferenceV3, c.in, c.p, Semantics::kKernel);
  EXPECT_NEAR(lit.out.float_at(0), ref.out.float_at(0), 1e-5);
  EXPECT_NEAR(lit.out.float_at(4 * 16), ref.out.float_at(4 * 16), 1e-5);
  // with chunk_prefill_size 3 the pass runs and the call is the definition again
  c.p.chunk_prefill_size = 3;
  const V3KernelResult chunked = v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p);
  const V3ReferenceResult ref3 = v3_reference(Dialect::kTpuInferenceV3, c.in, c.p, Semantics::kKernel);
  EXPECT_TRUE(v3_compare(Dialect::kTpuInferenceV3, c.in, c.p, ref3, chunked.out, chunked.kv_cache).agree());
  EXPECT_EQ(chunked.kv_cache.float_at(at(c.b, 4, 0, 0, false, 0)), c.in.keys.float_at(1 * 1 * 8));
}

// finding 19: skip_kv_mask with kv_len 5 inside a KV compute block of 4 slots: the second
// block reads slots 5..7 of the KV buffer, which hold its NaN scratch (nothing was fetched
// there yet), and sequence 0's row comes out NaN.
TEST(V3Program, SkipKvMaskReadsTheBuffersScratchPastKvLen) {
  Batch c;
  c.distribute(0, 0);
  c.p.use_causal_mask = false;
  c.p.skip_kv_mask = true;
  ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kJax).has_value());
  const V3KernelResult lit = v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p);
  for (int64_t e = 0; e < 16; ++e) EXPECT_TRUE(std::isnan(lit.out.float_at(e))) << "element " << e;
}

// finding 15: a decode-range sequence of two rows. The decode pass computes one row (static
// q_len 1); its output block of bq_sz rows is sent whole: with bq_sz 1 row 2 keeps its query,
// with bq_sz 2 it is the accumulator's untouched row, 0 / 0.
TEST(V3Program, ADecodeSequenceOfTwoRowsGetsOneComputed) {
  for (const int64_t bq : {1, 2}) {
    V3Builder b;
    b.hq = 1;
    b.d = 8;
    b.max_seqs = 1;
    b.tokens = 4;
    b.fill = 0.5f;
    b.seqs = {{2, 6}};
    V3Inputs in = b.build();
    for (int64_t i = 0; i < in.queries.numel(); ++i) in.queries.set_float(i, 0.25f * static_cast<float>(i % 5));
    in.distribution.set_int(0, 1);
    in.distribution.set_int(1, 1);
    V3Params p;
    p.d_block_sizes = V3BlockSizes{bq, 8, 1, 8};
    p.m_block_sizes = V3BlockSizes{2, 8, 2, 8};
    ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, in, p, Mode::kJax).has_value());
    const V3KernelResult lit = v3_literal_attention(Dialect::kTpuInferenceV3, in, p);
    for (int64_t c = 0; c < 8; ++c) {
      EXPECT_FALSE(std::isnan(lit.out.float_at(c)));
      if (bq == 1) {
        EXPECT_EQ(lit.out.float_at(8 + c), in.queries.float_at(8 + c));
      } else {
        EXPECT_TRUE(std::isnan(lit.out.float_at(8 + c)));
      }
    }
  }
}

// An inf in V that a row masks still reaches that row: the program multiplies the masked
// slot's weight, exactly 0, by the whole block of V (0 * inf is NaN), as the MXU does. The
// literal schedule skips the p.V terms of weight 0 only where the slot's V is finite.
TEST(V3Program, AnInfiniteValueAMaskedSlotHoldsMakesTheRowNaN) {
  for (const Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    const bool hd64 = d == Dialect::kTpuInferenceV3Hd64;
    V3Builder b;
    b.dialect = d;
    b.hq = 2;
    b.d = hd64 ? 64 : 8;
    b.max_seqs = 1;
    b.tokens = 4;
    b.fill = 0.0f;
    b.seqs = {{3, 6}};  // q rows at positions 3, 4, 5
    V3Inputs in = b.build();
    uint32_t x = 7;
    for (Tensor* t : {&in.queries, &in.keys, &in.values, &in.kv_cache}) {
      for (int64_t i = 0; i < t->numel(); ++i) {
        x = x * 1664525u + 1013904223u;
        t->set_float(i, static_cast<float>(static_cast<int>(x >> 9) % 2001 - 1000) / 1000.0f);
      }
    }
    V3Params p;
    if (hd64) {
      p.num_kv_pages_per_block = 1;
      p.num_queries_per_block = 4;
    } else {
      in.distribution.set_int(0, 0);  // one mixed sequence
      in.distribution.set_int(1, 0);
      in.distribution.set_int(2, 1);
      p.d_block_sizes = V3BlockSizes{1, 8, 1, 8};  // every pass traces, with or without rows
      p.p_block_sizes = V3BlockSizes{4, 8, 4, 8};
      p.m_block_sizes = V3BlockSizes{4, 8, 4, 8};
    }
    ASSERT_FALSE(v3_validate(d, in, p, Mode::kStrict).has_value()) << dialect_name(d);
    const V3KernelResult finite = v3_literal_attention(d, in, p);
    // the last new token (position 5, q row 2) gets V = inf in lane 0: rows 0 and 1 mask it
    in.values.set_float(2 * b.d, std::numeric_limits<float>::infinity());
    const V3KernelResult lit = v3_literal_attention(d, in, p);
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t head = 0; head < b.hq; ++head) {
        const int64_t e = (row * b.hq + head) * b.d;
        EXPECT_FALSE(std::isnan(finite.out.float_at(e))) << dialect_name(d) << " row " << row;
        EXPECT_TRUE(std::isnan(lit.out.float_at(e))) << dialect_name(d) << " row " << row
                                                     << " head " << head << ": " << lit.out.float_at(e);
        // the other lanes never see the inf
        EXPECT_EQ(lit.out.float_at(e + 1), finite.out.float_at(e + 1)) << dialect_name(d);
      }
    }
  }
}

// A call whose default block sizes need a generation stops at trace without one.
TEST(V3Program, NoBlockSizesAndNoGenerationCannotTrace) {
  Batch c;
  c.p = V3Params{};
  try {
    v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p, {.tpu_version = -1});
    FAIL();
  } catch (const V3ProgramError& e) {
    EXPECT_EQ(e.kind(), V3ProgramError::Kind::kTrace);
  }
  const V3KernelResult v6 = v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p, {.tpu_version = 6});
  const V3ReferenceResult ref = v3_reference(Dialect::kTpuInferenceV3, c.in, c.p, Semantics::kKernel);
  EXPECT_TRUE(v3_compare(Dialect::kTpuInferenceV3, c.in, c.p, ref, v6.out, v6.kv_cache).agree());
  EXPECT_TRUE(same_bits(v6.kv_cache, ref.kv_cache));
}

// Finding 27 (found by the long tier's campaign, issue 46): kernel.py's validators take
// head_dim 0, its kernel cannot trace it (strided_load asserts sz % step with step 0: a
// ZeroDivisionError in TPU interpret mode on every call); the literal schedule computed it, and
// so a campaign called the shipped file's raise a finding.
TEST(V3Program, HeadDimZeroCannotTrace) {
  Batch c;
  const auto zero_width = [](const Tensor& t) { return Tensor(t.dtype(), {t.dim(0), t.dim(1), 0}); };
  c.in.queries = zero_width(c.in.queries);
  c.in.keys = zero_width(c.in.keys);
  c.in.values = zero_width(c.in.values);
  Shape shape = c.in.kv_cache.shape();
  shape[4] = 0;
  c.in.kv_cache = Tensor(c.in.kv_cache.dtype(), shape);
  try {
    v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p, {.tpu_version = 6});
    FAIL() << "head_dim 0 traced";
  } catch (const V3ProgramError& e) {
    EXPECT_EQ(e.kind(), V3ProgramError::Kind::kTrace);
    EXPECT_NE(std::string(e.what()).find("head_dim 0"), std::string::npos) << e.what();
  }
  // Native mode reports it as the kernel's crash, after the validators' own rules.
  const std::optional<V3Failure> f = v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kJax);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, V3RuleId::head_dim_zero);
}

}  // namespace
}  // namespace rpa
