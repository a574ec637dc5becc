// Named mutations (DESIGN.md section 9): each turns a valid case into one that breaks one
// validation rule, and declares, from what it changed, the failure each mode must report.
// The declarations are the spec model; the validator is never consulted.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "validation/jax_rule.h"

namespace rpa::props {

struct CaseSpec;

// X(name, rule, group). group: kShape mutations change arrays (at most one per case; a
// few also set the parameters their rule needs, before any parameter mutation applies);
// the others each own one parameter field, so mutations of different groups commute.
#define RPA_MUTATIONS(X)                                                   \
  X(q_rank, q_rank, kShape)                                                \
  X(kv_pages_rank, kv_pages_rank, kShape)                                  \
  X(combined_heads_odd, combined_heads_odd, kShape)                        \
  X(page_indices_rank, page_indices_rank, kShape)                          \
  X(num_seqs_shape, num_seqs_shape, kShape)                                \
  X(head_dim_mismatch, head_dim_mismatch, kShape)                          \
  X(kv_lens_shape, kv_lens_shape, kShape)                                  \
  X(cu_q_lens_shape, cu_q_lens_shape, kShape)                              \
  X(index_dtype, index_dtype, kShape)                                      \
  X(num_seqs_dtype, num_seqs_dtype, kShape)                                \
  X(q_dtype_unsupported, q_dtype_unsupported, kShape)                      \
  X(kv_dtype_unsupported, kv_dtype_unsupported, kShape)                    \
  X(dtype_mismatch, dtype_mismatch, kShape)                                \
  X(kv_heads_zero, kv_heads_zero, kShape)                                  \
  X(heads_not_divisible, heads_not_divisible, kShape)                      \
  X(q_heads_zero, q_heads_zero, kShape)                                    \
  X(head_dim_zero, head_dim_zero, kShape)                                  \
  X(sliding_window_nonpositive, sliding_window_nonpositive, kWindow)       \
  X(sliding_window_too_large, sliding_window_too_large, kWindow)           \
  X(soft_cap_zero, soft_cap_zero, kSoftCap)                                \
  X(soft_cap_nonfinite, soft_cap_nonfinite, kSoftCap)                      \
  X(sm_scale_nonfinite, sm_scale_nonfinite, kSmScale)                      \
  X(mask_value_nonfinite, mask_value_nonfinite, kMask)                     \
  X(mask_value_too_large, mask_value_too_large, kMask)                     \
  X(k_scale_nonfinite, k_scale_nonfinite, kKScale)                         \
  X(v_scale_nonfinite, v_scale_nonfinite, kVScale)                         \
  X(kv_pages_per_block_bad, kv_pages_per_block_nonpositive, kBlocks)       \
  X(queries_per_block_nonpositive, queries_per_block_nonpositive, kBlocks) \
  X(queries_per_block_too_large, queries_per_block_too_large, kBlocks)     \
  X(block_sizes_partial, block_sizes_partial, kBlocks)                     \
  X(vmem_limit_nonpositive, vmem_limit_nonpositive, kVmem)                 \
  X(vmem_limit_over_capacity, vmem_limit_over_capacity, kVmem)             \
  X(vmem_budget_exceeded, vmem_budget_exceeded, kVmem)                     \
  X(num_seqs_too_large, num_seqs_too_large, kShape)                        \
  X(max_num_seqs_zero, max_num_seqs_zero, kShape)                          \
  X(pages_per_seq_zero, pages_per_seq_zero, kShape)                        \
  X(page_size_zero, page_size_zero, kShape)                                \
  X(pages_per_seq_too_small, pages_per_seq_too_small, kShape)              \
  X(num_seqs_negative, num_seqs_negative, kShape)                          \
  X(cu_q_lens_first_nonzero, cu_q_lens_first_nonzero, kShape)              \
  X(cu_q_lens_decreasing, cu_q_lens_decreasing, kShape)                    \
  X(kv_len_negative, kv_len_negative, kShape)                              \
  X(total_q_tokens_too_large, total_q_tokens_too_large, kShape)            \
  X(q_len_exceeds_kv_len, q_len_exceeds_kv_len, kShape)                    \
  X(page_index_out_of_range, page_index_out_of_range, kShape)              \
  X(heads_not_tileable, heads_not_tileable, kShape)                        \
  X(smem_budget_exceeded, smem_budget_exceeded, kShape)                    \
  X(kv_block_loop_wraps_int32, kv_block_loop_wraps_int32, kShape)          \
  X(stale_kv_block, stale_kv_block, kShape)                                \
  X(rows_not_computed, rows_not_computed, kShape)                          \
  X(max_num_batched_tokens_zero, max_num_batched_tokens_zero, kShape)      \
  X(kv_scales_one_sided, kv_scales_one_sided, kShape)

enum class MutationGroup : uint8_t {
  kShape,
  kWindow,
  kSoftCap,
  kSmScale,
  kMask,
  kKScale,
  kVScale,
  kBlocks,
  kVmem
};

enum class MutationKind : uint8_t {
#define RPA_MUTATION_ENUM(name, rule, group) name,
  RPA_MUTATIONS(RPA_MUTATION_ENUM)
#undef RPA_MUTATION_ENUM
};

struct MutationSpec {
  MutationKind kind = MutationKind::q_rank;
  // Picks the variant and magnitudes (e.g. soft_cap 0.0, -0.0 or 1e-50); 0 is the
  // simplest, so shrinking heads there.
  int64_t arg = 0;
  bool operator==(const MutationSpec&) const = default;
};

std::span<const MutationKind> all_mutation_kinds();
std::string_view mutation_name(MutationKind k);
MutationGroup mutation_group(MutationKind k);
// The rule the mutation is named after: its verdict on a case with no other fault in the
// first mode that enforces the rule (strict, else jax; jax mode meets the Pallas kernel's
// program rules only at a head_dim that is a multiple of 128). Some variants are
// strict-valid by design, e.g. num_kv_pages_per_block = pages_per_seq + 1.
RuleId mutation_rule(MutationKind k);

// Whether the mutation can apply to this valid case (e.g. heads_not_divisible needs two
// kv heads, cu_q_lens_decreasing a sequence).
bool mutation_applies(MutationKind k, const CaseSpec& spec);

// A failure the mutation makes one mode report, unless a rule that mode checks earlier
// fails too.
struct Declared {
  Mode mode;
  Failure failure;
};

// Applies m to the materialized case (shape mutations before parameter ones, see
// materialize) and appends what each mode must report to `declared`.
void apply_mutation(const MutationSpec& m, const CaseSpec& spec, Inputs& in, Params& params,
                    std::vector<Declared>& declared);

}  // namespace rpa::props
