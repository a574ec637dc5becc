// A named workload (harness/workloads.h) built in JAX's dialect, and its useful-work
// metrics: what the Google Benchmark binary (bench/jax_bench.cc), `rpa bench` (cli/jax_bench.cc,
// cli/v3_bench.cc) and the Python package's rpa.workload time and measure.
#pragma once

#include <cstdint>
#include <string>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "harness/workloads.h"

namespace rpa::bench {

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

}  // namespace rpa::bench
