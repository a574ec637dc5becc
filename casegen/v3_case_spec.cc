#include "casegen/v3_case_spec.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <sstream>
#include <type_traits>

#include "core/python_repr.h"
#include "core/v3_cache_layout.h"
#include "casegen/spec_text.h"

namespace rpa::props {
namespace {

int64_t pages_of(int64_t kv_len, int64_t page_size) {
  return page_size > 0 ? (kv_len + page_size - 1) / page_size : 0;
}

void print_blocks(std::ostream& os, const char* name, const std::optional<V3BlockSizes>& b) {
  if (!b) return;
  os << " " << name << "=(" << (*b)[0] << ", " << (*b)[1] << ", " << (*b)[2] << ", " << (*b)[3]
     << ")";
}

}  // namespace

int64_t V3CaseSpec::max_num_seqs() const {
  return std::max<int64_t>(num_seqs() + extra_seq_slots, 1);
}

int64_t V3CaseSpec::pages_per_seq() const {
  int64_t most = 0;
  for (const V3SeqSpec& s : seqs) most = std::max(most, pages_of(s.kv_len, page_size));
  return std::max<int64_t>(most + extra_page_slots, 1);
}

int64_t V3CaseSpec::pages_in_use() const {
  int64_t n = 0;
  for (const V3SeqSpec& s : seqs) n += pages_of(s.kv_len, page_size);
  return std::max<int64_t>(n, 1);
}

int64_t V3CaseSpec::total_q_len() const {
  int64_t n = 0;
  for (const V3SeqSpec& s : seqs) n += s.q_len;
  return n;
}

int64_t V3CaseSpec::max_num_tokens() const {
  return std::max<int64_t>(total_q_len() + extra_tokens, 1);
}

int64_t V3CaseSpec::max_kv_len() const {
  int64_t m = 0;
  for (const V3SeqSpec& s : seqs) m = std::max(m, s.kv_len);
  return m;
}

std::string describe(const V3CaseSpec& s) {
  std::ostringstream os;
  const V3CacheLayout layout(s.dialect, s.kv_dtype, s.num_kv_heads, s.head_dim);
  const Shape cache = layout.cache_shape(s.total_num_pages(), s.page_size);
  os << dialect_name(s.dialect) << ", " << profile_name(s.profile) << " batch: queries "
     << dtype_name(s.q_dtype) << " [" << s.max_num_tokens() << ", " << s.num_q_heads() << ", "
     << s.head_dim << "], kv " << dtype_name(s.kv_dtype) << " keys [" << s.max_num_tokens() << ", "
     << s.num_kv_heads << ", " << s.head_dim << "], kv_cache " << shape_repr(cache)
     << ", max_num_seqs=" << s.max_num_seqs() << ", pages_per_seq=" << s.pages_per_seq() << "\n";
  const int64_t i = s.num_decode, j = s.num_decode + s.num_prefill;
  os << "  distribution=(" << i << ", " << j << ", " << s.num_seqs() << ")";
  os << ", sequences (q_len/kv_len):";
  if (s.seqs.empty()) os << " none";
  for (int64_t k = 0; k < s.num_seqs(); ++k) {
    const V3SeqSpec& q = s.seqs[static_cast<size_t>(k)];
    os << (k == i || k == j ? " |" : "") << " " << q.q_len << "/" << q.kv_len;
  }
  os << "\n  pages: " << s.pages_in_use() << " in use + " << s.extra_pages << " spare, "
     << (s.page_shuffle_seed == 0 ? std::string("in order")
                                  : "shuffled (seed " + std::to_string(s.page_shuffle_seed) + ")")
     << "; data seed " << s.data_seed << ", garbage " << (s.garbage ? "NaN" : "zeros");
  if (s.sink != V3Sink::kNone) {
    os << ", attention_sink " << (s.sink == V3Sink::kNormal ? "N(0,1)" : "N(0,1) with -inf");
  }
  const V3Params& p = s.params;
  os << "\n  params: sm_scale=" << py_float_repr(p.sm_scale);
  if (s.dialect == Dialect::kTpuInferenceV3) {
    os << " use_causal_mask=" << (p.use_causal_mask ? "True" : "False")
       << " update_kv_cache=" << (p.update_kv_cache ? "True" : "False")
       << " skip_kv_mask=" << (p.skip_kv_mask ? "True" : "False");
  }
  print_optional(os, "sliding_window", p.sliding_window);
  print_optional(os, "soft_cap", p.soft_cap);
  print_optional(os, "mask_value", p.mask_value);
  print_optional(os, "q_scale", p.q_scale);
  print_optional(os, "k_scale", p.k_scale);
  print_optional(os, "v_scale", p.v_scale);
  print_optional(os, "chunk_prefill_size", p.chunk_prefill_size);
  print_blocks(os, "d_block_sizes", p.d_block_sizes);
  print_blocks(os, "p_block_sizes", p.p_block_sizes);
  print_blocks(os, "m_block_sizes", p.m_block_sizes);
  print_optional(os, "num_kv_pages_per_block", p.num_kv_pages_per_block);
  print_optional(os, "num_queries_per_block", p.num_queries_per_block);
  print_optional(os, "vmem_limit_bytes", p.vmem_limit_bytes);
  return os.str();
}

}  // namespace rpa::props
