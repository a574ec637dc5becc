// The raw-call codec of fuzz_raw_inputs (casegen/jax_raw_call.h): the encoder writes the bytes from
// which the decoder builds the same call, for generated cases and for arbitrary bytes; and
// the bounds hold whatever the bytes. Also the byte codec under it at the int64 extremes, and
// what check_v3_raw_call compares.
#include "casegen/jax_raw_call.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "harness/jax_raw_check.h"
#include "harness/v3_raw_check.h"
#include "kernel/v3_kernel.h"
#include "casegen/byte_source.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_materialize.h"
#include "casegen/random_source.h"
#include "reference/v3_reference.h"
#include "tests/v3_builder.h"
#include "validation/v3_validate.h"

namespace rpa::fuzz {
namespace {

int64_t elements(const Inputs& in) {
  return in.q.numel() + in.kv_pages.numel() + in.kv_lens.numel() + in.page_indices.numel() +
         in.cu_q_lens.numel() + in.num_seqs.numel();
}

// Parameters compare bit for bit, so that NaN equals NaN and -0.0 differs from 0.0.
bool same_bits(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() &&
         (!a || std::bit_cast<uint64_t>(*a) == std::bit_cast<uint64_t>(*b));
}

TEST(RawCall, GeneratedCasesRoundTrip) {
  props::BuildOptions small;
  small.max_seqs = 3;
  small.max_kv_len = 16;
  small.max_head_dim = 8;
  small.max_page_size = 4;
  int encoded = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    props::RandomSource source(seed, 100);
    const props::Materialized m = props::materialize(props::build_case(source, small));
    const std::optional<std::vector<uint8_t>> bytes = encode_raw_call({m.inputs, m.params});
    if (!bytes) {
      EXPECT_GT(elements(m.inputs), kMaxRawElements) << seed;
      continue;
    }
    ++encoded;
    const RawCall back = decode_raw_call(*bytes);
    EXPECT_EQ(back.inputs, m.inputs) << seed;
    const Params& p = m.params;
    const Params& q = back.params;
    EXPECT_TRUE(same_bits(p.sm_scale, q.sm_scale) && same_bits(p.soft_cap, q.soft_cap) &&
                same_bits(p.mask_value, q.mask_value) && same_bits(p.k_scale, q.k_scale) &&
                same_bits(p.v_scale, q.v_scale))
        << seed;
    EXPECT_EQ(q.sliding_window, p.sliding_window) << seed;
    EXPECT_EQ(q.num_kv_pages_per_block, p.num_kv_pages_per_block) << seed;
    EXPECT_EQ(q.num_queries_per_block, p.num_queries_per_block) << seed;
    EXPECT_EQ(q.vmem_limit_bytes, p.vmem_limit_bytes) << seed;
  }
  // Most of these small cases fit the raw budget, so the loop above checked something.
  EXPECT_GT(encoded, 200);
}

TEST(RawCall, AnyBytesDecodeWithinBoundsAndRoundTrip) {
  uint64_t state = 7;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes(props::splitmix64(state) % 600);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(props::splitmix64(state));
    const RawCall c = decode_raw_call(bytes);
    ASSERT_LE(elements(c.inputs), kMaxRawElements) << trial;
    for (const Tensor* t : {&c.inputs.q, &c.inputs.kv_pages, &c.inputs.kv_lens,
                            &c.inputs.page_indices, &c.inputs.cu_q_lens, &c.inputs.num_seqs}) {
      ASSERT_LE(t->rank(), kMaxRawRank) << trial;
      for (int64_t d : t->shape()) ASSERT_LE(d, kMaxRawDim) << trial;
    }
    const std::optional<std::vector<uint8_t>> once = encode_raw_call(c);
    ASSERT_TRUE(once.has_value()) << trial;
    const RawCall back = decode_raw_call(*once);
    EXPECT_EQ(back.inputs, c.inputs) << trial;
    EXPECT_EQ(encode_raw_call(back), once) << trial;
  }
}

// A bool array holds 0 or 1, as numpy's does, whatever the bytes say.
TEST(RawCall, BoolContentsAreZeroOrOne) {
  // Arrays in order kv_lens, page_indices, cu_q_lens, num_seqs, q: float32 (dtype 0), rank
  // 0; kv_pages: bool (dtype 14), rank 1, dim 3 (two bytes). Then the parameters (all
  // defaults: zeros) and the contents, kv_pages' three bytes last.
  std::vector<uint8_t> bytes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14, 1, 3, 0};
  bytes.resize(bytes.size() + 64, 0);
  const RawCall probe = decode_raw_call(bytes);
  ASSERT_EQ(probe.inputs.kv_pages.dtype(), DType::kBool);
  ASSERT_EQ(probe.inputs.kv_pages.shape(), (Shape{3}));
  std::vector<uint8_t> wild = *encode_raw_call(probe);
  ASSERT_GE(wild.size(), 3u);
  wild[wild.size() - 3] = 0xff;
  wild[wild.size() - 2] = 2;
  wild[wild.size() - 1] = 0x81;
  const RawCall c = decode_raw_call(wild);
  ASSERT_EQ(c.inputs.kv_pages.shape(), (Shape{3}));
  EXPECT_EQ(c.inputs.kv_pages.int_at(0), 1);
  EXPECT_EQ(c.inputs.kv_pages.int_at(1), 0);
  EXPECT_EQ(c.inputs.kv_pages.int_at(2), 1);
}

