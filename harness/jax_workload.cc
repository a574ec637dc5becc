// A named workload built in JAX's dialect (harness/jax_workload.h): the packed queries, the
// shuffled pages of noise with NaN where the definition never reads, strictly validated; and
// its useful flops and KV bytes.
#include "harness/jax_workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"

namespace rpa::bench {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A fast, seeded source of noise: building the largest workload (128 MiB of KV) with
// std::normal_distribution took seconds.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Approximately N(0, 1): the sum of four uniform 16-bit fractions (Irwin-Hall, variance
  // 4/12), centred and scaled to unit variance; |x| < 3.47.
  float normalish() {
    const uint64_t r = next();
    const auto sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) +
                                        (r >> 48));
    return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
  }
};

}  // namespace

std::string Workload::label() const {
  return spec.name + "/" + std::string(dtype_name(spec.dtype));
}

Workload build_workload(const WorkloadSpec& spec) {
  const int64_t S = spec.page_size, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads,
                D = spec.head_dim;
  const auto N = static_cast<int64_t>(spec.seqs.size());
  int64_t total_q = 0, max_kv = 0, used_pages = 0;
  for (const SeqShape& s : spec.seqs) {
    total_q += s.q_len;
    max_kv = std::max<int64_t>(max_kv, s.kv_len);
    used_pages += ceil_div(s.kv_len, S);
  }
  const int64_t pps = std::max<int64_t>(1, ceil_div(max_kv, S));
  const int64_t extra_pages = 4;  // unused pages in the pool, full of NaN
  const int64_t P = used_pages + extra_pages;

  Workload w;
  w.spec = spec;
  Inputs& in = w.inputs;
  in.q = Tensor(spec.dtype, {std::max<int64_t>(total_q, 1), Hq, D});
  in.kv_pages = Tensor(spec.dtype, {P, S, 2 * Hkv, D});
  in.kv_lens = Tensor(DType::kInt32, {N});
  in.page_indices = Tensor(DType::kInt32, {N, pps});
  in.cu_q_lens = Tensor(DType::kInt32, {N + 1});
  in.num_seqs = Tensor(DType::kInt32, {1});
  in.num_seqs.set_int(0, N);

  // Physical pages in shuffled order: sequence i's j-th page is perm[next++].
  std::mt19937_64 rng(spec.seed);
  std::vector<int64_t> perm(static_cast<size_t>(P));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  int64_t cu = 0;
  for (int64_t i = 0; i < N; ++i) {
    const SeqShape& s = spec.seqs[static_cast<size_t>(i)];
    in.kv_lens.set_int(i, s.kv_len);
    cu += s.q_len;
    in.cu_q_lens.set_int(i + 1, cu);
    const int64_t used = ceil_div(s.kv_len, S);
    for (int64_t j = 0; j < pps; ++j) {
      // Entries past the sequence's pages are never read: garbage.
      in.page_indices.set_int(i * pps + j, j < used ? perm[next++] : -1000 - j);
    }
  }

  // Data: unit-variance noise where the definition reads, NaN everywhere else.
  SplitMix64 noise{spec.seed};
  const DType t = spec.dtype;
  const int64_t q_numel = in.q.numel(), q_used = total_q * Hq * D;
  for (int64_t i = 0; i < q_numel; ++i) put(t, in.q.data(), i, i < q_used ? noise.normalish() : NAN);
  const int64_t kv_numel = in.kv_pages.numel();
  for (int64_t i = 0; i < kv_numel; ++i) put(t, in.kv_pages.data(), i, NAN);
  const int64_t token_elems = 2 * Hkv * D;
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t tok = 0; tok < spec.seqs[static_cast<size_t>(i)].kv_len; ++tok) {
      const int64_t page = in.page_indices.int_at(i * pps + tok / S);
      const int64_t base = (page * S + tok % S) * token_elems;
      for (int64_t e = 0; e < token_elems; ++e) put(t, in.kv_pages.data(), base + e, noise.normalish());
    }
  }

  w.params.sm_scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (const std::optional<Failure> f = validate(in, w.params)) {
    throw std::logic_error("bench workload " + w.label() + " rejected by strict validation: " +
                           std::string(rule_info(f->rule).name) + ": " + f->message);
  }
  return w;
}

int64_t attended_pairs(const Inputs& in) {
  const PagedKvView v = kv_view(in);
  int64_t pairs = 0;
  for (int64_t s = 0; s < v.num_seqs(); ++s) {
    // Row r attends keys t <= kv_len - q_len + r, i.e. kv_len - q_len + r + 1 of them.
    const int64_t q = v.q_len(s), k = v.kv_len(s);
    for (int64_t r = 0; r < q; ++r) pairs += std::clamp<int64_t>(k - q + r + 1, 0, k);
  }
  return pairs;
}

double useful_flops(const Inputs& in) {
  const PagedKvView v = kv_view(in);
  return 4.0 * static_cast<double>(v.num_q_heads() * v.head_dim()) *
         static_cast<double>(attended_pairs(in));
}

double effective_kv_bytes(const Inputs& in) {
  const PagedKvView v = kv_view(in);
  int64_t tokens = 0;
  for (int64_t s = 0; s < v.num_seqs(); ++s) tokens += v.kv_len(s);
  return static_cast<double>(tokens) * 2.0 * static_cast<double>(v.num_kv_heads() * v.head_dim()) *
         dtype_size(in.kv_pages.dtype());
}

}  // namespace rpa::bench
