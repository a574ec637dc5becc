// Path features (schedule/path_features.h, issue 46): the classifiers at each boundary, both
// sides, and on calls laid out by hand what kernel.py's walk reports: where a decode's window
// starts among its KV blocks, int16 against int32 positions and their distance to the wrap,
// and that the walk without arithmetic reports what the computing program does.
#include <gtest/gtest.h>

#include <string>

#include "schedule/path_features.h"
#include "schedule/v3_program.h"
#include "tests/v3_builder.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

using test::BF16;
using test::V3Builder;

TEST(PathFeatures, CountsEachHit) {
  PathFeatures f;
  f.hit("a");
  f.hit("a", 2);
  f.hit("b");
  EXPECT_EQ(f.count("a"), 3);
  EXPECT_EQ(f.count("b"), 1);
  EXPECT_EQ(f.count("c"), 0);
  EXPECT_EQ(f.size(), 2u);
}

TEST(PathFeatures, BlockRunKinds) {
  EXPECT_STREQ(block_run_kind(3, 3, 4), "only");
  EXPECT_STREQ(block_run_kind(3, 3, 5), "first");
  EXPECT_STREQ(block_run_kind(4, 3, 5), "last");
  EXPECT_STREQ(block_run_kind(4, 3, 6), "middle");
}

// Blocks of 8 over 10 keys: [0, 8) and the partial [8, 10); over 16: two whole blocks.
TEST(PathFeatures, WindowStartKinds) {
  EXPECT_STREQ(window_start_kind(-3, 8, 10), "covers_all");
  EXPECT_STREQ(window_start_kind(0, 8, 10), "covers_all");
  EXPECT_STREQ(window_start_kind(1, 8, 10), "starts_inside_block");
  EXPECT_STREQ(window_start_kind(7, 8, 10), "starts_inside_block");
  EXPECT_STREQ(window_start_kind(8, 8, 10), "starts_at_block_edge");
  EXPECT_STREQ(window_start_kind(9, 8, 10), "starts_inside_partial_last_block");
  EXPECT_STREQ(window_start_kind(10, 8, 10), "past_effective");
  EXPECT_STREQ(window_start_kind(15, 8, 16), "starts_inside_last_block");
  EXPECT_STREQ(window_start_kind(16, 8, 16), "past_effective");
}

TEST(PathFeatures, WrapMarginBuckets) {
  EXPECT_STREQ(wrap_margin_bucket(-1), "wraps");
  EXPECT_STREQ(wrap_margin_bucket(0), "at");
  EXPECT_STREQ(wrap_margin_bucket(1), "within_16");
  EXPECT_STREQ(wrap_margin_bucket(16), "within_16");
  EXPECT_STREQ(wrap_margin_bucket(17), "within_256");
  EXPECT_STREQ(wrap_margin_bucket(256), "within_256");
  EXPECT_STREQ(wrap_margin_bucket(257), "within_4096");
  EXPECT_STREQ(wrap_margin_bucket(4096), "within_4096");
  EXPECT_STREQ(wrap_margin_bucket(4097), "within_32768");
  EXPECT_STREQ(wrap_margin_bucket(32768), "within_32768");
  EXPECT_STREQ(wrap_margin_bucket(32769), "far");
}

// One decode of kv_len 10 in pages of 4, KV blocks of 8 tokens (two pages): blocks [0, 8) and
// the partial [8, 10). Its one row is at position 9; a window W keeps keys > 9 - W.
struct Decode {
  V3Builder b;
  V3Inputs in;
  V3Params p;
  explicit Decode(DType dtype = DType::kFloat32, int64_t window = 0) {
    b.q = b.kv = dtype;
    b.page_size = 4;
    b.pages = 4;
    b.max_seqs = 1;
    b.tokens = 1;
    b.pps = 3;
    b.seqs = {{1, 10}};
    b.fill = 0.0f;
    in = b.build();
    in.distribution.set_int(0, 1);
    in.distribution.set_int(1, 1);
    p.d_block_sizes = p.p_block_sizes = p.m_block_sizes = V3BlockSizes{1, 8, 1, 4};
    if (window > 0) p.sliding_window = window;
  }
  PathFeatures features(int tpu_version = 5) const {
    EXPECT_FALSE(v3_validate(Dialect::kTpuInferenceV3, in, p, Mode::kJax).has_value());
    return v3_path_features(Dialect::kTpuInferenceV3, in, p, tpu_version);
  }
};

