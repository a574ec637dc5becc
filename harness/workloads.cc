#include "harness/workloads.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>

#include <Eigen/Core>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "core/v3_cache_layout.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa::bench {
namespace {

constexpr std::array<std::string_view, 3> kNames = {"decode", "prefill", "mixed"};

// JAX's test_ragged_paged_attention mix (q_len, kv_len).
constexpr std::array<SeqShape, 16> kJaxMix = {{{5, 18},
                                               {1, 129},
                                               {120, 597},
                                               {1, 122},
                                               {1, 64},
                                               {32, 322},
                                               {251, 463},
                                               {1, 181},
                                               {1, 1107},
                                               {99, 123},
                                               {1, 31},
                                               {5, 18},
                                               {3, 1229},
                                               {117, 229},
                                               {1, 87},
                                               {1, 1328}}};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

// Writes x as element i of a float32 or bfloat16 buffer.
void put(DType t, std::byte* data, int64_t i, float x) {
  if (t == DType::kFloat32) {
    reinterpret_cast<float*>(data)[i] = x;
  } else {
    store_float(t, data, i, x);
  }
}

// The vector units Eigen's kernels were compiled for (Eigen's own
// SimdInstructionSetsInUse() does not tell AVX from AVX2 + FMA).
std::string eigen_simd() {
#if defined(EIGEN_VECTORIZE_AVX512)
  return "AVX-512 + FMA (16 floats)";
#elif defined(EIGEN_VECTORIZE_AVX2) && defined(EIGEN_VECTORIZE_FMA)
  return "AVX2 + FMA (8 floats)";
#elif defined(EIGEN_VECTORIZE_AVX)
  return "AVX (8 floats, no FMA)";
#elif defined(EIGEN_VECTORIZE_SSE2)
  return "SSE2 (4 floats, no FMA)";
#else
  return Eigen::SimdInstructionSetsInUse();
#endif
}

}  // namespace

std::span<const std::string_view> workload_names() { return kNames; }

WorkloadSpec workload_spec(std::string_view name, DType dtype) {
  WorkloadSpec s;
  s.name = name;
  s.dtype = dtype;
  if (name == "decode") {
    s.seqs.assign(16, SeqShape{1, 1024});
    s.seed = 11;
  } else if (name == "prefill") {
    s.seqs = {SeqShape{512, 512}};
    s.seed = 12;
  } else if (name == "mixed") {
    s.seqs.assign(kJaxMix.begin(), kJaxMix.end());
    s.seed = 13;
  } else {
    throw std::invalid_argument("unknown workload '" + std::string(name) + "'");
  }
  return s;
}

std::vector<WorkloadSpec> all_workload_specs() {
  std::vector<WorkloadSpec> out;
  for (std::string_view name : kNames) {
    for (DType t : {DType::kFloat32, DType::kBFloat16}) out.push_back(workload_spec(name, t));
  }
  return out;
}

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

std::string V3Workload::label() const {
  return "v3-" + spec.name + "/" + std::string(dtype_name(spec.dtype));
}

V3Workload build_v3_workload(const Workload& w) {
  const Inputs& in = w.inputs;
  const PagedKvView view = kv_view(in);
  const int64_t T = in.q.dim(0), S = view.page_size(),
                Hkv = view.num_kv_heads(), D = view.head_dim(), P = in.kv_pages.dim(0);
  const Dialect dialect = Dialect::kTpuInferenceV3;
  const DType kv = in.kv_pages.dtype();
  const V3CacheLayout layout(dialect, kv, Hkv, D);
  const int64_t e = dtype_size(kv);
  V3Workload v;
  v.spec = w.spec;
  V3Inputs& o = v.inputs;
  o.queries = in.q;
  o.keys = Tensor(kv, {T, Hkv, D});
  o.values = Tensor(kv, {T, Hkv, D});
  o.kv_cache = Tensor(kv, layout.cache_shape(P, S));
  for (int64_t i = 0; i < o.kv_cache.numel(); ++i) put(kv, o.kv_cache.data(), i, NAN);
  for (int64_t page = 0; page < P; ++page) {
    for (int64_t slot = 0; slot < S; ++slot) {
      const std::byte* src = in.kv_pages.data() + (page * S + slot) * 2 * Hkv * D * e;
      std::byte* dst = o.kv_cache.data() + layout.token_offset(page, slot, S) * e;
      for (int64_t h = 0; h < Hkv; ++h) {
        std::memcpy(dst + layout.k_offset(h) * e, src + 2 * h * D * e, static_cast<size_t>(D * e));
        std::memcpy(dst + layout.v_offset(h) * e, src + (2 * h + 1) * D * e, static_cast<size_t>(D * e));
      }
    }
  }
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    for (int64_t j = 0; j < view.q_len(s); ++j) {
      const int64_t t = view.kv_len(s) - view.q_len(s) + j, row = view.q_start(s) + j;
      for (int64_t h = 0; h < Hkv; ++h) {
        std::memcpy(o.keys.data() + (row * Hkv + h) * D * e, in.kv_pages.data() + view.k_offset(s, t, h) * e,
                    static_cast<size_t>(D * e));
        std::memcpy(o.values.data() + (row * Hkv + h) * D * e, in.kv_pages.data() + view.v_offset(s, t, h) * e,
                    static_cast<size_t>(D * e));
      }
    }
  }
  o.kv_lens = in.kv_lens;
  o.page_indices = Tensor(DType::kInt32, {in.page_indices.numel()}, std::vector<std::byte>(
      in.page_indices.bytes().begin(), in.page_indices.bytes().end()));
  o.cu_q_lens = in.cu_q_lens;
  const auto k = static_cast<int32_t>(view.num_seqs());
  o.distribution = Tensor::from_int32({3}, std::vector<int32_t>{0, 0, k});
  v.params.sm_scale = w.params.sm_scale;
  if (const std::optional<V3Failure> f = v3_validate(dialect, o, v.params, Mode::kStrict)) {
    throw std::logic_error("bench workload " + v.label() + " rejected by v3 strict validation: " +
                           std::string(v3_rule_info(f->rule).name) + ": " + f->message);
  }
  return v;
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

