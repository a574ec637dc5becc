// The TPU-tiled kernel on a CPU (DESIGN.md section 5): JAX's Pallas schedule — heads
// blocks, query blocks that span sequences, KV blocks of pages copied into a VMEM-sized
// double buffer, online softmax — with float32 arithmetic where the TPU has it.
#pragma once

#include <cstdint>

#include "kernel/heads_per_block.h"
#include "kernel/inputs.h"
#include "kernel/params.h"
#include "kernel/target_profile.h"
#include "kernel/tensor.h"
#include "kernel/vmem_budget.h"

namespace rpa {

struct KernelOptions {
  int threads = 0;  // worker threads over grid cells; 0: every core
  TargetProfile target = default_target_profile();
  // Run the TPU schedule literally: copy every page slot of every KV block into the
  // buffer, zero the slots past kv_len and compute over all of them, as with a mask_value
  // that does not underflow exp(). By default, under a mask_value <= -1e30, work whose
  // weight is exactly 0 in float32 is skipped (padded slots, keys after a query block's
  // last row, fully masked blocks); the properties check both paths against the reference.
  bool literal_schedule = false;
};

// The grid and buffers the kernel will use for a call.
struct KernelPlan {
  HeadsPerBlock heads;     // q heads and combined kv heads per heads block
  BlockSizes blocks;       // pages per KV block, rows per query block
  int64_t num_heads_blks;  // grid dimension 0
  int64_t num_q_blks;      // grid dimension 1
  int64_t vmem_bytes;      // what the TPU would scope for these blocks
};

// Precondition for both: strict validation accepted (in, params) for options.target.
KernelPlan plan_kernel(const Inputs& in, const Params& params, const TargetProfile& target);

// o [T, Hq, D] in q's dtype. Rows at or past cu_q_lens[num_seqs] are 0. The result does
// not depend on the thread count: each grid cell is computed by one thread in a fixed order.
Tensor tiled_attention(const Inputs& in, const Params& params, const KernelOptions& options = {});

}  // namespace rpa
