// The production profile's v3 calls (casegen/v3_production.h), kernel.py's window bound on a
// recipe (production_window_skips_cache_write, casegen/production.h) and the v3 dialects'
// entries of the generator registry (casegen/dialect_generator.h).
#include "casegen/v3_production.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/v3_cache_layout.h"
#include "casegen/v3_dialect_generator.h"
#include "casegen/v3_materialize.h"
#include "schedule/v3_block_sizes.h"

namespace rpa::props {
namespace {

int64_t v3_cache_token_bytes(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  // The packed cache: heads padded to the packing, lanes to 128 (hd64: K and V share them).
  return V3CacheLayout(s.dialect, s.kv_dtype, m.kv_heads, m.head_dim).token_stride() *
         dtype_size(s.kv_dtype);
}

Case v3_production_call(const ProductionSpec& s) {
  const V3Materialized m = materialize_v3(production_v3_case(s));
  Case c;
  c.dialect = s.dialect;
  c.v3_inputs = m.inputs;
  c.v3_params = m.params;
  return c;
}

template <Dialect D>
constexpr DialectGenerator v3_generator() {
  return {
      .dialect = D,
      .production_cache_token_bytes = v3_cache_token_bytes,
      .production_call = v3_production_call,
  };
}

}  // namespace

bool production_window_skips_cache_write(const ProductionSpec& s) {
  if (s.dialect != Dialect::kTpuInferenceV3 || !s.sliding_window || s.seqs.empty()) return false;
  const ProductionModel& m = s.shape();
  const V3BlockShape shape{.kv_dtype = s.kv_dtype,
                           .kv_heads = m.kv_heads,
                           .q_heads = m.q_heads,
                           .head_dim = m.head_dim,
                           .max_num_tokens = s.padded_tokens(),
                           .page_size = s.page_size,
                           .pages_per_seq = s.pages_per_seq()};
  const int64_t w = *s.sliding_window;
  for (int64_t i = 0; i < static_cast<int64_t>(s.seqs.size()); ++i) {
    const SeqSpec& q = s.seqs[static_cast<size_t>(i)];
    const bool decode = i < s.num_decode, prefill = !decode && i < s.num_decode + s.num_prefill;
    const V3Pass pass = decode ? V3Pass::kDecode : prefill ? V3Pass::kPrefill : V3Pass::kMixed;
    const int64_t rows = decode ? 1 : q.q_len, gap = q.kv_len - q.q_len;
    for (int version : {5, 6, 7}) {
      const std::optional<V3BlockSizes> b = v3_default_block_sizes(shape, pass, version);
      if (!b || (*b)[0] <= 0 || (*b)[1] <= 0) continue;
      // The last query block reads from its first row's window, floored to bkv_sz; the new
      // tokens are written from the blocks it reads (v3_mutation.cc, declare_window_rules).
      const int64_t bq = decode || prefill ? std::min((*b)[0], rows) : (*b)[0];
      const int64_t last = (q.q_len - 1) / bq * bq;
      const int64_t from = std::max<int64_t>(gap + last - w, 0) / (*b)[1] * (*b)[1];
      if (gap / (*b)[1] * (*b)[1] < from) return true;
    }
  }
  return false;
}

int64_t held_bytes(const V3Inputs& in) {
  int64_t n = in.queries.nbytes();  // the output
  for (const Tensor* t : {&in.queries, &in.keys, &in.values, &in.kv_cache, &in.kv_lens,
                          &in.page_indices, &in.cu_q_lens, &in.distribution}) {
    n += t->nbytes();
  }
  if (in.attention_sink) n += in.attention_sink->nbytes();
  return n;
}

V3CaseSpec production_v3_case(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  V3CaseSpec c;
  c.dialect = s.dialect;
  c.profile = profile_of(s.seqs);
  c.q_dtype = s.q_dtype;
  c.kv_dtype = s.kv_dtype;
  c.num_kv_heads = m.kv_heads;
  c.q_per_kv = m.q_heads / m.kv_heads;
  c.head_dim = m.head_dim;
  c.page_size = s.page_size;
  int64_t most = 0;
  for (const SeqSpec& q : s.seqs) {
    c.seqs.push_back({.q_len = q.q_len, .kv_len = q.kv_len});
    most = std::max(most, (q.kv_len + s.page_size - 1) / s.page_size);
  }
  c.num_decode = s.num_decode;
  c.num_prefill = s.num_prefill;
  c.extra_seq_slots = s.max_num_seqs - c.num_seqs();
  c.extra_page_slots = s.pages_per_seq() - most;
  c.extra_pages = s.spare_pages;
  c.extra_tokens = s.padded_tokens() - s.total_q_len();
  c.page_shuffle_seed = s.page_shuffle_seed;
  c.garbage = s.nan_padding;
  c.data_seed = s.data_seed;
  c.sink = s.sinks ? V3Sink::kWithInfs : V3Sink::kNone;
  V3Params& p = c.params;
  p.sm_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  p.sliding_window = s.sliding_window;
  p.soft_cap = s.soft_cap;
  if (s.kv_dtype != s.q_dtype) p.k_scale = p.v_scale = s.kv_scale;
  p.chunk_prefill_size = s.chunk_prefill_size;
  if (s.dialect == Dialect::kTpuInferenceV3Hd64) {
    p.num_kv_pages_per_block = std::min(s.kv_pages_per_block, s.pages_per_seq());
    p.num_queries_per_block = s.queries_per_block;
  }
  return c;
}

const DialectGenerator kV3Generator = v3_generator<Dialect::kTpuInferenceV3>();
const DialectGenerator kV3Hd64Generator = v3_generator<Dialect::kTpuInferenceV3Hd64>();

}  // namespace rpa::props
