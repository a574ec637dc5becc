// The TPU-tiled kernel on a CPU (DESIGN.md section 5): JAX's Pallas schedule — heads
// blocks, query blocks that span sequences, KV blocks of pages copied into a VMEM-sized
// double buffer, online softmax — with float32 arithmetic where the TPU has it (the
// literal schedule), and the same arithmetic laid out for a CPU's caches and cores (the
// default one).
#pragma once

#include <cstdint>

#include "core/attention_math.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/paged_kv_view.h"
#include "core/tensor.h"
#include "validation/jax_kernel_plan.h"
#include "validation/target_profile.h"

namespace rpa {

struct KernelOptions {
  int threads = 0;  // worker threads over the default schedule's tasks; 0: every core
  TargetProfile target = default_target_profile();
  // Run the Pallas program literally (schedule/jax_program.h, DESIGN.md section 5): one
  // thread, the grid cells in order, the prefetch chain deciding which KV block each
  // buffer half holds at each step (stale ones included), scratch m, l and acc carried
  // across grid cells from NaN (TPU interpret mode's uninitialized memory), every slot of a
  // KV block computed over, zero-filled past kv_len, and every query block written whole
  // from the accumulator. This is what the Pallas kernel computes, also where that is not
  // the definition (stale_kv_block, rows_not_computed, a small mask_value).
  // By default (DESIGN.md section 5, docs/kernel.md's default schedule): the same KV blocks and
  // online-softmax update, but KV read from the pages without the staging double buffer, a
  // sequence's rows taken in tiles of about 512 rows per kv head rather than the TPU's query
  // blocks (a decode sequence with every head at once, others one kv head per task), and
  // under a mask_value <= -1e30 work whose weight is exactly 0 in float32 skipped (padded
  // slots, keys after a row's causal position, fully masked blocks). A decode sequence's
  // KV range of more than 1024 tokens is cut into chunks of whole KV blocks that run in
  // parallel and are merged in order (flash-decoding). Tasks follow from the shape alone,
  // so the bits never depend on the thread count. The properties check both schedules
  // against the reference.
  bool literal_schedule = false;
  // Literal schedule, block sizes not both given: JAX's untuned default
  // (untuned_block_sizes), as the Pallas kernel takes them in jax mode, rather than the
  // default shrunk to fit the VMEM budget.
  bool untuned_blocks = false;
};

// o [T, Hq, D] in q's dtype. Rows at or past cu_q_lens[num_seqs] are 0 (literal schedule:
// what the Pallas program leaves there). The result does not depend on the thread count:
// each task is computed by one thread in a fixed order, and chunks are merged in order.
Tensor tiled_attention(const Inputs& in, const Params& params, const KernelOptions& options = {});

// The default schedule on any dialect's logical view (DESIGN.md section 16): the math core
// that tiled_attention runs for the jax dialect and v3_tiled_attention for tpu-inference v3.
// Uses plan.blocks.kv_pages_per_block only (heads and query blocks are the schedule's own).
// Writes the rows [0, view.total_q_tokens()) of out ([T, Hq, D] in view.q_dtype()), nothing
// else. Precondition: the dialect's strict validation accepted the call; math.mask_value
// <= kMaxExactMaskValue unless math is the jax dialect's.
void default_schedule(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
                      int threads, Tensor& out);

}  // namespace rpa
