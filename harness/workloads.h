// The performance workloads (DESIGN.md section 11), their useful-work metrics, and probes
// of this machine's limits (memory bandwidth, float32 GEMM throughput) that the kernel's
// numbers are read against. Shared by the Google Benchmark binary (bench/rpa_bench.cc) and
// `rpa bench` (cli/bench_command.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dialect.h"
#include "core/dtype.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"

namespace rpa::bench {

struct SeqShape {
  int32_t q_len;
  int32_t kv_len;
};

// One named workload in one dtype (q and KV both in `dtype`).
struct WorkloadSpec {
  std::string name;  // "decode", "prefill", "mixed"
  std::vector<SeqShape> seqs;
  int64_t num_q_heads = 32;
  int64_t num_kv_heads = 8;
  int64_t head_dim = 128;
  int64_t page_size = 16;
  DType dtype = DType::kFloat32;
  uint64_t seed = 1;
};

// The workload names, in report order.
std::span<const std::string_view> workload_names();
// decode: 16 x (1 query, kv 1024); prefill: 1 x (512 queries, kv 512); mixed: JAX's test
// mix of 16 sequences. 32 q heads, 8 kv heads, head_dim 128, page_size 16. Throws
// std::invalid_argument on an unknown name.
WorkloadSpec workload_spec(std::string_view name, DType dtype);
// Every workload in float32 and bfloat16, in report order.
std::vector<WorkloadSpec> all_workload_specs();

// A built workload: inputs laid out like JAX's test (sequences packed into q, physical
// pages handed out in shuffled order, a few unused pages) with normal random data; every
// page slot, q row and page_indices entry the definition never reads holds NaN or garbage.
// sm_scale is 1/sqrt(head_dim) as in JAX's test; block sizes are left to the kernel's
// defaults.
struct Workload {
  WorkloadSpec spec;
  Inputs inputs;
  Params params;
  std::string label() const;  // "decode/float32"
};

// Builds the workload and checks it with strict validation; throws std::logic_error
// naming the rule if validation rejects it (a bug in the builder, never expected).
Workload build_workload(const WorkloadSpec& spec);

// The same call in tpu-inference v3's dialect (DESIGN.md section 16), so that the two
// dialects are timed on the same shapes and data: queries = q; kv_cache = kv_pages in v3's
// packed layout, page for page (NaN where kv_pages has NaN); keys / values = each sequence's
// last q_len tokens, which the fused update writes back where they already are;
// page_indices flattened; distribution [0, 0, N] (every sequence in the mixed pass, as the
// package's own tests run it); sm_scale as the jax workload's. The output equals the jax
// dialect's. Checked with v3 strict validation (std::logic_error naming the rule).
struct V3Workload {
  WorkloadSpec spec;
  V3Inputs inputs;
  V3Params params;
  std::string label() const;  // "v3-decode/bfloat16"
};
V3Workload build_v3_workload(const Workload& w);

// (query, key) pairs the definition attends to: key t of a sequence is attended by its
// row r unless causally masked (t > kv_len - q_len + r). Sliding windows are not counted
// (the workloads have none).
int64_t attended_pairs(const Inputs& in);
// Useful float32 work: 4 * Hq * D flops per attended pair (q.k and p.v, a multiply and an
// add each, for every query head).
double useful_flops(const Inputs& in);
// Bytes of K and V the definition needs: sum over sequences of kv_len * 2 * Hkv * D *
// kv_bytes (each needed token read once; padding slots and unused pages not counted).
double effective_kv_bytes(const Inputs& in);

// STREAM-like triad a[i] = b[i] + s * c[i] over three float arrays of n elements each,
// split over `threads` threads (each thread first-touches and sweeps its own slice); the
// best of `repetitions` sweeps. Bytes counted: 3 * n * sizeof(float) per sweep (read b
// and c, write a), as STREAM counts; write-allocate traffic on a makes the real bus
// traffic up to 4/3 of this.
struct TriadResult {
  double gb_per_s = 0.0;  // 1e9 bytes per second
  double best_s = 0.0;
  int64_t bytes_per_sweep = 0;
  int threads = 0;
};
TriadResult measure_triad(int64_t n = int64_t{48} << 20, int threads = 2, int repetitions = 5);

// Float32 GEMM C = A * B with Eigen, n x n x n, compiled with this build's flags (the same
// Eigen kernels the tiled kernel gets): the peak the kernel's GEMMs could reach in this
// build, not the silicon's (an AVX-512 build doubles it where the CPU has AVX-512). Eigen is built without OpenMP here, so to use both
// cores the columns of B and C are split between `threads` std::threads, each one Eigen
// GEMM of n x n times n x (n / threads). The best of `repetitions`; flops = 2 n^3.
struct GemmResult {
  double gflop_per_s = 0.0;
  double best_s = 0.0;
  int64_t n = 0;
  int threads = 0;
  std::string simd;  // the vector ISA Eigen's kernels were built for, e.g. "AVX2 + FMA (8 floats)"
};
GemmResult measure_gemm(int64_t n = 2048, int threads = 2, int repetitions = 3);

// lscpu's "Model name" (from /proc/cpuinfo), or "unknown".
std::string cpu_model_name();
// Local date and time, "YYYY-MM-DD HH:MM:SS"; utc_iso: UTC, "YYYY-MM-DDTHH:MM:SSZ".
std::string now_string(bool utc_iso = false);
// The 1, 5 and 15 minute load averages from /proc/loadavg ("0.12 0.30 0.25"), or
// "unknown". On a shared 2-core machine a load above ~1 means other work competes with the
// measurement and wall times stretch.
std::string load_average();

}  // namespace rpa::bench
