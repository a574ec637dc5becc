#include "schedule/v3_block_sizes.h"

#include <algorithm>

#include "core/v3_cache_layout.h"

namespace rpa {
namespace {

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

V3Pass v3_pass_of(const V3Inputs& in, int64_t seq) {
  return seq < in.distribution.int_at(0)   ? V3Pass::kDecode
         : seq < in.distribution.int_at(1) ? V3Pass::kPrefill
                                           : V3Pass::kMixed;
}

std::optional<V3BlockSizes> v3_block_sizes(const V3Inputs& in, const V3Params& p, V3Pass pass,
                                           int tpu_version) {
  const std::optional<V3BlockSizes>& given =
      pass == V3Pass::kDecode ? p.d_block_sizes : pass == V3Pass::kPrefill ? p.p_block_sizes : p.m_block_sizes;
  if (given) return given;
  if (tpu_version < 5 || tpu_version > 8) return std::nullopt;
  // Shapes the defaults cannot be computed from (a malformed call: validation names it).
  if (in.queries.rank() != 3 || in.keys.rank() != 3 || in.kv_cache.rank() < 2 ||
      in.page_indices.rank() < 1 || in.kv_lens.rank() < 1 || in.queries.dim(1) <= 0 ||
      in.queries.dim(2) <= 0 || in.keys.dim(1) <= 0 || in.kv_cache.dim(1) <= 0 ||
      in.kv_lens.dim(0) <= 0 || in.queries.dim(1) < in.keys.dim(1)) {
    return std::nullopt;
  }
  const V3BlockShape shape{.kv_dtype = in.kv_cache.dtype(),
                           .kv_heads = in.keys.dim(1),
                           .q_heads = in.queries.dim(1),
                           .head_dim = in.queries.dim(2),
                           .max_num_tokens = in.queries.dim(0),
                           .page_size = in.kv_cache.dim(1),
                           .pages_per_seq = in.page_indices.dim(0) / in.kv_lens.dim(0)};
  return v3_default_block_sizes(shape, pass, tpu_version);
}

std::optional<V3BlockSizes> v3_default_block_sizes(const V3BlockShape& s, V3Pass pass, int tpu_version) {
  if (tpu_version < 5 || tpu_version > 8) return std::nullopt;
  // get_default_block_sizes (kernel.py).
  const int64_t packing = v3_kv_packing(s.kv_dtype);
  // A 64-bit cache (kv_dtype_unsupported: what a shape mutation may leave) packs 0 values a
  // word; kernel.py's arithmetic would divide by it (fuzz_validate, UBSan).
  if (packing <= 0) return std::nullopt;
  const int64_t hkv = s.kv_heads, hq = s.q_heads;
  const int64_t heads_x2 = next_pow2(v3_align(hkv * 2, packing));
  const int64_t head_dim = v3_align(s.head_dim, 128);
  const int64_t qph = next_pow2(hq / hkv);
  const int64_t max_q = next_pow2(s.max_num_tokens);
  const int64_t page_size = s.page_size;
  const int64_t pps = s.pages_per_seq;
  const int64_t max_kv = pps * page_size;
  const int64_t peak = 16 * 1024 * 1024 * packing / 4 / head_dim / heads_x2;
  int64_t bq, bkv, bq_c, bkv_c;
  if (pass == V3Pass::kDecode) {
    bq = bq_c = 1;
    bkv = bkv_c = std::min(peak, max_kv);
  } else if (tpu_version <= 6) {
    bq = std::min(1024 / qph, max_q / 2);
    bkv = std::min<int64_t>(1024, max_kv);
    bq_c = std::min(512 / qph, max_q);
    bkv_c = std::min<int64_t>(512, v3_align(max_kv / 2, page_size));
  } else {
    bq = std::min(2048 / qph, max_q / 2);
    bkv = std::min<int64_t>(2048, max_kv / 2);
    bq_c = std::min(1024 / qph, max_q / 2);
    bkv_c = std::min<int64_t>(512, v3_align(max_kv / 2, page_size));
  }
  return V3BlockSizes{std::max<int64_t>(1, bq), v3_align(bkv, page_size), std::max<int64_t>(1, bq_c),
                      v3_align(bkv_c, page_size)};
}

}  // namespace rpa
