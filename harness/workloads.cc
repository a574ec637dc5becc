#include "harness/workloads.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include <Eigen/Core>

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

void put(DType t, std::byte* data, int64_t i, float x) {
  if (t == DType::kFloat32) {
    reinterpret_cast<float*>(data)[i] = x;
  } else {
    store_float(t, data, i, x);
  }
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
