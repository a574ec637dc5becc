// get_min_heads_per_blk, checked against values worked out by hand from JAX's kernel.py.
#include <gtest/gtest.h>

#include "validation/jax_heads_per_block.h"

namespace rpa {
namespace {

TEST(DTypePacking, ElementsPer32BitWord) {
  EXPECT_EQ(dtype_packing(DType::kFloat32), 1);
  EXPECT_EQ(dtype_packing(DType::kInt32), 1);
  EXPECT_EQ(dtype_packing(DType::kBFloat16), 2);
  EXPECT_EQ(dtype_packing(DType::kFloat8E4M3FN), 4);
  EXPECT_EQ(dtype_packing(DType::kFloat8E5M2), 4);
  EXPECT_EQ(dtype_packing(DType::kFloat64), 0);  // Python's 32 // 64
}

TEST(CanBeXlaFullyTiled, CountsOfOneTwoFourEightOrMultiplesOfEight) {
  EXPECT_TRUE(can_be_xla_fully_tiled(0, 1));
  EXPECT_TRUE(can_be_xla_fully_tiled(1, 1));
  EXPECT_TRUE(can_be_xla_fully_tiled(2, 1));
  EXPECT_FALSE(can_be_xla_fully_tiled(3, 1));
  EXPECT_TRUE(can_be_xla_fully_tiled(4, 1));
  EXPECT_FALSE(can_be_xla_fully_tiled(6, 1));
  EXPECT_FALSE(can_be_xla_fully_tiled(12, 1));
  EXPECT_TRUE(can_be_xla_fully_tiled(24, 1));
  EXPECT_FALSE(can_be_xla_fully_tiled(6, 2));   // 3 words
  EXPECT_TRUE(can_be_xla_fully_tiled(16, 2));   // 8 words
  EXPECT_FALSE(can_be_xla_fully_tiled(2, 4));   // not a whole word
  EXPECT_TRUE(can_be_xla_fully_tiled(32, 4));
}

void expect_heads(int64_t hq, int64_t hc, DType q, DType kv, int64_t want_q, int64_t want_c) {
  const auto h = min_heads_per_block(hq, hc, q, kv);
  ASSERT_TRUE(h.has_value()) << hq << "/" << hc;
  EXPECT_EQ(h->q_heads, want_q) << hq << "/" << hc;
  EXPECT_EQ(h->combined_kv_heads, want_c) << hq << "/" << hc;
}

TEST(MinHeadsPerBlock, OneTileOfCombinedHeadsWhenTheyDivide) {
  // 16 combined f32 heads split into tiles of 8: 4 kv heads x ratio 4 = 16 q heads.
  expect_heads(32, 16, DType::kFloat32, DType::kFloat32, 16, 8);
  // bf16 tiles hold 16 rows: all 16 combined heads, 8 kv heads x ratio 4.
  expect_heads(32, 16, DType::kBFloat16, DType::kBFloat16, 32, 16);
  // fp8 tiles hold 32 rows.
  expect_heads(16, 32, DType::kBFloat16, DType::kFloat8E5M2, 16, 32);
}

TEST(MinHeadsPerBlock, AllHeadsWhenTheyDoNotFillATile) {
  expect_heads(4, 4, DType::kFloat32, DType::kFloat32, 4, 4);
  expect_heads(8, 2, DType::kBFloat16, DType::kBFloat16, 8, 2);
}

TEST(MinHeadsPerBlock, FallsBackToAllHeadsWhenQHeadsDoNotTile) {
  // One tile is 4 kv heads x ratio 3 = 12 q heads, which does not tile: take all 24.
  expect_heads(24, 16, DType::kFloat32, DType::kFloat32, 24, 16);
}

TEST(MinHeadsPerBlock, NotTileable) {
  EXPECT_FALSE(min_heads_per_block(6, 6, DType::kFloat32, DType::kFloat32).has_value());
  // MQA with fp8 KV: 2 combined heads are half a 32-bit word.
  EXPECT_FALSE(min_heads_per_block(8, 2, DType::kBFloat16, DType::kFloat8E4M3FN).has_value());
}

}  // namespace
}  // namespace rpa
