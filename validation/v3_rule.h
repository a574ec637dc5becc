// The validation rule table of the two tpu-inference v3 dialects (DESIGN.md sections 3 and
// 16; v3-contract.md section 2): every rule's stable id, the modes that enforce it, and why
// it exists. Mode::kJax stands for the dialect's native mode here: exactly what
// tpu-inference 0.32.0's static_validate_inputs then dynamic_validate_inputs say (kernel.py
// for kTpuInferenceV3, kernel_hd64.py for kTpuInferenceV3Hd64), plus crash rules where its
// Python code or kernel raises something else. Mode::kStrict is the definition.
//
// Rules are listed, and checked, in this order, with these exceptions: kernel.py checks the
// four block-size rules (and page_size_zero, its ZeroDivisionError) per tuple, decode then
// prefill then mixed; the per-sequence rules run sequence by sequence; and in native mode
// page_size_zero also trips in the dynamic loop (cdiv's AssertionError) when no block tuple
// was given. Some rules name only one dialect's arrays (kv_cache_shape: kernel.py's layout;
// the attention_sink rules: hd64); they are evaluated only for that dialect. The strict-only
// kv_dtype_unsupported comes before the cache layout rules, so a 64-bit KV dtype (packing
// 32 / 64 = 0) never reaches them; native mode sees arrays as jnp.asarray makes them with
// jax_enable_x64 off (vLLM's setting): int64, uint64 and float64 arrays are 32-bit there, so
// no packing of 0 exists in native mode either.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/dialect.h"
#include "validation/mode.h"

