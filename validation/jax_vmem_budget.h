// The kernel's scoped VMEM and SMEM needs (DESIGN.md section 4), shared by validation and
// the tiled kernel so that what validation accepts is exactly what the kernel allocates.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "validation/jax_heads_per_block.h"

namespace rpa {

// What the VMEM footprint depends on besides the block sizes.
struct VmemShape {
  int64_t page_size;        // S
  int64_t head_dim;         // D
  int64_t q_heads_per_kv;   // Hq / Hkv
  HeadsPerBlock heads;      // from min_heads_per_block
  DType q_dtype;
  DType kv_dtype;
};

// Bytes of VMEM the kernel's buffers take for these block sizes: the KV double buffer
// [2, bkv, S, Hc_blk, D], the l and m scratch [Hkv_blk, bq * Hq/Hkv, 128] f32 each, the
// accumulator [bq, Hq_blk, D] f32, and the q and o blocks [bq, Hq_blk, D] double-buffered
// by the pipeline, each padded on its last two dims to TPU tiles (8 * packing rows, 128
// lanes). Saturates at INT64_MAX rather than overflowing.
int64_t vmem_need_bytes(const VmemShape& shape, BlockSizes blocks);

// JAX's untuned default block sizes (get_tuned_block_sizes on a TPU v5 or later without a
// table entry): (min(pages_per_seq, 128), min(T, 32)), each at least 1. What the Pallas
// kernel runs with in jax mode when the call does not give both.
BlockSizes untuned_block_sizes(int64_t pages_per_seq, int64_t max_num_batched_tokens);

// The untuned default block sizes, then halved (bkv first, then bq) until they fit vmem_limit. nullopt if even (1, 1) does not.
std::optional<BlockSizes> default_block_sizes(const VmemShape& shape, int64_t pages_per_seq,
                                              int64_t max_num_batched_tokens,
                                              int64_t vmem_limit);

// Bytes of SMEM the scalar-prefetched arrays take: kv_lens [N], page_indices
// [N, pages_per_seq], cu_q_lens [N + 1], the kernel's (seq_idx, buf_idx) pair and
// num_seqs [1], all int32. Saturates at INT64_MAX.
int64_t smem_need_bytes(int64_t max_num_seqs, int64_t pages_per_seq);

}  // namespace rpa