TEST(V3PathFeatures, WhereADecodesWindowStartsAmongItsKvBlocks) {
  const PathFeatures none = Decode().features();
  EXPECT_EQ(none.count("decode.kv_block.first"), 1);
  EXPECT_EQ(none.count("decode.kv_block.last"), 1);
  EXPECT_EQ(none.count("decode.kv_block.partial_last"), 1);
  EXPECT_EQ(none.count("decode.kv_block.partial_last_page"), 1);
  EXPECT_EQ(none.count("decode.seq.partial_last_page"), 1);
  EXPECT_EQ(none.count("window"), 0);
  // W = 1: the first kept key, 9, lies inside the partial last block; block 0 is skipped.
  const PathFeatures w1 = Decode(DType::kFloat32, 1).features();
  EXPECT_EQ(w1.count("decode.window.starts_inside_partial_last_block"), 1);
  EXPECT_EQ(w1.count("decode.window.skips_blocks"), 1);
  EXPECT_EQ(w1.count("decode.kv_block.only"), 1);
  EXPECT_EQ(w1.count("decode.kv_block.first"), 0);
  // W = 2: key 8 opens the last block (and key 7, the last masked, ends block 0).
  const PathFeatures w2 = Decode(DType::kFloat32, 2).features();
  EXPECT_EQ(w2.count("decode.window.starts_at_block_edge"), 1);
  EXPECT_EQ(w2.count("decode.window.last_masked_key_ends_a_block"), 1);
  EXPECT_EQ(w2.count("decode.window.starts_inside_partial_last_block"), 0);
  // W = 3: key 7 inside block 0, which is walked.
  const PathFeatures w3 = Decode(DType::kFloat32, 3).features();
  EXPECT_EQ(w3.count("decode.window.starts_inside_block"), 1);
  EXPECT_EQ(w3.count("decode.window.skips_blocks"), 0);
  EXPECT_EQ(w3.count("decode.kv_block.first"), 1);
  // W = 10 keeps key 0: the whole sequence.
  EXPECT_EQ(Decode(DType::kFloat32, 10).features().count("decode.window.covers_all"), 1);
}

// What a call costs in interpret mode ("cost." entries, not features): each pallas_call (the
// decode and the mixed pass here) traces its fetch loop of bkv_p page copies, and each fetch
// starts bkv_p copies, whether or not they bring a key.
TEST(V3PathFeatures, CostsCountTracedAndStartedPageCopies) {
  const PathFeatures two = Decode().features();
  EXPECT_EQ(two.count("cost.traced_page_copies"), 2 + 2);
  EXPECT_EQ(two.count("cost.run_page_copies"), 2 * 2);  // blocks [0, 8) and [8, 10)
  EXPECT_EQ(Decode(DType::kFloat32, 1).features().count("cost.run_page_copies"), 2);  // one skipped
  Decode wide;
  wide.p.d_block_sizes = V3BlockSizes{1, 12, 1, 4};  // one block of three pages
  const PathFeatures one = wide.features();
  EXPECT_EQ(one.count("cost.traced_page_copies"), 3 + 2);
  EXPECT_EQ(one.count("cost.run_page_copies"), 3);
  EXPECT_GE(one.count("cost.traced_compute_bodies"), 2);
}

// kernel.py holds positions in int16 on v6+ with bfloat16 q (finding 25): the last block's last
// compared key, 11 (its one compute block of 4 lanes from key 8), plus the window is the
// largest position compared.
TEST(V3PathFeatures, Int16PositionsAndTheirDistanceToTheWrap) {
  const PathFeatures v5 = Decode(BF16, 32756).features(5);
  EXPECT_EQ(v5.count("decode.positions.int32"), 1);
  EXPECT_EQ(v5.count("decode.positions.int16"), 0);
  const PathFeatures at = Decode(BF16, 32756).features(6);
  EXPECT_EQ(at.count("decode.positions.int16"), 1);
  EXPECT_EQ(at.count("decode.positions.int16.at"), 1);
  const PathFeatures past = Decode(BF16, 32757).features(6);
  EXPECT_EQ(past.count("decode.positions.int16.wraps"), 1);
  // Both blocks come near: 7 + 32755 and 11 + 32755 are 5 and 1 below the wrap.
  const PathFeatures near = Decode(BF16, 32755).features(6);
  EXPECT_EQ(near.count("decode.positions.int16.within_16"), 2);
  EXPECT_EQ(near.count("decode.positions.int16.at"), 0);
}

