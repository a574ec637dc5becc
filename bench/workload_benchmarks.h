// The Google Benchmark binary's benchmarks over harness/'s named workloads (harness/workloads.h),
// one set per dialect that has them (bench/jax_bench.cc). A dialect's file adds its set at
// static initialization; main() (bench/rpa_bench.cc) adds them all, in the order they were added,
// after parsing the arguments and before the production calls. Each set builds (and strictly
// validates) its workloads before registering any benchmark, and throws std::logic_error naming
// the rule if validation rejects one.
#pragma once

#include <span>
#include <vector>

namespace rpa::bench {

// Builds a dialect's workloads and registers its benchmarks over them.
using WorkloadBenchmarks = void (*)();

// Every set added, in order.
inline std::vector<WorkloadBenchmarks>& workload_benchmark_sets() {
  static std::vector<WorkloadBenchmarks> sets;
  return sets;
}
inline std::span<const WorkloadBenchmarks> workload_benchmarks() {
  return workload_benchmark_sets();
}

// Adds a set; returns true, for a static initializer.
inline bool add_workload_benchmarks(WorkloadBenchmarks add) {
  workload_benchmark_sets().push_back(add);
  return true;
}

}  // namespace rpa::bench
