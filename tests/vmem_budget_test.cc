// The VMEM and SMEM budgets, against byte counts worked out by hand (each in a comment).
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "validation/jax_vmem_budget.h"

namespace rpa {
namespace {

// S=4, D=8, 2 q heads per kv head, 4 q and 4 combined heads per block, float32.
const VmemShape kSmall{.page_size = 4,
                       .head_dim = 8,
                       .q_heads_per_kv = 2,
                       .heads = {4, 4},
                       .q_dtype = DType::kFloat32,
                       .kv_dtype = DType::kFloat32};

TEST(VmemNeed, SmallFloat32) {
  // KV: 2*4*4 rows-blocks x pad(4 heads, 8) x pad(8, 128) x 4 B = 131072
  // l, m: 2 x [2 kv heads x pad(16*2, 8) x 128 x 4 B] = 65536
  // acc: 16 x pad(4, 8) x 128 x 4 B = 65536; q, o: 2 x 2 x 65536 = 262144
  EXPECT_EQ(vmem_need_bytes(kSmall, {4, 16}), 524288);
  // KV 32768 + l, m 16384 + acc 4096 + q, o 16384
  EXPECT_EQ(vmem_need_bytes(kSmall, {1, 1}), 69632);
}

TEST(VmemNeed, BFloat16PadsHeadsToSixteenRows) {
  const VmemShape s{.page_size = 16,
                    .head_dim = 128,
                    .q_heads_per_kv = 4,
                    .heads = {32, 16},
                    .q_dtype = DType::kBFloat16,
                    .kv_dtype = DType::kBFloat16};
  // KV: 2*8*16 x 16 x 128 x 2 B = 1048576; l, m: 2 x [8 x 128 x 128 x 4 B] = 1048576;
  // acc: 32 x 32 x 128 x 4 B = 524288; q, o: 4 x [32 x 32 x 128 x 2 B] = 1048576.
  EXPECT_EQ(vmem_need_bytes(s, {8, 32}), 3670016);
}

TEST(VmemNeed, SaturatesInsteadOfOverflowing) {
  EXPECT_EQ(vmem_need_bytes(kSmall, {std::numeric_limits<int64_t>::max() / 2, 1}),
            std::numeric_limits<int64_t>::max());
}

TEST(DefaultBlockSizes, JaxDefaultWhenItFits) {
  EXPECT_EQ(default_block_sizes(kSmall, 4, 16, int64_t{32} << 20), (BlockSizes{4, 16}));
  EXPECT_EQ(default_block_sizes(kSmall, 500, 100, int64_t{32} << 20), (BlockSizes{128, 32}));
  // No pages or no tokens still give one-element blocks.
  EXPECT_EQ(default_block_sizes(kSmall, 0, 0, int64_t{32} << 20), (BlockSizes{1, 1}));
}

TEST(DefaultBlockSizes, HalvesKvBlockFirstThenQueryBlock) {
  // (2, 16): KV 65536 + 65536 + 65536 + 262144 = 458752
  EXPECT_EQ(default_block_sizes(kSmall, 4, 16, 458752), (BlockSizes{2, 16}));
  EXPECT_EQ(default_block_sizes(kSmall, 4, 16, 458751), (BlockSizes{1, 16}));
  EXPECT_EQ(default_block_sizes(kSmall, 4, 16, 69632), (BlockSizes{1, 1}));
  EXPECT_FALSE(default_block_sizes(kSmall, 4, 16, 69631).has_value());
}

TEST(SmemNeed, Int32WordsOfThePrefetchedArrays) {
  // 4 + 4*1021 + 5 + 2 + 1 words
  EXPECT_EQ(smem_need_bytes(4, 1021), 16384);
  EXPECT_EQ(smem_need_bytes(4, 1022), 16400);
  EXPECT_EQ(smem_need_bytes(0, 0), 16);  // cu_q_lens[0], (seq, buf), num_seqs
}

}  // namespace
}  // namespace rpa