// Ranges with a negative low end, up to the whole of int64: each value reads back from the
// bytes written for it, and the bytes' extremes read as the range's ends (the offsets from
// the low end are computed without wrapping: UBSan's unsigned-integer-overflow check, in
// OSS-Fuzz's flags, reported the wrap on every negative low end).
TEST(ByteSource, RangesReachingBelowZeroRoundTrip) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::pair<int64_t, int64_t> ranges[] = {
      {kMin, kMax}, {kMin, -1}, {kMin, 0}, {-1, kMax}, {-5, 5}, {-300, -2}, {0, kMax}, {7, 7}};
  for (const auto& [lo, hi] : ranges) {
    for (int64_t v : {lo, hi, lo / 2 + hi / 2, int64_t{0}, int64_t{-1}, int64_t{1}}) {
      if (v < lo || v > hi) continue;
      props::ByteSink sink;
      int64_t f = v;
      sink.num(f, lo, hi, {});
      props::ByteSource source(sink.bytes());
      int64_t back = 0;
      source.num(back, lo, hi, {});
      EXPECT_EQ(back, v) << lo << ".." << hi;
    }
    const std::vector<uint8_t> ones(8, 0xff), zeros(8, 0);
    int64_t f = 0;
    props::ByteSource(zeros).num(f, lo, hi, {});
    EXPECT_EQ(f, lo) << lo << ".." << hi;
    // All ones is the widest offset, which wraps modulo the range's size unless that is 2^64.
    props::ByteSource(ones).num(f, lo, hi, {});
    if (lo == kMin && hi == kMax) {
      EXPECT_EQ(f, kMax);
    }
    EXPECT_GE(f, lo);
    EXPECT_LE(f, hi);
  }
}

// check_v3_raw_call compares the output with the definition only where float32 cannot
// overflow. Here q / q_scale (q_scale 2^-100) is +-2^100 against a key of 2^30: in float32 the
// product in q.K is infinite, and the dot inf (or inf - inf = NaN) before the scale multiplies
// it, which is 0 (sm_scale 0, as in the kept reproducer; or 2^-90, whose logit scale 2^-190 is
// 0 as a float32, as in CI's input): the kernel's row is NaN, as a TPU's would be, where the
// exact definition's is V. fuzz_raw_inputs failed on such calls
// (corpus/fuzz/fuzz_raw_inputs/v3-hd64-q-scale-magnifies-dot-past-float32) while the range
// check bounded only the scale times the dot, which the scale kept small. With q_scale 1 the
// same calls are compared, and the kernel agrees.
TEST(RawCheck, V3OutputComparedOnlyWhereTheFloat32DotCannotOverflow) {
  test::V3Builder b;
  b.dialect = Dialect::kTpuInferenceV3Hd64;
  b.d = 64;
  b.page_size = 2;
  b.pages = 2;
  b.max_seqs = 1;
  b.tokens = 1;
  b.pps = 1;
  b.fill = 0.0f;
  b.seqs = {{1, 1}};  // one decode row; its one key is the new token's
  for (const double sm_scale : {0.0, 0x1p-90}) {
    SCOPED_TRACE(sm_scale);
    V3RawCall c;
    c.dialect = b.dialect;
    c.inputs = b.build();
    c.inputs.queries.set_float(0, -1.0);
    c.inputs.keys.set_float(0, 0x1p30);
    if (sm_scale != 0.0) {  // a second product of the other sign: inf - inf
      c.inputs.queries.set_float(1, 1.0);
      c.inputs.keys.set_float(1, 0x1p30);
    }
    for (int64_t i = 0; i < 64; ++i) c.inputs.values.set_float(i, 1.0);
    c.params.sm_scale = sm_scale;
    c.params.q_scale = 0x1p-100;
    ASSERT_EQ(v3_validate(c.dialect, c.inputs, c.params, Mode::kStrict), std::nullopt);
    const V3KernelResult got = v3_tiled_attention(c.dialect, c.inputs, c.params, {.threads = 1});
    const V3ReferenceResult ref =
        v3_reference(c.dialect, c.inputs, c.params, Semantics::kKernel);
    EXPECT_TRUE(std::isnan(got.out.float_at(0)));
    EXPECT_EQ(ref.out.float_at(0), 1.0);
    RawCheck r = check_v3_raw_call(c);
    EXPECT_TRUE(r.ran);
    EXPECT_EQ(r.problem, std::nullopt) << *r.problem;

    // q_scale 1: q.K stays finite in float32; the output is compared and agrees.
    c.params.q_scale = 1.0;
    ASSERT_EQ(v3_validate(c.dialect, c.inputs, c.params, Mode::kStrict), std::nullopt);
    const V3KernelResult fine = v3_tiled_attention(c.dialect, c.inputs, c.params, {.threads = 1});
    EXPECT_EQ(fine.out.float_at(0), 1.0);
    r = check_v3_raw_call(c);
    EXPECT_TRUE(r.ran);
    EXPECT_EQ(r.problem, std::nullopt) << *r.problem;
  }
}

}  // namespace
}  // namespace rpa::fuzz