TriadResult measure_triad(int64_t n, int threads, int repetitions) {
  threads = std::max(1, threads);
  // Uninitialized on purpose: each thread first-touches its own slice.
  const std::unique_ptr<float[]> a(new float[static_cast<size_t>(n)]);
  const std::unique_ptr<float[]> b(new float[static_cast<size_t>(n)]);
  const std::unique_ptr<float[]> c(new float[static_cast<size_t>(n)]);
  float* const pa = a.get();
  const float* const pb = b.get();
  const float* const pc = c.get();
  auto slice = [&](int k) {
    return std::pair<int64_t, int64_t>{n * k / threads, n * (k + 1) / threads};
  };
  auto in_parallel = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (int k = 1; k < threads; ++k) pool.emplace_back(body, k);
    body(0);
    for (std::thread& th : pool) th.join();
  };
  in_parallel([&](int k) {
    const auto [lo, hi] = slice(k);
    for (int64_t i = lo; i < hi; ++i) {
      a[static_cast<size_t>(i)] = 0.0f;
      b[static_cast<size_t>(i)] = 1.0f;
      c[static_cast<size_t>(i)] = 2.0f;
    }
  });
  const float s = 3.0f;
  double best = 1e300;
  for (int rep = 0; rep < std::max(1, repetitions); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    in_parallel([&](int k) {
      const auto [lo, hi] = slice(k);
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
    });
    best = std::min(best, seconds_since(t0));
  }
  if (a[static_cast<size_t>(n / 2)] != 7.0f) throw std::logic_error("triad: wrong result");
  TriadResult r;
  r.bytes_per_sweep = 3 * n * static_cast<int64_t>(sizeof(float));
  r.best_s = best;
  r.gb_per_s = static_cast<double>(r.bytes_per_sweep) / best / 1e9;
  r.threads = threads;
  return r;
}

GemmResult measure_gemm(int64_t n, int threads, int repetitions) {
  using Mat = Eigen::MatrixXf;
  threads = std::max(1, threads);
  Eigen::initParallel();
  const Mat A = Mat::Random(n, n), B = Mat::Random(n, n);
  Mat C(n, n);
  auto run_once = [&] {
    std::vector<std::thread> pool;
    auto body = [&](int k) {
      const int64_t c0 = n * k / threads, c1 = n * (k + 1) / threads;
      C.middleCols(c0, c1 - c0).noalias() = A * B.middleCols(c0, c1 - c0);
    };
    for (int k = 1; k < threads; ++k) pool.emplace_back(body, k);
    body(0);
    for (std::thread& th : pool) th.join();
  };
  run_once();  // warm-up: page in C, settle the clocks
  double best = 1e300;
  for (int rep = 0; rep < std::max(1, repetitions); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    best = std::min(best, seconds_since(t0));
  }
  // A spot check that the product was computed (and not optimized away).
  const float want = A.row(n / 3).dot(B.col(n / 5));
  if (std::abs(C(n / 3, n / 5) - want) > 1e-3f * (1.0f + std::abs(want))) {
    throw std::logic_error("gemm: wrong result");
  }
  GemmResult r;
  r.n = n;
  r.threads = threads;
  r.best_s = best;
  r.gflop_per_s = 2.0 * std::pow(static_cast<double>(n), 3) / best / 1e9;
  r.simd = eigen_simd();
  return r;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.starts_with("model name")) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      const size_t start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "unknown" : line.substr(start);
    }
  }
  return "unknown";
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(f >> one >> five >> fifteen)) return "unknown";
  return one + " " + five + " " + fifteen;
}

std::string now_string(bool utc_iso) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  if (utc_iso) {
    gmtime_r(&t, &tm);
  } else {
    localtime_r(&t, &tm);
  }
  char buf[32];
  std::strftime(buf, sizeof buf, utc_iso ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace rpa::bench
