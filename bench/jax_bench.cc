// The benchmarks over the named workloads in JAX's dialect (bench/workload_benchmarks.h):
// the tiled kernel on 1 and 2 threads and the dense reference, each workload in float32 and
// bfloat16, with useful GFLOP/s and effective KV GB/s as counters.
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/workload_benchmarks.h"
#include "harness/jax_workload.h"
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

// Every workload, built (and strictly validated) before any benchmark is registered; they
// live until the process ends, as the benchmarks that point at them.
void add_jax_workload_benchmarks() {
  static std::vector<std::unique_ptr<Workload>> workloads;
  for (const rpa::bench::WorkloadSpec& spec : rpa::bench::all_workload_specs()) {
    workloads.push_back(std::make_unique<Workload>(rpa::bench::build_workload(spec)));
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
}

[[maybe_unused]] const bool kAdded =
    rpa::bench::add_workload_benchmarks(add_jax_workload_benchmarks);

}  // namespace
