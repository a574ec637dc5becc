#include "casegen/v3_unreachable.h"

#include <algorithm>
#include <iterator>

namespace rpa::props {

namespace {

constexpr Dialect kV3 = Dialect::kTpuInferenceV3;
constexpr Dialect kHd64 = Dialect::kTpuInferenceV3Hd64;
const V3Unreachable kStrictUnreachable[] = {
    {V3RuleId::causal_skip_kv_mask, kHd64, "hd64 takes no skip_kv_mask: keyword_not_in_dialect"},
    {V3RuleId::sink_rank, kV3, "kernel.py takes no attention_sink: keyword_not_in_dialect"},
    {V3RuleId::sink_shape, kV3, "kernel.py takes no attention_sink: keyword_not_in_dialect"},
    {V3RuleId::sink_dtype, kV3, "kernel.py takes no attention_sink: keyword_not_in_dialect"},
    {V3RuleId::sink_nonfinite, kV3, "kernel.py takes no attention_sink: keyword_not_in_dialect"},
    {V3RuleId::sink_group_unpacked, kV3, "kernel.py takes no attention_sink: keyword_not_in_dialect"},
    {V3RuleId::head_dim_not_64, kV3, "kernel.py takes any head_dim"},
    {V3RuleId::kv_cache_shape, kHd64,
     "hd64's cache is checked piecewise: kv_cache_last_dim, kv_packing_mismatch, kv_cache_heads"},
    {V3RuleId::kv_cache_last_dim, kV3, "kernel.py's exact kv_cache_shape covers it"},
    {V3RuleId::kv_packing_mismatch, kV3, "kernel.py's exact kv_cache_shape covers it"},
    {V3RuleId::kv_cache_heads, kV3, "kernel.py's exact kv_cache_shape covers it"},
    {V3RuleId::kv_dtype_not_float, kV3,
     "strict: every non-floating KV dtype is unsupported, and kv_dtype_unsupported comes first"},
    {V3RuleId::kv_dtype_not_float, kHd64,
     "strict: every non-floating KV dtype is unsupported, and kv_dtype_unsupported comes first"},
    {V3RuleId::block_bq_sizes, kHd64, "hd64 takes no block tuples: keyword_not_in_dialect"},
    {V3RuleId::block_bkv_sizes, kHd64, "hd64 takes no block tuples: keyword_not_in_dialect"},
    {V3RuleId::block_bkv_page, kHd64, "hd64 takes no block tuples: keyword_not_in_dialect"},
    {V3RuleId::block_bkv_csz_page, kHd64, "hd64 takes no block tuples: keyword_not_in_dialect"},
    {V3RuleId::block_size_nonpositive, kHd64, "hd64 takes no block tuples: keyword_not_in_dialect"},
    {V3RuleId::kv_pages_per_block_nonpositive, kV3,
     "kernel.py takes no num_kv_pages_per_block: keyword_not_in_dialect"},
    {V3RuleId::queries_per_block_nonpositive, kV3,
     "kernel.py takes no num_queries_per_block: keyword_not_in_dialect"},
    {V3RuleId::head_dim_zero, kHd64, "hd64's head_dim is 64: head_dim_not_64 comes first"},
    {V3RuleId::prefill_without_chunk_size, kHd64,
     "kernel_hd64.py runs every range without chunk_prefill_size (kernel.py's prefill pass only)"},
    {V3RuleId::skip_kv_mask_block_unknown, kHd64,
     "hd64 takes no skip_kv_mask: keyword_not_in_dialect"},
    {V3RuleId::skip_kv_mask_kv_len, kHd64, "hd64 takes no skip_kv_mask: keyword_not_in_dialect"},
    {V3RuleId::out_dtype_not_default, kHd64, "hd64 takes no out_dtype: keyword_not_in_dialect"},
    {V3RuleId::masked_block_overflows, kHd64,
     "hd64 holds m in float32: no block's row max is rounded"},
    {V3RuleId::window_skips_cache_write, kHd64,
     "kernel_hd64.py writes new tokens from a sequence's first query block, whose KV blocks start "
     "at its first row's window"},
    {V3RuleId::window_int16_wraps, kHd64, "kernel_hd64.py holds mask positions in int32"},
    {V3RuleId::window_int32_wraps, kHd64,
     "kernel_hd64.py tests q - sliding_window < key: a difference of int32 positions, no sum"},
};

}  // namespace

std::span<const V3Unreachable> v3_strict_unreachable() { return kStrictUnreachable; }

bool v3_strict_unreachable(V3RuleId rule, Dialect d) {
  return std::any_of(std::begin(kStrictUnreachable), std::end(kStrictUnreachable),
                     [&](const V3Unreachable& u) { return u.rule == rule && u.dialect == d; });
}

}  // namespace rpa::props
