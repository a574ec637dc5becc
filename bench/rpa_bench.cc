// Google Benchmark suite over the named workloads (DESIGN.md section 11): the tiled
// kernel on 1 and 2 threads and the dense reference, each workload in float32 and
// bfloat16, with useful GFLOP/s and effective KV GB/s as counters. Every workload is built
// and strictly validated before anything runs.
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
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/fuzz_inputs.h"
#include "harness/production_bench.h"
#include "harness/workloads.h"
#include "kernel/jax_kernel.h"
#include "reference/jax_reference.h"

namespace {

using rpa::bench::Workload;

void set_counters(benchmark::State& state, const Workload& w) {
  state.counters["GFLOP/s"] = benchmark::Counter(rpa::bench::useful_flops(w.inputs) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(rpa::bench::effective_kv_bytes(w.inputs) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void bm_kernel(benchmark::State& state, const Workload* w, int threads) {
  const rpa::KernelOptions options{.threads = threads};
  const rpa::KernelPlan plan = rpa::plan_kernel(w->inputs, w->params, options.target);
  for (auto _ : state) {
    rpa::Tensor out = rpa::tiled_attention(w->inputs, w->params, options);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, *w);
  state.SetLabel("grid " + std::to_string(plan.num_heads_blks) + "x" +
                 std::to_string(plan.num_q_blks) + ", bkv " +
                 std::to_string(plan.blocks.kv_pages_per_block) + " pages, bq " +
                 std::to_string(plan.blocks.queries_per_block));
}

void bm_reference(benchmark::State& state, const Workload* w) {
  for (auto _ : state) {
    rpa::ReferenceResult r = rpa::dense_reference(w->inputs, w->params);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, *w);
}

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
  std::vector<std::unique_ptr<Workload>> workloads;
  try {
    for (const rpa::bench::WorkloadSpec& spec : rpa::bench::all_workload_specs()) {
      workloads.push_back(std::make_unique<Workload>(rpa::bench::build_workload(spec)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpa_bench: %s\n", e.what());
    return 1;
  }

  for (const auto& w : workloads) {
    for (int threads : {1, 2}) {
      const std::string name = "kernel/" + w->label() + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), bm_kernel, w.get(), threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    const std::string name = "reference/" + w->label();
    auto* b = benchmark::RegisterBenchmark(name.c_str(), bm_reference, w.get())
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
    // One call on prefill takes seconds; elsewhere a short minimum time is plenty.
    if (w->spec.name == "prefill") {
      b->Iterations(1);
    } else {
      b->MinTime(0.2);
    }
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
