// tpu-inference v3 on the tiled kernel (DESIGN.md section 16): the fused KV-cache update, then
// the default schedule's math core (kernel/jax_kernel.h) over the updated cache, read in
// place in its packed layout.
#pragma once

#include <cstdint>

#include "core/dialect.h"
#include "core/tensor.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "core/v3_result.h"
#include "kernel/kernel_options.h"

namespace rpa {

// KV pages per online-softmax step: kernel.py's mixed-pass KV compute block (m_block_sizes'
// bkv_csz / page_size) when given, hd64's num_kv_pages_per_block when given, else 2048 tokens'
// worth; clamped to [1, pages_per_seq]. The block size changes only float32 rounding, never
// what is computed.
int64_t v3_kv_pages_per_block(Dialect d, const V3Inputs& in, const V3Params& p);

// Writes each computed sequence's new keys and values (token rows cu_q_lens[i] ..
// cu_q_lens[i + 1] of keys / values) into `cache` at its positions kv_len - q_len .. kv_len - 1,
// whole token records as the kernel's DMA writes them (the padding heads and head_dim lanes of
// a record become 0). Nothing else changes. Precondition: strict validation accepted the call
// and cache has kv_cache's shape and dtype.
void v3_fused_update(Dialect d, const V3Inputs& in, Tensor& cache);

// Precondition: the dialect's strict validation accepted (in, p); options.literal_schedule is
// false (the literal v3 schedule is v3_literal_attention, schedule/v3_program.h; here it is
// std::invalid_argument). Thread count and
// block size change no bit of `out` beyond float32 rounding, and no bit of `kv_cache`.
V3KernelResult v3_tiled_attention(Dialect d, const V3Inputs& in, const V3Params& p,
                                  const KernelOptions& options = {});

// The same with the cache updated in place, as the TPU kernel does with its donated
// kv_cache: `cache` is the call's kv_cache (in.kv_cache itself, or a tensor equal to it),
// which the fused update writes and attention then reads; no copy of the cache is made.
// Returns out.
Tensor v3_tiled_attention_in_place(Dialect d, const V3Inputs& in, Tensor& cache, const V3Params& p,
                                   const KernelOptions& options = {});

}  // namespace rpa
