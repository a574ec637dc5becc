// What rpa bench measures of a workload, whatever its dialect (cli/bench_command.cc): the
// preset's runs, a subject (the reference and the kernel of one workload in one dialect, and
// the check of one against the other), the rows it yields per thread count, and the pairs of
// two dialects timed in alternation. Each dialect builds its subjects (cli/jax_bench.h,
// cli/v3_bench.h) and reaches rpa bench through DialectCommands::bench_workload
// (cli/dialect_commands.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rpa {

// A preset: the workloads it times, in order, and how many calls of each.
struct Preset {
  std::string name;
  std::vector<std::string> workloads;
  int kernel_runs;     // timed kernel calls; the median is reported
  int reference_runs;  // timed reference calls at most ...
  double reference_budget_s;  // ... and no more once their total time passes this
};

struct Row {
  std::string workload, dtype;
  std::string dialect = "jax";
  int threads = 0;
  double flops = 0, kv_bytes = 0;
  int64_t grid_heads = 0, grid_q = 0, bkv = 0, bq = 0;
  double kernel_ms = 0;
  double kernel_cpu_ms = 0;  // process CPU time per call (all threads), median
  int kernel_runs = 0;
  double reference_ms = 0;
  int reference_runs = 0;
  double reference_first_s = 0;
  // The check of the warm-up call's output against the reference.
  bool agree = false;
  double max_abs_err = 0, atol = 0, rtol = 0;
};

// What measure() times, whatever the dialect: the reference (each call keeps its answer for
// check), the kernel on a thread count, and the warm-up output's check against the answer.
struct Subject {
  std::string label;  // "decode/float32", "v3-decode/bfloat16"
  Row facts;          // workload, dtype, dialect, flops, kv_bytes, grid and blocks
  std::function<void()> reference;
  std::function<void(int threads)> kernel;
  // Runs the kernel once on `threads` and checks it: fills row.agree, max_abs_err, atol, rtol;
  // returns the mismatch's description ("" when it agrees).
  std::function<std::string(int threads, Row& row)> check;
};

// The two dialects on one workload, timed in alternation: round i times one call of each (the
// order flipping every round), and its ratio is the jax call's time over the v3 call's, which
// is v3's %limit over jax's (the same flops and KV bytes, so the same roofline bound). Drift
// in the machine's speed (other processes, frequency) then reaches both calls of a round
// alike, where the medians of two separate runs can be 40% apart on this 2-core machine.
struct PairRow {
  std::string workload, dtype;
  int threads = 0, rounds = 0;
  double p25 = 0, median = 0, p75 = 0;  // of the rounds' ratios
};

// One workload's place in the run: the preset, the thread sweep, and its index of total (for
// the progress lines).
struct BenchStep {
  const Preset& preset;
  const std::vector<int>& sweep;
  int index = 0;
  int total = 0;
};

// What the run collects: a row per workload and thread count, and the alternating pairs.
struct BenchResults {
  std::vector<Row> rows;
  std::vector<PairRow> pairs;
};

// One workload: the reference (timed, and the answer every thread count's output is
// checked against), then the kernel on each thread count of the sweep.
std::vector<Row> measure(const Subject& sb, const Preset& preset, const std::vector<int>& sweep,
                         int index, int total);

// The two dialects' kernels on one workload in alternation, `rounds` rounds on `threads`
// (PairRow says how).
PairRow measure_pair(const Subject& jax, const Subject& v3, int threads, int rounds);

}  // namespace rpa
