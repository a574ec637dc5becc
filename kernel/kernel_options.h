// How a tiled kernel runs a call, in every dialect: threads, the TPU generation whose budget
// it plans for, and which schedule.
#pragma once

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

}  // namespace rpa
