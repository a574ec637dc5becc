// rpa bench on tpu-inference v3's kernel.py (cli/bench_measure.h): a v3 workload's subject,
// timed against its jax twin, the timing that DialectCommands::bench_workload holds for the
// tpu_inference_v3 dialect.
#pragma once

#include "cli/bench_measure.h"
#include "harness/v3_workload.h"
#include "harness/workloads.h"

namespace rpa {

// Builds spec's jax workload and its v3 twin (throws std::logic_error if strict validation
// rejects either), measures the v3 one (its rows to out.rows), then times it against the jax
// one in alternation on each thread count of the sweep (2 * kernel_runs + 1 rounds; the pairs
// to out.pairs).
void bench_v3_workload(const bench::WorkloadSpec& spec, const BenchStep& step, BenchResults& out);

}  // namespace rpa
