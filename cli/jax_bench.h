// rpa bench on JAX's dialect (cli/bench_measure.h): a jax workload's subject, and the timing
// of one workload that DialectCommands::bench_workload holds for the dialect.
#pragma once

#include "cli/bench_measure.h"
#include "harness/jax_workload.h"
#include "harness/workloads.h"

namespace rpa {

// The workload's dense reference and tiled kernel, checked at the jax call's tolerance
// (oracle/jax_tolerance.h); the TPU grid and blocks of its kernel plan. It refers to w, which
// must outlive it.
Subject jax_subject(const bench::Workload& w);

// Builds spec's workload (throws std::logic_error if strict validation rejects it) and
// measures it: its rows go to out.rows.
void bench_jax_workload(const bench::WorkloadSpec& spec, const BenchStep& step, BenchResults& out);

}  // namespace rpa
