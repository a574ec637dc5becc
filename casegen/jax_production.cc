// The production profile's jax calls (casegen/jax_production.h), jax's SMEM bound on a
// recipe (production_smem_fits, casegen/production.h) and its entry of the generator registry
// (casegen/dialect_generator.h).
#include "casegen/jax_production.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "casegen/jax_dialect_generator.h"
#include "casegen/jax_materialize.h"
#include "casegen/random_source.h"
#include "validation/jax_vmem_budget.h"
#include "validation/target_profile.h"

namespace rpa::props {
namespace {

// The pool's pages in use, in order or shuffled by the recipe's seed.
std::vector<int64_t> page_order(const ProductionSpec& s, int64_t used) {
  std::vector<int64_t> order(static_cast<size_t>(used));
  std::iota(order.begin(), order.end(), 0);
  if (s.page_shuffle_seed != 0) {
    uint64_t state = static_cast<uint64_t>(s.page_shuffle_seed);
    for (int64_t i = used - 1; i > 0; --i) {
      std::swap(order[static_cast<size_t>(i)],
                order[static_cast<size_t>(splitmix64(state) % static_cast<uint64_t>(i + 1))]);
    }
  }
  return order;
}

int64_t jax_cache_token_bytes(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  return 2 * m.kv_heads * m.head_dim * dtype_size(s.kv_dtype);
}

Case jax_production_call(const ProductionSpec& s) {
  const Materialized m = materialize(production_case(s));
  Case c;
  c.dialect = s.dialect;
  c.inputs = m.inputs;
  c.params = m.params;
  return c;
}

}  // namespace

bool production_smem_fits(int64_t max_num_seqs, int64_t pages_per_seq) {
  return smem_need_bytes(max_num_seqs, pages_per_seq) <=
         default_target_profile().smem_capacity_bytes;
}

int64_t held_bytes(const Inputs& in) {
  int64_t n = in.q.nbytes();  // the output
  for (const Tensor* t : {&in.q, &in.kv_pages, &in.kv_lens, &in.page_indices, &in.cu_q_lens,
                          &in.num_seqs}) {
    n += t->nbytes();
  }
  return n;
}

CaseSpec production_case(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  CaseSpec c;
  c.profile = profile_of(s.seqs);
  c.q_dtype = s.q_dtype;
  c.kv_dtype = s.kv_dtype;
  c.num_kv_heads = m.kv_heads;
  c.q_per_kv = m.q_heads / m.kv_heads;
  c.head_dim = m.head_dim;
  c.page_size = s.page_size;
  c.seqs = s.seqs;
  c.max_num_seqs = s.max_num_seqs;
  c.pages_per_seq = s.pages_per_seq();
  int64_t used = 0;
  for (const SeqSpec& q : s.seqs) used += std::max<int64_t>(pages_for(q.kv_len, s.page_size), 1);
  used = std::max<int64_t>(used, 1);
  c.num_pages = used + s.spare_pages;
  c.max_num_batched_tokens = s.padded_tokens();
  // vLLM's block table: a sequence's pages, zeros past them and in the padding slots.
  const std::vector<int64_t> order = page_order(s, used);
  c.page_indices.assign(static_cast<size_t>(c.max_num_seqs * c.pages_per_seq), 0);
  int64_t next = 0;
  for (size_t i = 0; i < s.seqs.size(); ++i) {
    const int64_t pages = std::max<int64_t>(pages_for(s.seqs[i].kv_len, s.page_size), 1);
    for (int64_t j = 0; j < pages; ++j) {
      c.page_indices[i * static_cast<size_t>(c.pages_per_seq) + static_cast<size_t>(j)] =
          order[static_cast<size_t>(next++)];
    }
  }
  // The runner's padding: kv_lens 0, cu_q_lens repeating the total.
  c.pad_kv_lens.assign(static_cast<size_t>(c.max_num_seqs - c.num_seqs()), 0);
  c.pad_cu_q_lens.assign(c.pad_kv_lens.size(), s.total_q_len());
  c.data = DataKind::kNormal;
  c.data_seed = s.data_seed;
  c.nan_garbage = s.nan_padding;
  c.params.sm_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  c.params.sliding_window = s.sliding_window;
  c.params.soft_cap = s.soft_cap;
  if (s.kv_dtype != s.q_dtype) c.params.k_scale = c.params.v_scale = s.kv_scale;
  return c;
}

const DialectGenerator kJaxGenerator = {
    .dialect = Dialect::kJax,
    .production_cache_token_bytes = jax_cache_token_bytes,
    .production_call = jax_production_call,
};

}  // namespace rpa::props
