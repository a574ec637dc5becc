#include "kernel/v3_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/v3_attention_math.h"
#include "core/jax_params.h"
#include "core/v3_kv_view.h"
#include "core/paged_kv_view.h"
#include "core/v3_cache_layout.h"
#include "kernel/default_schedule.h"

namespace rpa {

int64_t v3_kv_pages_per_block(Dialect d, const V3Inputs& in, const V3Params& p) {
  const int64_t page_size = std::max<int64_t>(in.kv_cache.dim(1), 1);
  // Without block sizes: KV blocks of up to 2048 tokens, at most a sequence's page table. A
  // prefill's GEMMs then run over long blocks (the jax dialect's default plan takes whole
  // sequences of its mixed workload too), and a decode is cut into parallel chunks anyway.
  const int64_t pps = in.kv_lens.dim(0) > 0 ? in.page_indices.dim(0) / in.kv_lens.dim(0) : 1;
  int64_t pages = 2048 / page_size;
  if (d == Dialect::kTpuInferenceV3 && p.m_block_sizes) pages = (*p.m_block_sizes)[3] / page_size;
  if (d == Dialect::kTpuInferenceV3Hd64 && p.num_kv_pages_per_block) pages = *p.num_kv_pages_per_block;
  // A block past a sequence's page table computes what one covering the table does: the
  // kernel's scratch is sized by the block, so a valid 2^40 must not reach it (found by
  // fuzz_raw_inputs: hd64's num_kv_pages_per_block is bounded only by int32 positions).
  return std::clamp<int64_t>(pages, 1, std::max<int64_t>(pps, 1));
}

void v3_fused_update(Dialect d, const V3Inputs& in, Tensor& cache) {
  const PagedKvView view = kv_view(d, in, cache);
  const V3CacheLayout layout(d, cache.dtype(), view.num_kv_heads(), view.head_dim());
  const int64_t e = dtype_size(cache.dtype());
  const int64_t record = layout.token_stride() * e;
  const int64_t row = view.head_dim() * e;
  std::byte* const base = cache.data();
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    for (int64_t j = 0; j < view.q_len(s); ++j) {
      const int64_t pos = view.kv_len(s) - view.q_len(s) + j;
      const int64_t token = view.q_start(s) + j;
      std::byte* dst = base + layout.token_offset(view.page_of(s, pos), view.slot_of(pos), view.page_size()) * e;
      std::memset(dst, 0, static_cast<size_t>(record));
      for (int64_t h = 0; h < view.num_kv_heads(); ++h) {
        const int64_t src = (token * view.num_kv_heads() + h) * view.head_dim() * e;
        std::memcpy(dst + layout.k_offset(h) * e, in.keys.data() + src, static_cast<size_t>(row));
        std::memcpy(dst + layout.v_offset(h) * e, in.values.data() + src, static_cast<size_t>(row));
      }
    }
  }
}

V3KernelResult v3_tiled_attention(Dialect d, const V3Inputs& in, const V3Params& p,
                                  const KernelOptions& options) {
  V3KernelResult r{Tensor(), in.kv_cache};
  r.out = v3_tiled_attention_in_place(d, in, r.kv_cache, p, options);
  return r;
}

Tensor v3_tiled_attention_in_place(Dialect d, const V3Inputs& in, Tensor& cache, const V3Params& p,
                                   const KernelOptions& options) {
  if (options.literal_schedule) {
    throw std::invalid_argument(
        "v3_tiled_attention: the literal v3 schedule is v3_literal_attention (schedule/v3_program.h)");
  }
  const bool hd64 = d == Dialect::kTpuInferenceV3Hd64;
  AttentionMath math = attention_math(d, p, in.queries.dtype());
  if (!std::isfinite(math.mask_value) || math.mask_value > kMaxExactMaskValue) {
    throw std::invalid_argument("v3_tiled_attention: mask_value above -1e30 (validate first)");
  }
  Tensor out(in.queries.dtype(), in.queries.shape());
  if (hd64 || p.update_kv_cache) v3_fused_update(d, in, cache);
  if (hd64 && in.attention_sink) math.sink = reinterpret_cast<const float*>(in.attention_sink->data());
  KernelPlan plan{};
  plan.blocks.kv_pages_per_block = v3_kv_pages_per_block(d, in, p);
  plan.blocks.queries_per_block = 1;  // the default schedule tiles rows itself
  const PagedKvView view = kv_view(d, in, std::as_const(cache));
  default_schedule(view, math, plan, options.threads, out);
  return out;
}

}  // namespace rpa
