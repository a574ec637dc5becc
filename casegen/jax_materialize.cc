#include "casegen/jax_materialize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "casegen/random_source.h"

namespace rpa::props {
namespace {

class Stream {
 public:
  explicit Stream(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_); }
  // Uniform in [-2, 2) on a 2^-20 grid.
  double uniform() { return static_cast<double>(next() >> 44) / (1 << 20) * 4.0 - 2.0; }

 private:
  uint64_t state_;
};

class DataDraw {
 public:
  explicit DataDraw(const CaseSpec& s)
      : kind_(s.data), stream_(static_cast<uint64_t>(s.data_seed)) {
    constant_ = stream_.uniform();
  }
  double next() {
    switch (kind_) {
      case DataKind::kNormal:
        return stream_.uniform();
      case DataKind::kLarge: {
        const double v = stream_.uniform();
        return std::ldexp(v, static_cast<int>(stream_.next() % 7));
      }
      case DataKind::kAllEqual:
        return constant_;
    }
    return 0.0;
  }

 private:
  DataKind kind_;
  Stream stream_;
  double constant_ = 0.0;
};

Tensor int32_tensor(Shape shape, const std::vector<int64_t>& values) {
  Tensor t(DType::kInt32, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set_int(static_cast<int64_t>(i), values[i]);
  return t;
}

bool is_shape_mutation(const MutationSpec& m) {
  return mutation_group(m.kind) == MutationGroup::kShape;
}

}  // namespace

std::vector<bool> read_kv_slots(const CaseSpec& s) {
  std::vector<bool> read(static_cast<size_t>(s.num_pages * s.page_size), false);
  for (int64_t i = 0; i < s.num_seqs(); ++i) {
    for (int64_t t = 0; t < s.seqs[static_cast<size_t>(i)].kv_len; ++t) {
      const int64_t page =
          s.page_indices[static_cast<size_t>(i * s.pages_per_seq + t / s.page_size)];
      read[static_cast<size_t>(page * s.page_size + t % s.page_size)] = true;
    }
  }
  return read;
}

// Draws the data the definition reads into q and kv_pages, and garbage everywhere else.
void fill_data(const CaseSpec& s, Inputs& in) {
  const int64_t Hq = s.num_q_heads(), D = s.head_dim, Hc = 2 * s.num_kv_heads;
  // Finite filler must stay finite in the dtype: float8 has no 1e30 (e4m3fn turns it into
  // NaN, e5m2 into inf).
  auto garbage_for = [&](DType t) {
    if (s.nan_garbage) return std::numeric_limits<double>::quiet_NaN();
    return t == DType::kFloat8E4M3FN ? 448.0 : t == DType::kFloat8E5M2 ? 57344.0 : 1e30;
  };
  DataDraw draw(s);

  const int64_t defined_q = s.total_q_len() * Hq * D;
  const double q_garbage = garbage_for(s.q_dtype);
  const int64_t q_elems = in.q.numel();
  for (int64_t e = 0; e < std::min(defined_q, q_elems); ++e) in.q.set_float(e, draw.next());
  in.q.fill_float(defined_q, q_elems, q_garbage);

  const std::vector<bool> read = read_kv_slots(s);
  const int64_t token_elems = Hc * D;
  const double kv_garbage = garbage_for(s.kv_dtype);
  for (size_t slot = 0; slot < read.size(); ++slot) {
    const int64_t base = static_cast<int64_t>(slot) * token_elems;
    if (!read[slot]) {
      in.kv_pages.fill_float(base, base + token_elems, kv_garbage);
      continue;
    }
    for (int64_t e = 0; e < token_elems; ++e) in.kv_pages.set_float(base + e, draw.next());
  }
}

Materialized materialize(const CaseSpec& s, Contents contents) {
  Materialized m = materialize_valid(s, contents);
  apply_mutations(s, m);
  return m;
}

void apply_mutations(const CaseSpec& s, Materialized& m) {
  std::vector<MutationSpec> order = s.mutations;
  std::stable_sort(order.begin(), order.end(), [](const MutationSpec& a, const MutationSpec& b) {
    if (is_shape_mutation(a) != is_shape_mutation(b)) return is_shape_mutation(a);
    return a.kind < b.kind;
  });
  for (const MutationSpec& mu : order) apply_mutation(mu, s, m.inputs, m.params, m.declared);
}

Materialized materialize_valid(const CaseSpec& s, Contents contents) {
  Materialized m;
  Inputs& in = m.inputs;
  const int64_t T = s.max_num_batched_tokens, Hq = s.num_q_heads(), D = s.head_dim;
  const int64_t Hc = 2 * s.num_kv_heads, N = s.max_num_seqs;
  if (contents == Contents::kData) {
    in.q = Tensor(s.q_dtype, {T, Hq, D});
    in.kv_pages = Tensor(s.kv_dtype, {s.num_pages, s.page_size, Hc, D});
    fill_data(s, in);
  } else {
    in.q = Tensor::shared_zeros(s.q_dtype, {T, Hq, D});
    in.kv_pages = Tensor::shared_zeros(s.kv_dtype, {s.num_pages, s.page_size, Hc, D});
  }

  std::vector<int64_t> kv_lens, cu_q_lens{0};
  for (const SeqSpec& q : s.seqs) {
    kv_lens.push_back(q.kv_len);
    cu_q_lens.push_back(cu_q_lens.back() + q.q_len);
  }
  kv_lens.insert(kv_lens.end(), s.pad_kv_lens.begin(), s.pad_kv_lens.end());
  cu_q_lens.insert(cu_q_lens.end(), s.pad_cu_q_lens.begin(), s.pad_cu_q_lens.end());
  in.kv_lens = int32_tensor({N}, kv_lens);
  in.page_indices = int32_tensor({N, s.pages_per_seq}, s.page_indices);
  in.cu_q_lens = int32_tensor({N + 1}, cu_q_lens);
  in.num_seqs = int32_tensor({1}, {s.num_seqs()});
  m.params = s.params;
  return m;
}

}  // namespace rpa::props
