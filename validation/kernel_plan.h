// The grid and blocks a tiled schedule runs a call with: the heads per grid step, the pages per
// KV block and rows per query block, and the VMEM they take. Every dialect's default schedule
// (kernel/default_schedule.h) runs on one; the jax dialect plans it from JAX's VMEM budget
// (validation/jax_kernel_plan.h), tpu-inference v3 from its own block sizes (kernel/v3_kernel.cc).
#pragma once

#include <cstdint>

namespace rpa {

// How many heads one grid step processes.
struct HeadsPerBlock {
  int64_t q_heads;            // query heads per grid step
  int64_t combined_kv_heads;  // K and V heads per grid step (twice the kv heads)
};

struct BlockSizes {
  int64_t kv_pages_per_block;  // bkv: pages per KV block
  int64_t queries_per_block;   // bq: query rows per query block
  bool operator==(const BlockSizes&) const = default;
};

// The grid and buffers the kernel will use for a call.
struct KernelPlan {
  HeadsPerBlock heads;     // q heads and combined kv heads per heads block
  BlockSizes blocks;       // pages per KV block, rows per query block
  int64_t num_heads_blks;  // grid dimension 0
  int64_t num_q_blks;      // grid dimension 1
  int64_t vmem_bytes;      // what the TPU would scope for these blocks
};

}  // namespace rpa
