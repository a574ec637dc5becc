// The block sizes a tpu-inference kernel.py pass runs with (v3-contract.md section 3d): the
// call's own tuple, else get_default_block_sizes for a TPU generation. A value type's
// function, so the reference's accumulation bound (reference/v3_reference.h) and the literal
// v3 schedule (schedule/v3_program.h) read the same table.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"

namespace rpa {

// kernel.py's passes.
enum class V3Pass { kDecode, kPrefill, kMixed };

// Sequence i's pass: decode below distribution[0], prefill below distribution[1], else mixed.
V3Pass v3_pass_of(const V3Inputs& in, int64_t seq);

// The pass's (bq_sz, bkv_sz, bq_csz, bkv_csz): the call's tuple when it names one, else
// get_default_block_sizes on TPU generation tpu_version; nullopt when neither (a generation
// off 5..8, or shapes the defaults cannot be computed from: a rank off, a zero head count,
// head_dim, page_size or max_num_seqs, fewer q heads than kv heads, a cache dtype wider than
// 32 bits, which packs no value into a word).
std::optional<V3BlockSizes> v3_block_sizes(const V3Inputs& in, const V3Params& p, V3Pass pass,
                                           int tpu_version);

// The shapes get_default_block_sizes reads: the cache's dtype, the head counts and head_dim,
// the token rows (queries.shape[0]), page_size and pages_per_seq.
struct V3BlockShape {
  DType kv_dtype = DType::kBFloat16;
  int64_t kv_heads = 1, q_heads = 1, head_dim = 128;
  int64_t max_num_tokens = 1, page_size = 16, pages_per_seq = 1;
};

// get_default_block_sizes on TPU generation tpu_version (5..8, else nullopt) for a call of
// these shapes (all positive, q_heads >= kv_heads; nullopt for a kv_dtype of more than 32
// bits): what v3_block_sizes gives a call without the pass's tuple. For a generator that has
// shapes before it has arrays.
std::optional<V3BlockSizes> v3_default_block_sizes(const V3BlockShape& s, V3Pass pass, int tpu_version);

}  // namespace rpa
