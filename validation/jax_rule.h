// The validation rule table (DESIGN.md section 3): every rule's stable id, the modes that
// enforce it, and why it exists. Rules are listed, and checked, in this order, with one
// exception: in jax mode a jax_crash rule is reported where JAX's own code trips over the
// input (num_seqs_dtype at cu_q_lens[num_seqs[0]]; page_size_zero and an in-range
// negative num_seqs only after every check JAX still makes), so that every clean JAX
// error that comes first is reported as JAX reports it.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "validation/mode.h"

namespace rpa {

// X(id, jax, strict, jax_crash, reason). jax_crash: in jax mode JAX does not raise a
// ValueError here but crashes (AssertionError, ZeroDivisionError, an unpacking error) or
// silently reads out of bounds; we report it as a rejection with this id.
#define RPA_RULES(X)                                                                            \
  X(q_rank, true, true, true, "q must be [max_num_batched_tokens, num_q_heads, head_dim]")      \
  X(kv_pages_rank, true, true, true,                                                            \
    "kv_pages must be [total_num_pages, page_size, num_combined_kv_heads, head_dim]")           \
  X(combined_heads_odd, true, true, true, "K and V heads interleave, so combined heads pair up") \
  X(page_indices_rank, true, true, true, "page_indices must be [max_num_seqs, pages_per_seq]")  \
  X(num_seqs_shape, true, true, false, "num_seqs is a one-element array")                       \
  X(head_dim_mismatch, true, true, false, "q and K/V must share head_dim for q.K")              \
  X(kv_lens_shape, true, true, false, "one kv_len per sequence slot")                           \
  X(cu_q_lens_shape, true, true, false, "N + 1 cumulative query offsets")                       \
  X(index_dtype, true, true, false, "the kernel prefetches index arrays as int32 scalars")      \
  X(num_seqs_dtype, true, true, true,                                                           \
    "num_seqs is prefetched as an int32 scalar (JAX indexes with it: a float crashes)")         \
  X(q_dtype_unsupported, true, true, true, "the kernel computes q in float32 or bfloat16")      \
  X(kv_dtype_unsupported, true, true, true,                                                     \
    "the kernel reads KV as float32, bfloat16 or float8 (e4m3fn, e5m2)")                        \
  X(dtype_mismatch, false, true, false,                                                         \
    "mixed q/KV dtypes have no agreed rounding point, except float8 KV under a wider q")        \
  X(kv_heads_zero, true, true, true, "query heads map to kv heads by division")                 \
  X(heads_not_divisible, true, true, false, "each kv head serves a whole group of query heads") \
  X(q_heads_zero, true, true, true, "an attention call needs at least one query head")          \
  X(head_dim_zero, false, true, false, "a zero-width head has no q.K to take")                  \
  X(sliding_window_nonpositive, true, true, false, "a window of W <= 0 masks every key")        \
  X(sliding_window_too_large, true, true, true,                                                \
    "the window enters int32 arithmetic in the kernel and JAX's reference (OverflowError)")     \
  X(soft_cap_zero, true, true, false,                                                           \
    "soft_cap * tanh(s / soft_cap) divides by soft_cap (strict: also one 0 as a float32)")      \
  X(soft_cap_nonfinite, false, true, false, "NaN or inf soft caps make every logit NaN")        \
  X(sm_scale_nonfinite, false, true, false, "a NaN or inf sm_scale makes the softmax NaN")      \
  X(mask_value_nonfinite, false, true, false,                                                   \
    "-inf makes the TPU's online softmax NaN on fully masked blocks; +inf/NaN break both")      \
  X(mask_value_too_large, false, true, false,                                                  \
    "the TPU kernel adds mask_value to the zero-padded key slots past kv_len of a sequence's "  \
    "last KV block; unless exp() underflows there they enter the softmax, which the reference " \
    "never does")                                                                               \
  X(k_scale_nonfinite, false, true, false, "a NaN or inf k_scale makes every logit NaN")        \
  X(v_scale_nonfinite, false, true, false, "a NaN or inf v_scale makes every output NaN")       \
  X(kv_pages_per_block_range, true, false, false, "JAX bounds the KV block by pages_per_seq")   \
  X(kv_pages_per_block_nonpositive, false, true, false,                                         \
    "a KV block holds at least one page (larger than pages_per_seq is clamped and harmless)")   \
  X(queries_per_block_nonpositive, true, true, false, "a query block holds at least one row")   \
  X(queries_per_block_too_large, true, false, true,                                             \
    "the kernel multiplies the query block index by num_queries_per_block in int32 "            \
    "(OverflowError when tracing it)")                                                          \
  X(vmem_limit_nonpositive, true, true, false, "a scoped VMEM limit must be positive")          \
  X(block_sizes_partial, false, true, false,                                                    \
    "JAX silently discards a block size given without the other")                               \
  X(vmem_limit_over_capacity, false, true, false,                                               \
    "Mosaic cannot scope more VMEM than the core has")                                          \
  X(num_seqs_too_large, true, true, false, "only max_num_seqs sequence slots exist")            \
  X(max_num_seqs_zero, true, true, true,                                                        \
    "JAX's jnp.max over an empty kv_lens raises; the kernel prefetches kv_lens[0] regardless")  \
  X(pages_per_seq_zero, true, true, true,                                                       \
    "the kernel prefetches page_indices[0, 0] even when no sequence reads a page")              \
  X(page_size_zero, true, true, true, "tokens map to pages by division by page_size")           \
  X(pages_per_seq_too_small, true, true, false,                                                 \
    "a sequence's pages must fit its page_indices row (strict: used sequences only)")           \
  X(kv_len_overflows_int32, false, true, false,                                                 \
    "the kernel walks KV blocks in int32: kv_len + bkv * page_size - 1 must not wrap")          \
  X(num_seqs_negative, true, true, true,                                                        \
    "a negative count has no sequences (JAX indexes cu_q_lens from the end)")                   \
  X(cu_q_lens_first_nonzero, false, true, false,                                                \
    "rows before cu_q_lens[0] would be defined but belong to no sequence")                      \
  X(cu_q_lens_decreasing, false, true, false, "a negative q_len has no rows")                   \
  X(kv_len_negative, false, true, false, "a negative kv_len has no keys")                       \
  X(total_q_tokens_too_large, true, true, false, "every query row must exist in q")             \
  X(q_len_exceeds_kv_len, true, true, false,                                                    \
    "query rows are the last q_len of kv_len tokens (causal offset kv_len - q_len)")            \
  X(page_index_out_of_range, true, true, true,                                                  \
    "the TPU DMAs whatever page index it is given, and always page_indices[i, 0] of every "     \
    "sequence (kv_len 0 too) and of slot 0: out of range reads arbitrary HBM")                  \
  X(dtype_packing_zero, true, false, true,                                                      \
    "JAX's packing 32 // bits is 0 for 64-bit dtypes and the tiling check divides by it")       \
  X(heads_not_tileable, true, true, false, "the kernel loads combined heads in full TPU tiles") \
  X(vmem_budget_exceeded, false, true, false, "the kernel's buffers must fit the scoped VMEM")  \
  X(smem_budget_exceeded, false, true, false, "the prefetched index arrays must fit in SMEM")   \
  X(max_num_batched_tokens_zero, true, false, true,                                             \
    "the Pallas kernel reads a query block of q even when q has no rows (IndexError), and "     \
    "JAX's default num_queries_per_block is then 0")                                            \
  X(kv_scales_one_sided, true, false, true,                                                     \
    "with one of k_scale / v_scale set and KV narrower than q, K and V get different dtypes; "  \
    "the Pallas kernel asserts they match when tracing")                                        \
  X(head_dim_not_lane_multiple, true, false, true,                                              \
    "the Pallas kernel tiles head_dim by 128 lanes (broadcast_to_shape asserts it when tracing)") \
  X(kv_block_loop_wraps_int32, true, false, true,                                               \
    "the Pallas kernel's KV loop compares kv_blk * bkv * page_size with kv_len in int32; past "  \
    "the last multiple that fits it wraps and never ends")                                      \
  X(stale_kv_block, false, true, false,                                                         \
    "a sequence with kv_len 0 runs no KV step, so the block prefetched for it is consumed by "   \
    "the next step, which computes its rows from those pages (finding 8)")                      \
  X(rows_not_computed, false, true, false,                                                      \
    "a query block ending exactly at cu_q_lens[num_seqs] with empty sequences after it starts "  \
    "the next heads block past sequence 0, whose rows keep the previous block's values "         \
    "(finding 9)")

enum class RuleId {
#define RPA_RULE_ENUM(id, jax, strict, crash, reason) id,
  RPA_RULES(RPA_RULE_ENUM)
#undef RPA_RULE_ENUM
};

struct RuleInfo {
  RuleId id;
  std::string_view name;    // the stable snake_case id
  bool in_jax;              // enforced in jax mode
  bool in_strict;           // enforced in strict mode
  bool jax_crash;           // JAX crashes (or misbehaves silently) instead of raising
  std::string_view reason;  // one line: why the rule exists
  bool in(Mode m) const { return m == Mode::kJax ? in_jax : in_strict; }
};

// Every rule in check order.
std::span<const RuleInfo> rule_table();
const RuleInfo& rule_info(RuleId id);

using Failure = RuleFailure<RuleId>;

}  // namespace rpa
