// A generated tpu-inference v3 case as a plain value (DESIGN.md sections 9 and 16): the
// dialect, shapes, the three sequence ranges with each sequence's lengths, the page pool,
// the seeds the arrays are drawn from, and the keyword arguments. build_v3_case()
// (v3_build_case.h) draws one from a source of choices; materialize_v3() (v3_materialize.h)
// turns it into the arrays of one call. Equality is exact, so decode(encode(spec)) == spec
// can be checked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dialect.h"
#include "core/dtype.h"
#include "core/v3_params.h"
#include "casegen/batch_mix.h"

namespace rpa::props {

// The batch mix (the jax dialect's Profile), as distribution = (i, j, k) lays it out:
// - kDecode: every sequence decodes (q_len 1), (k, k, k);
// - kPrefill: prefill only, in the prefill range with chunk_prefill_size (0, k, k) or, as
//   vLLM sends it, in the mixed range (0, 0, k);
// - kMixed: any of the three ranges non-empty, vLLM's (d, d, k) among them.

struct V3SeqSpec {
  int64_t q_len = 1;   // decode range: 1; prefill range: chunk_prefill_size; else 1..kv_len
  int64_t kv_len = 1;  // >= q_len
  bool operator==(const V3SeqSpec&) const = default;
};

// What the kernel's attention_sink holds (hd64).
enum class V3Sink : uint8_t {
  kNone,      // attention_sink=None
  kNormal,    // N(0, 1)-ish logits
  kWithInfs,  // the same with some entries -inf (no sink for that head)
};

struct V3CaseSpec {
  Dialect dialect = Dialect::kTpuInferenceV3;
  Profile profile = Profile::kMixed;
  DType q_dtype = DType::kFloat32;   // float32 | bfloat16
  DType kv_dtype = DType::kFloat32;  // float32 | bfloat16 | float8_e4m3fn | float8_e5m2
  int64_t num_kv_heads = 1;          // Hkv
  int64_t q_per_kv = 1;              // Hq / Hkv
  int64_t head_dim = 128;            // D (hd64: 64)
  int64_t page_size = 1;             // a multiple of the KV packing
  // The sequences in call order: [0, num_decode) decode, [num_decode, num_decode +
  // num_prefill) prefill, the rest mixed; k = seqs.size().
  std::vector<V3SeqSpec> seqs;
  int64_t num_decode = 0;
  int64_t num_prefill = 0;
  int64_t extra_seq_slots = 0;   // max_num_seqs = max(k + extra_seq_slots, 1)
  int64_t extra_page_slots = 0;  // pages_per_seq = max pages a sequence uses + this (>= 1)
  int64_t extra_pages = 0;       // total_num_pages = pages in use + this (>= 1)
  int64_t extra_tokens = 0;      // T = total q_len + this (>= 1)
  // 0: pages assigned in order; else the pool is shuffled with this seed.
  int64_t page_shuffle_seed = 0;
  // Unused q/K/V rows, cache slots and pages, kv_lens / page_indices entries hold NaN and
  // garbage integers (else zeros): nothing the definition reads may depend on them.
  bool garbage = true;
  int64_t data_seed = 0;
  V3Sink sink = V3Sink::kNone;
  V3Params params;

  int64_t num_seqs() const { return static_cast<int64_t>(seqs.size()); }
  int64_t num_q_heads() const { return num_kv_heads * q_per_kv; }
  int64_t max_num_seqs() const;
  int64_t pages_per_seq() const;
  int64_t pages_in_use() const;
  int64_t total_num_pages() const { return pages_in_use() + extra_pages; }
  int64_t total_q_len() const;
  int64_t max_num_tokens() const;
  int64_t max_kv_len() const;  // 0 without sequences
  bool operator==(const V3CaseSpec&) const = default;
};


// Several lines a person reads as a bug report: dialect, dtypes and shapes, the ranges with
// each sequence's lengths, the keywords.
std::string describe(const V3CaseSpec& spec);

}  // namespace rpa::props
