// Named mutations of tpu-inference v3 cases (DESIGN.md sections 9 and 16): each turns a
// strict-valid generated v3 case (v3_build_case.h) into one that breaks one rule of the v3
// rule table (validation/v3_rule.h), and declares, from what it changed, the failure each mode
// of the case's dialect must report: the v3 spec model (v3_spec_model.h). The validator is
// never consulted; messages are computed the way each rule's text is defined (tpu-inference
// 0.32.0's f-strings as Python prints them for JAX arrays, v3-contract.md section 2, or
// strict mode's own text).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "casegen/v3_case_spec.h"
#include "casegen/v3_materialize.h"
#include "validation/jax_rule.h"
#include "validation/v3_rule.h"

namespace rpa::props {

// X(name, rule, group, v3, hd64). group: kShape mutations change arrays or the keywords
// their rule needs (at most one per case); the others each own one keyword that no kShape
// mutation touches, so a kShape mutation and parameter mutations of different groups
// commute. v3 / hd64: the dialects whose cases the mutation applies to.
#define RPA_V3_MUTATIONS(X)                                                               \
  X(keyword_not_in_dialect, keyword_not_in_dialect, kShape, true, true)                   \
  X(causal_skip_kv_mask, causal_skip_kv_mask, kShape, true, false)                        \
  X(qkv_rank, qkv_rank, kShape, true, true)                                               \
  X(kv_shape_mismatch, kv_shape_mismatch, kShape, true, true)                             \
  X(num_tokens_mismatch, num_tokens_mismatch, kShape, true, true)                         \
  X(head_dim_mismatch, head_dim_mismatch, kShape, true, true)                             \
  X(sink_rank, sink_rank, kShape, false, true)                                            \
  X(sink_shape, sink_shape, kShape, false, true)                                          \
  X(sink_dtype, sink_dtype, kShape, false, true)                                          \
  X(head_dim_not_64, head_dim_not_64, kShape, false, true)                                \
  X(kv_heads_zero, kv_heads_zero, kShape, true, true)                                     \
  X(heads_not_divisible, heads_not_divisible, kShape, true, true)                         \
  X(kv_dtype_unsupported, kv_dtype_unsupported, kShape, true, true)                       \
  X(dtype_pair, dtype_pair, kShape, true, true)                                           \
  X(kv_cache_rank, kv_cache_rank, kShape, true, true)                                     \
  X(kv_cache_shape, kv_cache_shape, kShape, true, false)                                  \
  X(kv_cache_last_dim, kv_cache_last_dim, kShape, false, true)                            \
  X(kv_dtype_mismatch, kv_dtype_mismatch, kShape, true, true)                             \
  X(kv_dtype_not_float, kv_dtype_not_float, kShape, true, true)                           \
  X(kv_packing_mismatch, kv_packing_mismatch, kShape, false, true)                        \
  X(kv_cache_heads, kv_cache_heads, kShape, false, true)                                  \
  X(index_dtype, index_dtype, kShape, true, true)                                         \
  X(index_rank, index_rank, kShape, true, true)                                           \
  X(max_num_seqs_zero, max_num_seqs_zero, kShape, true, true)                             \
  X(page_indices_not_divisible, page_indices_not_divisible, kShape, true, true)           \
  X(cu_q_lens_shape, cu_q_lens_shape, kShape, true, true)                                 \
  X(distribution_shape, distribution_shape, kShape, true, true)                           \
  X(page_size_packing, page_size_packing, kShape, true, true)                             \
  X(sliding_window_nonpositive, sliding_window_nonpositive, kWindow, true, true)          \
  X(soft_cap_zero, soft_cap_zero, kSoftCap, true, true)                                   \
  X(chunk_prefill_nonpositive, chunk_prefill_nonpositive, kChunk, true, true)             \
  X(block_bq_sizes, block_bq_sizes, kShape, true, false)                                  \
  X(block_bkv_sizes, block_bkv_sizes, kShape, true, false)                                \
  X(page_size_zero, page_size_zero, kShape, true, true)                                   \
  X(block_bkv_page, block_bkv_page, kShape, true, false)                                  \
  X(block_bkv_csz_page, block_bkv_csz_page, kShape, true, false)                          \
  X(kv_pages_per_block_nonpositive, kv_pages_per_block_nonpositive, kHd64Kv, false, true) \
  X(queries_per_block_nonpositive, queries_per_block_nonpositive, kHd64Q, false, true)    \
  X(vmem_limit_nonpositive, vmem_limit_nonpositive, kVmem, true, true)                    \
  X(q_heads_zero, q_heads_zero, kShape, true, true)                                       \
  X(head_dim_zero, head_dim_zero, kShape, true, false)                                    \
  X(block_size_nonpositive, block_size_nonpositive, kShape, true, false)                  \
  X(sliding_window_too_large, sliding_window_too_large, kWindow, true, true)              \
  X(soft_cap_nonfinite, soft_cap_nonfinite, kSoftCap, true, true)                         \
  X(sm_scale_nonfinite, sm_scale_nonfinite, kSmScale, true, true)                         \
  X(q_scale_invalid, q_scale_invalid, kQScale, true, true)                                \
  X(k_scale_nonfinite, k_scale_nonfinite, kKScale, true, true)                            \
  X(v_scale_nonfinite, v_scale_nonfinite, kVScale, true, true)                            \
  X(mask_value_nonfinite, mask_value_nonfinite, kMask, true, true)                        \
  X(mask_value_too_large, mask_value_too_large, kMask, true, true)                        \
  X(sink_nonfinite, sink_nonfinite, kShape, false, true)                                  \
  X(distribution_order, distribution_order, kShape, true, true)                           \
  X(num_seqs_too_large, num_seqs_too_large, kShape, true, true)                           \
  X(distribution_negative, distribution_negative, kShape, true, true)                     \
  X(prefill_without_chunk_size, prefill_without_chunk_size, kShape, true, false)          \
  X(cu_q_lens_first_nonzero, cu_q_lens_first_nonzero, kShape, true, true)                 \
  X(cu_q_lens_decreasing, cu_q_lens_decreasing, kShape, true, true)                       \
  X(total_q_tokens_too_large, total_q_tokens_too_large, kShape, true, true)               \
  X(q_len_range, q_len_range, kShape, true, true)                                         \
  X(decode_q_len_not_one, decode_q_len_not_one, kShape, true, true)                       \
  X(prefill_q_len_not_chunk, prefill_q_len_not_chunk, kShape, true, true)                 \
  X(page_count_too_large, page_count_too_large, kShape, true, true)                       \
  X(page_index_out_of_range, page_index_out_of_range, kShape, true, true)                 \
  X(kv_len_overflows_int32, kv_len_overflows_int32, kShape, true, true)                   \
  X(skip_kv_mask_block_unknown, skip_kv_mask_block_unknown, kShape, true, false)          \
  X(skip_kv_mask_kv_len, skip_kv_mask_kv_len, kShape, true, false)                        \
  X(masked_block_overflows, masked_block_overflows, kShape, true, false)                  \
  X(window_skips_cache_write, window_skips_cache_write, kShape, true, false)              \
  X(window_int16_wraps, window_int16_wraps, kWindow, true, false)                        \
  X(window_int32_wraps, window_int32_wraps, kWindow, true, false)                        \
  X(q_dtype_unsupported, q_dtype_unsupported, kShape, true, true)                         \
  X(out_dtype_not_default, out_dtype_not_default, kShape, true, false)                   \
  X(update_page_shared, update_page_shared, kShape, true, true)                           \
  X(sink_group_unpacked, sink_group_unpacked, kShape, false, true)

enum class V3MutationGroup : uint8_t {
  kShape,
  kWindow,
  kSoftCap,
  kChunk,
  kHd64Kv,
  kHd64Q,
  kVmem,
  kSmScale,
  kQScale,
  kKScale,
  kVScale,
  kMask
};

enum class V3MutationKind : uint8_t {
#define RPA_V3_MUTATION_ENUM(name, rule, group, v3, hd64) name,
  RPA_V3_MUTATIONS(RPA_V3_MUTATION_ENUM)
#undef RPA_V3_MUTATION_ENUM
};

// One mutation: its kind and an argument that picks the variant and where it applies
// (which array, sequence, page, tuple...). arg 0 is the simplest variant, so shrinking heads
// there. Variants "just inside" a boundary declare no failure in the mode they keep valid.
inline constexpr int64_t kMaxV3MutationArg = 15;  // the variants a caller draws: 0..15
struct V3Mutation {
  V3MutationKind kind = V3MutationKind::keyword_not_in_dialect;
  int64_t arg = 0;
  bool operator==(const V3Mutation&) const = default;
};

std::span<const V3MutationKind> all_v3_mutation_kinds();
std::string_view v3_mutation_name(V3MutationKind k);
V3MutationGroup v3_mutation_group(V3MutationKind k);
// The rule the mutation is named after: what it makes the first mode of the case's dialect
// that enforces the rule (strict, else native) report for some variant.
V3RuleId v3_mutation_rule(V3MutationKind k);
// Whether the mutation is written for this dialect's cases at all.
bool v3_mutation_in_dialect(V3MutationKind k, Dialect d);
// Whether it applies to this strict-valid case (its dialect, and e.g. block_bkv_page needs
// page_size >= 2, q_len_range a sequence).
bool v3_mutation_applies(V3MutationKind k, const V3CaseSpec& spec);

// A failure the mutation makes one mode report (Mode::kJax: the dialect's native mode),
// unless that mode meets an earlier failing rule. rank orders failures of different
// mutations in the mode's check order.
struct V3Declared {
  Mode mode;
  V3Failure failure;
  int64_t rank;
};

// Applies m to the materialized case of `spec` (which holds the effect of the mutations
// applied before it) and appends what each mode must report to `declared`. A mode the
// mutation leaves valid gets no entry. m must apply to spec (v3_mutation_applies).
void apply_v3_mutation(const V3Mutation& m, const V3CaseSpec& spec, V3Materialized& case_,
                       std::vector<V3Declared>& declared);

// Whether a list of mutations may be combined: at most one kShape mutation, listed first,
// and no two of one group; each applies to spec.
bool v3_mutations_compose(const V3CaseSpec& spec, std::span<const V3Mutation> mutations);

}  // namespace rpa::props
