// The Pallas kernel's program over its grid, indices only (DESIGN.md sections 5 and 14):
// which KV block each step computes, which one its buffer half holds, which rows it stores.
// JAX's ragged_paged_attention_kernel, read as control flow:
//
//   for heads_blk, q_blk in the grid (heads blocks outer, both "arbitrary": in order):
//     seq, buf = seq_buf_idx            (carried from the previous grid cell; (0, 0) first)
//     at (0, 0): DMA (heads_blk, seq, kv_blk 0) into buf
//     while not done and q_blk * bq < cu_q_lens[num_seqs] and seq < num_seqs:
//       for kv_blk while kv_blk * bkv * S < kv_lens[seq]:
//         next = get_next_prefetch_ids(...); DMA next into the other half unless its
//         heads block is past the last; wait on buf; flash attention over buf, storing
//         the rows of seq inside this query block
//       seq += q_end <= q_blk_end; done = q_end >= q_blk_end
//     seq_buf_idx = (seq < num_seqs ? seq : 0, buf); o block = acc (all rows)
//
// The buffer a step reads is the one the previous step's prefetch guessed. The guess is
// right on the definition's path, but a sequence with kv_len 0 runs no step, so the next
// step reads the block prefetched for the empty sequence (finding 8); and a query block
// that ends exactly at cu_q_lens[num_seqs] hands the next heads block the sequence after
// the last one with rows, so that heads block never computes the rows before (finding 9).
// Integer arithmetic is int32 and wraps, as on the TPU. The walk is shared by the literal
// schedule (which computes each step) and by validation (which checks the DMAs and steps).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "schedule/path_features.h"

namespace rpa {

struct PallasGrid {
  int64_t num_heads_blks = 0;
  int64_t num_q_blks = 0;
  int64_t kv_pages_per_block = 0;  // bkv
  int64_t queries_per_block = 0;   // bq
};

// What a DMA fetches: MultiPageAsyncCopyDescriptor(heads_blk, seq, kv_blk).
struct KvBlockId {
  int64_t heads_blk = 0, seq = 0, kv_blk = 0;
  bool operator==(const KvBlockId&) const = default;
};

class PallasProgramVisitor {
 public:
  virtual ~PallasProgramVisitor() = default;
  // A DMA of block `id` into half `buf` starts (its copy is complete when a step waits).
  virtual void dma(int buf, const KvBlockId& id) = 0;
  // Flash attention of sequence `seq`'s KV block `kv_blk` over half `buf`, storing rows
  // [store_lo, store_hi) of query block q_blk (relative; empty when store_lo >= store_hi).
  // pending: how many DMAs into `buf` were started and not yet waited on; never 0 (a
  // wait with none pending would hang the kernel; the program cannot reach one).
  virtual void step(int64_t heads_blk, int64_t q_blk, int64_t seq, int64_t kv_blk, int buf,
                    int64_t store_lo, int64_t store_hi, int pending) = 0;
  // The grid cell's end: the output block is written from the accumulator.
  virtual void cell_end(int64_t heads_blk, int64_t q_blk) = 0;
};

// Runs the walk. Precondition: the index arrays are int32 of shapes [N], [N, pps], [N+1],
// [1] with 0 <= num_seqs <= N, S >= 1, block sizes >= 1. Returns false, having stopped,
// when more than max_steps steps would run (a KV loop that wraps int32 never ends).
bool walk_pallas_program(const Inputs& in, const PallasGrid& grid, PallasProgramVisitor& visitor,
                         int64_t max_steps);

// The page slot a DMA of `id` copies into buffer page i (0 <= i < bkv): page_indices
// column kv_blk * bkv + i when before the sequence's last page
// (min(pages_per_seq, cdiv(kv_len, S)) in int32), else column 0.
int64_t dma_page_column(const Inputs& in, int64_t bkv, const KvBlockId& id, int64_t i);

// ceil(kv_len / (bkv * S)) KV steps end the loop iff that many blocks' tokens fit in int32:
// the loop compares kv_blk * bkv * S with kv_len in int32.
bool kv_loop_wraps_int32(int64_t kv_len, int64_t block_tokens);

// The path features of a call on its grid (schedule/path_features.h): the walk's KV blocks
// (first, middle, last, partial), query blocks that span sequences or sequences that span
// query blocks, steps over a buffer holding another block (finding 8), rows a cell leaves
// unstored (finding 9), where each sequence's window starts among the KV blocks, how close
// the KV loop's int32 product comes to its wrap, and the call's own (dtypes, window, soft cap,
// scales). The walk only: no data. Precondition as walk_pallas_program's.
PathFeatures jax_path_features(const Inputs& in, const Params& p, const PallasGrid& grid);

// A visitor that follows where the program leaves the definition on a definition-valid
// input. It keeps which block each buffer half holds and which rows of the current query
// block some step stored, and tells its subclass of every step that stores rows over a
// buffer holding another KV block than its own, with other pages or heads in a slot the
// step reads (`departed_step`; shared pages that hold the same data are not one), and of
// every run of defined rows (< cu_q_lens[num_seqs]) a grid cell leaves unstored
// (`unstored_rows`, which keep earlier values). Validation's rules and the properties'
// marking of departed rows both build on it.
class DepartureVisitor : public PallasProgramVisitor {
 public:
  DepartureVisitor(const Inputs& in, const PallasGrid& grid);
  void dma(int buf, const KvBlockId& id) final;
  void step(int64_t heads_blk, int64_t q_blk, int64_t seq, int64_t kv_blk, int buf,
            int64_t store_lo, int64_t store_hi, int pending) final;
  void cell_end(int64_t heads_blk, int64_t q_blk) final;

 protected:
  virtual void on_dma(const KvBlockId& /*id*/) {}
  // want: the step's own block (its heads_blk is the step's); have: the buffer's.
  virtual void departed_step(int64_t q_blk, const KvBlockId& want, const KvBlockId& have,
                             int64_t store_lo, int64_t store_hi) = 0;
  // Rows first..last (absolute) of query block q_blk in heads block heads_blk.
  virtual void unstored_rows(int64_t heads_blk, int64_t q_blk, int64_t first, int64_t last) = 0;
  int64_t page_at(int64_t seq, int64_t column) const;  // page_indices[seq, column]

  const Inputs& in_;
  const PallasGrid grid_;

 private:
  bool same_pages(const KvBlockId& have, const KvBlockId& want) const;

  const int64_t T_, total_;
  KvBlockId held_[2];
  std::vector<char> stored_;  // rows of the current query block some step stored
};

}  // namespace rpa