namespace rpa {

// X(id, native_v3, native_hd64, strict, crash, reason). crash: in native mode tpu-inference
// does not raise its own ValueError here but a ZeroDivisionError, IndexError, TypeError,
// AssertionError or an unpacking ValueError; we report it as a rejection with this id.
#define RPA_V3_RULES(X)                                                                            \
  X(keyword_not_in_dialect, true, true, true, true,                                                \
    "each entry point takes its own keywords (TypeError for the other dialect's)")                 \
  X(causal_skip_kv_mask, true, false, true, false,                                                 \
    "skipping the kv_len mask is only sound without the causal mask")                              \
  X(qkv_rank, true, true, true, false, "q, k and v are [max_num_tokens, heads, head_dim]")         \
  X(kv_shape_mismatch, true, true, true, false, "new keys and values pair up token by token")      \
  X(num_tokens_mismatch, true, true, true, false, "q, k and v share the token rows")               \
  X(head_dim_mismatch, true, true, true, false, "q.K needs q and K/V to share head_dim")           \
  X(sink_rank, false, true, true, true,                                                            \
    "one sink logit per q head: f32[Hq] (hd64 indexes shape[0]: IndexError on rank 0)")            \
  X(sink_shape, false, true, true, false, "one sink logit per q head")                             \
  X(sink_dtype, false, true, true, false, "the kernel reads sinks as float32")                     \
  X(head_dim_not_64, false, true, true, false, "kernel_hd64 packs [K|V] into 128 lanes")           \
  X(kv_heads_zero, true, true, true, true, "q heads map to kv heads by division")                  \
  X(heads_not_divisible, true, true, true, false, "each kv head serves a whole group of q heads")  \
  X(kv_dtype_unsupported, false, false, true, false,                                               \
    "the kernels read KV as float32, bfloat16 or float8 (e4m3fn, e5m2)")                           \
  X(dtype_pair, false, false, true, false,                                                         \
    "q and KV share a dtype, or KV is float8 (the quantized cache) under a wider q")               \
  X(kv_cache_rank, true, true, true, true,                                                         \
    "the packed cache is [pages, page_size, rows, packing, lanes]")                                \
  X(kv_cache_shape, true, false, true, false,                                                      \
    "kernel.py's cache is get_kv_cache_shape(pages, page_size, Hkv, D, kv dtype)")                 \
  X(kv_cache_last_dim, false, true, true, false, "an hd64 cache token holds [K_h | V_h] in 128")   \
  X(kv_dtype_mismatch, true, true, true, false, "new K/V are written into the cache as they are")  \
  X(kv_dtype_not_float, true, true, true, false, "integer KV quantization is not supported")       \
  X(kv_packing_mismatch, false, true, true, false, "the packing dim is 32 / bits of the KV dtype") \
  X(kv_cache_heads, false, true, true, false, "hd64 packs align(Hkv, packing) heads")              \
  X(index_dtype, true, true, true, false, "the index arrays are prefetched as int32 scalars")      \
  X(index_rank, true, true, true, false, "kv_lens, page_indices and cu_q_lens are flat")           \
  X(max_num_seqs_zero, true, true, true, true,                                                     \
    "page_indices holds pages_per_seq entries per sequence slot (modulo by max_num_seqs)")         \
  X(page_indices_not_divisible, true, true, true, false,                                           \
    "page_indices holds the same number of pages per sequence slot")                               \
  X(cu_q_lens_shape, true, true, true, false, "N + 1 cumulative query offsets")                    \
  X(distribution_shape, true, true, true, false, "(decode end, prefill end, num_seqs)")            \
  X(page_size_packing, true, true, true, false, "a packed word never straddles two pages")         \
  X(sliding_window_nonpositive, true, true, true, false, "a window of W <= 0 masks every key")     \
  X(soft_cap_zero, true, true, true, false, "soft_cap * tanh(s / soft_cap) divides by it")         \
  X(chunk_prefill_nonpositive, true, true, true, false, "the prefill pass's static q_len")         \
  X(block_bq_sizes, true, false, true, false, "q compute blocks tile the q fetch block")           \
  X(block_bkv_sizes, true, false, true, false, "kv compute blocks tile the kv fetch block")        \
  X(page_size_zero, true, true, true, true,                                                        \
    "tokens map to pages by division by page_size (ZeroDivisionError / AssertionError)")           \
  X(block_bkv_page, true, false, true, false, "a kv fetch block is whole pages")                   \
  X(block_bkv_csz_page, true, false, true, false, "a kv compute block is whole pages")             \
  X(kv_pages_per_block_nonpositive, false, true, true, false, "a kv block holds >= 1 page")        \
  X(queries_per_block_nonpositive, false, true, true, false, "a q block holds >= 1 row")           \
  X(vmem_limit_nonpositive, true, true, true, false, "a scoped VMEM limit must be positive")       \
  X(q_heads_zero, false, false, true, false, "an attention call needs at least one q head")        \
  X(head_dim_zero, true, false, true, true,                                                       \
    "a zero-width head has no q.K to take (kernel.py: ZeroDivisionError at trace)")                \
  X(block_size_nonpositive, false, false, true, false,                                             \
    "a fetch block holds at least one row / token")                                                \
  X(sliding_window_too_large, false, false, true, false,                                           \
    "the kernel adds the window to int32 key positions")                                           \
  X(soft_cap_nonfinite, false, false, true, false, "NaN or inf soft caps make logits NaN")         \
  X(sm_scale_nonfinite, false, false, true, false, "a NaN or inf sm_scale makes logits NaN")       \
  X(q_scale_invalid, false, false, true, false, "q is divided by q_scale: finite and nonzero")     \
  X(k_scale_nonfinite, false, false, true, false, "a NaN or inf k_scale makes logits NaN")         \
  X(v_scale_nonfinite, false, false, true, false, "a NaN or inf v_scale makes outputs NaN")        \
  X(mask_value_nonfinite, false, false, true, false,                                               \
    "masked logits are replaced by mask_value: NaN/inf poison the online softmax")                 \
  X(mask_value_too_large, false, false, true, false,                                               \
    "slots past kv_len and fully masked blocks weigh exp(mask_value - m); it must be 0")           \
  X(sink_nonfinite, false, false, true, false,                                                     \
    "a sink is an extra logit: NaN or +inf makes the row NaN (-inf means no sink)")                \
  X(distribution_order, true, true, true, false, "decode, prefill, mixed ranges nest")             \
  X(num_seqs_too_large, true, true, true, false, "only max_num_seqs sequence slots exist")         \
  X(distribution_negative, false, false, true, false, "a range starts at sequence 0")              \
  X(prefill_without_chunk_size, false, false, true, false,                                         \
    "kernel.py runs the prefill pass only with chunk_prefill_size: its rows stay unwritten")       \
  X(cu_q_lens_first_nonzero, false, false, true, false,                                            \
    "rows before cu_q_lens[0] would belong to no sequence")                                        \
  X(cu_q_lens_decreasing, false, false, true, false, "a negative q_len has no rows")               \
  X(total_q_tokens_too_large, true, true, true, false, "every query row must exist in q")          \
  X(q_len_range, true, true, true, false,                                                          \
    "rows are the last q_len of kv_len tokens, and a sequence has at least one")                   \
  X(decode_q_len_not_one, false, false, true, false,                                               \
    "the decode pass runs with static q_len 1: other rows are not computed")                       \
  X(prefill_q_len_not_chunk, false, false, true, false,                                            \
    "the prefill pass's q blocks come from chunk_prefill_size, not from q_len")                    \
  X(page_count_too_large, true, true, true, false, "a sequence's pages fit its page slots")        \
  X(page_index_out_of_range, true, true, true, false,                                              \
    "the kernel DMAs every used page: out of range reads arbitrary HBM")                           \
  X(kv_len_overflows_int32, false, false, true, false,                                             \
    "kv positions and block ends are int32: kv_len + kv block - 1 must not wrap")                  \
  X(skip_kv_mask_block_unknown, false, false, true, false,                                         \
    "skip_kv_mask needs every kv_len a multiple of bkv_csz, unknown without block sizes")          \
  X(skip_kv_mask_kv_len, false, false, true, false,                                                \
    "without the kv_len mask a partial kv compute block reads slots past kv_len")                  \
  X(masked_block_overflows, false, false, true, false,                                             \
    "kernel.py rounds a block's row max to bfloat16: a mask_value that rounds away from zero "    \
    "makes exp(mask_value - max) inf in a fully masked first block, and the row NaN")              \
  X(window_skips_cache_write, false, false, true, false,                                          \
    "kernel.py writes new tokens from the KV blocks of a sequence's last query block, which a "   \
    "sliding window starts late: new tokens in earlier blocks never reach the cache")              \
  X(window_int16_wraps, false, false, true, false,                                                \
    "kernel.py on TPU v6+ holds mask positions in int16 (packed q, pages_per_seq * page_size <= " \
    "32767): a key + sliding_window past 32767 wraps, masking keys the window keeps")              \
  X(window_int32_wraps, false, false, true, false,                                                \
    "kernel.py tests q < key + sliding_window in int32: past 2147483647 the sum wraps, masking "  \
    "keys the window keeps")                                                                       \
  X(update_page_shared, false, false, true, false,                                                 \
    "tpu-inference updates and attends sequence by sequence: a page one sequence's update "        \
    "writes and another reads makes the answer depend on the order")                               \
  X(q_dtype_unsupported, true, true, true, true,                                                   \
    "the kernels compute q in float32 or bfloat16 (fp8 q: TypeError at trace)")                    \
  X(out_dtype_not_default, true, false, true, true,                                                \
    "the accumulator dtype must be q's default (other out_dtype: TypeError at trace)")            \
  X(sink_group_unpacked, false, true, true, true,                                                  \
    "kernel_hd64 reshapes the sinks to (-1, Hq/Hkv padded to q's packing, 1): TypeError at "       \
    "trace, or kv heads past the reshaped rows read no sinks of theirs")

enum class V3RuleId {
#define RPA_V3_RULE_ENUM(id, v3, hd64, strict, crash, reason) id,
  RPA_V3_RULES(RPA_V3_RULE_ENUM)
#undef RPA_V3_RULE_ENUM
};

struct V3RuleInfo {
  V3RuleId id;
  std::string_view name;  // the stable snake_case id
  bool in_native_v3;      // enforced in kernel.py's native mode
  bool in_native_hd64;    // enforced in kernel_hd64.py's native mode
  bool in_strict;         // enforced in strict mode (for the dialect whose arrays it names)
  bool crash;             // native: tpu-inference crashes instead of raising its ValueError
  std::string_view reason;
  // Mode::kJax means the dialect's native mode. The jax dialect has no v3 rules.
  bool in(Dialect d, Mode m) const {
    if (m == Mode::kStrict) return in_strict;
    if (d == Dialect::kTpuInferenceV3) return in_native_v3;
    if (d == Dialect::kTpuInferenceV3Hd64) return in_native_hd64;
    return false;
  }
};

// Every rule in check order.
std::span<const V3RuleInfo> v3_rule_table();
const V3RuleInfo& v3_rule_info(V3RuleId id);

using V3Failure = RuleFailure<V3RuleId>;

}  // namespace rpa