// The long tier's calls (profile long32k): keys past int16's range, which kernel.py then
// holds in int32 (pages_per_seq * page_size > 32767); no short call walks this.
TEST(V3PathFeatures, PositionsPastInt16AreTheLongTiersAlone) {
  V3Builder b;
  b.q = b.kv = BF16;
  b.page_size = 512;
  b.pages = 66;
  b.max_seqs = 1;
  b.tokens = 1;
  b.pps = 65;
  b.seqs = {{1, 32770}};  // its decode row at position 32769
  b.fill = 0.0f;
  V3Inputs in = b.build();
  in.distribution.set_int(0, 1);
  in.distribution.set_int(1, 1);
  V3Params p;
  p.d_block_sizes = p.p_block_sizes = p.m_block_sizes = V3BlockSizes{1, 4096, 1, 1024};
  ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, in, p, Mode::kStrict).has_value());
  const PathFeatures long_call = v3_path_features(Dialect::kTpuInferenceV3, in, p, 6);
  EXPECT_EQ(long_call.count("decode.positions.int32"), 1);
  // Each of its 9 KV blocks (8 of 4096 tokens, then [32768, 32770)) compares the row at 32769.
  EXPECT_EQ(long_call.count("decode.positions.past_int16"), 9);
  EXPECT_EQ(Decode(BF16).features(6).count("decode.positions.past_int16"), 0);
  EXPECT_EQ(Decode(BF16, 32756).features(6).count("decode.positions.past_int16"), 0);
}

// The walk without arithmetic reports what the computing program walks.
TEST(V3PathFeatures, TheWalkWithoutDataIsTheProgramsPath) {
  for (int64_t w : {0, 1, 2, 5}) {
    const Decode c(DType::kFloat32, w);
    PathFeatures computed;
    v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p,
                         {.tpu_version = 5, .features = &computed});
    EXPECT_EQ(computed.counts(), c.features().counts()) << "window " << w;
  }
}

// A program that stops says so: without block sizes off generations 5-8 the decode pass
// cannot trace (get_default_block_sizes raises).
TEST(V3PathFeatures, AProgramThatStopsSaysHow) {
  Decode c;
  c.p.d_block_sizes.reset();
  ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kJax).has_value());
  EXPECT_EQ(v3_path_features(Dialect::kTpuInferenceV3, c.in, c.p, -1).count("stops.trace"), 1);
  EXPECT_EQ(v3_path_features(Dialect::kTpuInferenceV3, c.in, c.p, 6).count("stops.trace"), 0);
}

// Found by the campaign's path features (issue 46), whose walk takes every call the native
// validators accept: an hd64 call with no q heads (q_heads_zero) and a sink made the literal
// schedule divide by zero (SIGFPE) reshaping the sinks to (-1, 0); numpy cannot either, so
// the kernel does not trace.
TEST(V3PathFeatures, AnHd64CallWithNoQHeadsAndASinkDoesNotTrace) {
  V3Builder b;
  b.dialect = Dialect::kTpuInferenceV3Hd64;
  b.hq = 0;
  b.hkv = 1;
  b.d = 64;
  b.seqs = {{1, 3}};
  V3Inputs in = b.build();
  in.attention_sink = Tensor(DType::kFloat32, {0});
  V3Params p;
  p.num_kv_pages_per_block = 1;
  p.num_queries_per_block = 1;
  ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3Hd64, in, p, Mode::kJax).has_value());
  EXPECT_EQ(v3_path_features(Dialect::kTpuInferenceV3Hd64, in, p, 6).count("stops.trace"), 1);
  try {
    v3_literal_attention(Dialect::kTpuInferenceV3Hd64, in, p, {.tpu_version = 6});
    ADD_FAILURE() << "the literal schedule returned";
  } catch (const V3ProgramError& e) {
    EXPECT_EQ(e.kind(), V3ProgramError::Kind::kTrace);
  }
}

// Found by the campaign's cover (issue 46): native validation accepts a kernel.py fetch block of
// 0 tokens (strict block_size_nonpositive), on which the literal schedule divided by zero
// (SIGFPE). It does not model such a block (kernel.py's has not been run in interpret mode):
// invalid_argument, which rpa check and the campaign report as not judged.
TEST(V3PathFeatures, AFetchBlockOfNoTokensIsNotModelled) {
  Decode c(DType::kFloat32, 3);
  c.p.d_block_sizes = V3BlockSizes{1, 0, 1, 4};
  ASSERT_FALSE(v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kJax).has_value());
  EXPECT_TRUE(v3_validate(Dialect::kTpuInferenceV3, c.in, c.p, Mode::kStrict).has_value());
  EXPECT_THROW(v3_literal_attention(Dialect::kTpuInferenceV3, c.in, c.p, {.tpu_version = 5}),
               std::invalid_argument);
  EXPECT_EQ(v3_path_features(Dialect::kTpuInferenceV3, c.in, c.p, 5).count("stops.not_modelled"), 1);
  // An empty pass does not walk its blocks: the prefill and mixed passes' blocks are not read.
  c.p.p_block_sizes = V3BlockSizes{1, 0, 1, 4};
  c.p.d_block_sizes = V3BlockSizes{1, 8, 1, 4};
  EXPECT_EQ(v3_path_features(Dialect::kTpuInferenceV3, c.in, c.p, 5).count("decode.runs"), 1);
}

}  // namespace
}  // namespace rpa
