// The TPU-tiled kernel on a CPU for the jax dialect (DESIGN.md section 5): JAX's Pallas
// schedule — heads blocks, query blocks that span sequences, KV blocks of pages copied into a
// VMEM-sized double buffer, online softmax — with float32 arithmetic where the TPU has it (the
// literal schedule, here), and the same arithmetic laid out for a CPU's caches and cores (the
// default one, kernel/default_schedule.h).
#pragma once

#include <cstdint>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/tensor.h"
#include "kernel/default_schedule.h"
#include "kernel/kernel_options.h"
#include "validation/jax_kernel_plan.h"

namespace rpa {

// o [T, Hq, D] in q's dtype. Rows at or past cu_q_lens[num_seqs] are 0 (literal schedule:
// what the Pallas program leaves there). The result does not depend on the thread count:
// each task is computed by one thread in a fixed order, and chunks are merged in order.
Tensor tiled_attention(const Inputs& in, const Params& params, const KernelOptions& options = {});

}  // namespace rpa
