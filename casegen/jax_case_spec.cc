#include "casegen/jax_case_spec.h"

#include <algorithm>
#include <sstream>

#include "core/python_repr.h"
#include "casegen/spec_text.h"

namespace rpa::props {

int64_t CaseSpec::total_q_len() const {
  int64_t total = 0;
  for (const SeqSpec& s : seqs) total += s.q_len;
  return total;
}

int64_t CaseSpec::max_kv_len() const {
  int64_t m = 0;
  for (const SeqSpec& s : seqs) m = std::max(m, s.kv_len);
  return m;
}

std::string_view data_kind_name(DataKind d) {
  switch (d) {
    case DataKind::kNormal:
      return "normal";
    case DataKind::kLarge:
      return "large";
    case DataKind::kAllEqual:
      return "all-equal";
  }
  return "?";
}

int64_t pages_for(int64_t kv_len, int64_t page_size) {
  return kv_len <= 0 ? 0 : (kv_len + page_size - 1) / page_size;
}

std::string describe(const CaseSpec& s) {
  std::ostringstream os;
  os << profile_name(s.profile) << " batch: q " << dtype_name(s.q_dtype) << " ["
     << s.max_num_batched_tokens << ", " << s.num_q_heads() << ", " << s.head_dim << "], kv "
     << dtype_name(s.kv_dtype) << " [" << s.num_pages << ", " << s.page_size << ", "
     << 2 * s.num_kv_heads << ", " << s.head_dim << "], max_num_seqs=" << s.max_num_seqs
     << ", pages_per_seq=" << s.pages_per_seq << "\n";
  os << "  sequences (q_len/kv_len):";
  if (s.seqs.empty()) os << " none";
  for (const SeqSpec& q : s.seqs) os << " " << q.q_len << "/" << q.kv_len;
  os << "\n  page_indices:";
  for (int64_t i = 0; i < s.max_num_seqs; ++i) {
    os << (i == 0 ? " [" : " | ");
    for (int64_t j = 0; j < s.pages_per_seq; ++j) {
      os << (j == 0 ? "" : " ") << s.page_indices[static_cast<size_t>(i * s.pages_per_seq + j)];
    }
  }
  os << "]";
  if (!s.pad_kv_lens.empty()) {
    os << "\n  padding kv_lens:";
    for (int64_t v : s.pad_kv_lens) os << " " << v;
    os << ", padding cu_q_lens:";
    for (int64_t v : s.pad_cu_q_lens) os << " " << v;
  }
  os << "\n  data " << data_kind_name(s.data) << " seed " << s.data_seed << ", garbage "
     << (s.nan_garbage ? "NaN" : "large finite (1e30; float8: its max)")
     << "\n  params: sm_scale=" << py_float_repr(s.params.sm_scale);
  print_optional(os, "sliding_window", s.params.sliding_window);
  print_optional(os, "soft_cap", s.params.soft_cap);
  print_optional(os, "mask_value", s.params.mask_value);
  print_optional(os, "k_scale", s.params.k_scale);
  print_optional(os, "v_scale", s.params.v_scale);
  print_optional(os, "num_kv_pages_per_block", s.params.num_kv_pages_per_block);
  print_optional(os, "num_queries_per_block", s.params.num_queries_per_block);
  print_optional(os, "vmem_limit_bytes", s.params.vmem_limit_bytes);
  if (!s.mutations.empty()) {
    os << "\n  mutations:";
    for (const MutationSpec& m : s.mutations)
      os << " " << mutation_name(m.kind) << "(" << m.arg << ")";
  }
  return os.str();
}

}  // namespace rpa::props
