// The performance workloads (DESIGN.md section 11) by name and shape, and probes of this
// machine's limits (memory bandwidth, float32 GEMM throughput) that the kernel's numbers are
// read against. Shared by the Google Benchmark binary (bench/rpa_bench.cc) and `rpa bench`
// (cli/bench_command.cc); a workload built in a dialect, with its useful-work metrics, is the
// dialect's: harness/jax_workload.h, harness/v3_workload.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

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

// Writes x as element i of a float32 or bfloat16 buffer: how the workload builders
// (harness/jax_workload.cc, harness/v3_workload.cc) fill their tensors.
void put(DType t, std::byte* data, int64_t i, float x);

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
