// The Pallas program's walk (schedule/jax_program.h) on two small batches, event by event,
// against the chain worked out by hand from JAX's ragged_paged_attention_kernel.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "schedule/jax_program.h"
#include "tests/inputs_builder.h"

namespace rpa {
namespace {

// Writes each event as one line: "dma BUF h,s,k", "step h,q s,k BUF [lo,hi) pending", "end h,q".
class Recorder : public PallasProgramVisitor {
 public:
  std::string log;
  void dma(int buf, const KvBlockId& id) override {
    log += "dma " + std::to_string(buf) + " " + ids(id.heads_blk, id.seq, id.kv_blk) + "\n";
  }
  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t lo,
            int64_t hi, int pending) override {
    log += "step " + std::to_string(hb) + "," + std::to_string(qb) + " " +
           std::to_string(seq) + "," + std::to_string(kv_blk) + " " + std::to_string(buf) +
           " [" + std::to_string(lo) + "," + std::to_string(hi) + ") " +
           std::to_string(pending) + "\n";
  }
  void cell_end(int64_t hb, int64_t qb) override {
    log += "end " + std::to_string(hb) + "," + std::to_string(qb) + "\n";
  }

 private:
  static std::string ids(int64_t a, int64_t b, int64_t c) {
    return std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c);
  }
};

// The log of the walk over sequences `seqs` (pages of 4 tokens, T = 16), one page a KV block,
// query blocks of 4, `heads_blks` heads blocks; empty if the walk does not finish.
std::string walk_log(std::vector<testing::SeqLens> seqs, int64_t heads_blks) {
  testing::InputsSpec s;
  s.seqs = std::move(seqs);
  const Inputs in = testing::build_inputs(s);
  Recorder r;
  const bool done = walk_pallas_program(in,
                                        {.num_heads_blks = heads_blks,
                                         .num_q_blks = 4,
                                         .kv_pages_per_block = 1,
                                         .queries_per_block = 4},
                                        r, 100);
  return done ? r.log : "";
}

// Sequences (q_len, kv_len) (1, 5), (0, 0), (2, 2), pages of 4 tokens, one page a KV block,
// query blocks of 4 over T = 16, one heads block. Sequence 1 is empty: the last step of
// sequence 0 prefetches its block 0 into buffer 0, and sequence 2's step reads that buffer.
TEST(PallasProgram, EmptySequenceHandsItsPrefetchToTheNextStep) {
  EXPECT_EQ(walk_log({{1, 5}, {0, 0}, {2, 2}}, 1),
            "dma 0 0,0,0\n"
            "dma 1 0,0,1\n"
            "step 0,0 0,0 0 [0,1) 1\n"
            "dma 0 0,1,0\n"
            "step 0,0 0,1 1 [0,1) 1\n"
            "step 0,0 2,0 0 [1,3) 1\n"  // wraps to heads block 1, which does not exist
            "end 0,0\nend 0,1\nend 0,2\nend 0,3\n");
}

// Sequences (2, 5), (2, 7), (0, 3), two heads blocks, query blocks of 4: rows end at 4, the
// first query block's end, so heads block 0 leaves seq_buf_idx at the empty sequence 2 and
// heads block 1 starts there, storing nothing.
TEST(PallasProgram, TrailingEmptySequenceStartsTheNextHeadsBlock) {
  EXPECT_EQ(walk_log({{2, 5}, {2, 7}, {0, 3}}, 2),
            "dma 0 0,0,0\n"
            "dma 1 0,0,1\n"
            "step 0,0 0,0 0 [0,2) 1\n"
            "dma 0 0,1,0\n"
            "step 0,0 0,1 1 [0,2) 1\n"
            "dma 1 0,1,1\n"
            "step 0,0 1,0 0 [2,4) 1\n"
            "dma 0 0,2,0\n"
            "step 0,0 1,1 1 [2,4) 1\n"
            "end 0,0\nend 0,1\nend 0,2\nend 0,3\n"
            "step 1,0 2,0 0 [4,4) 1\n"  // heads block 1 never sees sequences 0 and 1
            "end 1,0\nend 1,1\nend 1,2\nend 1,3\n");
}

TEST(PallasProgram, StopsAtTheStepBudget) {
  testing::InputsSpec s;
  s.seqs = {{1, 5}};
  const Inputs in = testing::build_inputs(s);
  Recorder r;
  EXPECT_FALSE(walk_pallas_program(
      in, {.num_heads_blks = 1, .num_q_blks = 1, .kv_pages_per_block = 1, .queries_per_block = 16},
      r, 1));
}

TEST(PallasProgram, KvLoopWrapsInt32) {
  EXPECT_FALSE(kv_loop_wraps_int32(2147483632, 16));  // 134217727 blocks of 16: INT32_MAX - 15
  EXPECT_TRUE(kv_loop_wraps_int32(2147483633, 16));   // one more block reaches 2^31
  EXPECT_FALSE(kv_loop_wraps_int32(0, 16));
  EXPECT_FALSE(kv_loop_wraps_int32(-5, 16));
}

}  // namespace
}  // namespace rpa
