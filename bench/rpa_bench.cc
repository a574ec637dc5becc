// Google Benchmark suite over the named workloads (DESIGN.md section 11): the tiled
// kernel on 1 and 2 threads and the dense reference, each workload in float32 and
// bfloat16, with useful GFLOP/s and effective KV GB/s as counters (each dialect's set:
// bench/workload_benchmarks.h, bench/jax_bench.cc). Every workload is built and strictly
// validated before anything runs.
//
//   build/bench/rpa_bench [--benchmark_filter=kernel/decode] [--benchmark_format=json]
//
// The reference gets a short minimum time (one iteration on prefill, where one call takes
// seconds), so the workloads run in about a minute on 2 cores. Then production/NAME: each
// fixed production-size call of harness/production_bench.h, built and run through every
// implementation once, its stages' seconds as counters (about three minutes in all;
// --benchmark_filter=-production leaves them out). Then fuzz_input/TARGET[/CLASS]: each
// fuzzer's body over its corpus, the per-input cost (bench/fuzz_inputs.h; the corpus is this
// checkout's corpus/, or RPA_CORPUS=DIR).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <benchmark/benchmark.h>

#include "bench/fuzz_inputs.h"
#include "bench/workload_benchmarks.h"
#include "harness/production_bench.h"

namespace {

// One production call per iteration (one iteration: a call takes seconds to a minute). The
// kernels must agree with the reference; a disagreement fails the benchmark.
void bm_production(benchmark::State& state, const rpa::bench::ProductionBenchCall* call) {
  for (auto _ : state) {
    const rpa::bench::ProductionTiming t = rpa::bench::time_production_call(*call, 0);
    for (const rpa::bench::ProductionStage& s : t.stages) {
      state.counters[s.name + " s"] = s.seconds;
      if (!s.agree) state.SkipWithError((s.name + " disagreed: " + s.mismatch).c_str());
    }
    state.SetLabel(std::to_string(t.num_seqs) + " seqs, kv_len up to " + std::to_string(t.max_kv_len));
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  // Built (and strictly validated) up front: a workload the validator rejects is a bug in
  // the builder and stops the run before any timing.
  try {
    for (const rpa::bench::WorkloadBenchmarks add : rpa::bench::workload_benchmarks()) add();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpa_bench: %s\n", e.what());
    return 1;
  }

  for (const rpa::bench::ProductionBenchCall& call : rpa::bench::production_bench_calls()) {
    const std::string name = "production/" + std::string(call.name);
    benchmark::RegisterBenchmark(name.c_str(), bm_production, &call)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kSecond);
  }
  const char* corpus = std::getenv("RPA_CORPUS");
  rpa::bench::register_fuzz_input_benchmarks(corpus != nullptr ? corpus : RPA_CORPUS_DIR);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
