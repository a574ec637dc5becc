// The raw-call codec of fuzz_raw_inputs (fuzz/raw_call.h): the encoder writes the bytes from
// which the decoder builds the same call, for generated cases and for arbitrary bytes; and
// the bounds hold whatever the bytes.
#include "fuzz/raw_call.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "properties/build_case.h"
#include "properties/materialize.h"
#include "properties/random_source.h"

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

}  // namespace
}  // namespace rpa::fuzz
