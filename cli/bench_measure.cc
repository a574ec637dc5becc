// rpa bench's measurement of a subject (cli/bench_measure.h): the reference's runs within the
// preset's budget, the kernel's warm-up check and timed runs per thread count, and two
// dialects' kernels in alternation.
#include "cli/bench_measure.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace rpa {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU seconds this process has used, every thread together.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

// One workload: the reference (timed, and the answer every thread count's output is
// checked against), then the kernel on each thread count of the sweep.
std::vector<Row> measure(const Subject& sb, const Preset& preset, const std::vector<int>& sweep,
                         int index, int total) {
  using Clock = std::chrono::steady_clock;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on the inlined
  // chain of operator+ here.
  std::string tag = "[";
  tag.append(std::to_string(index)).append("/").append(std::to_string(total)).append("] ");
  tag.append(sb.label);
  std::vector<double> ref_s;
  while (static_cast<int>(ref_s.size()) < preset.reference_runs) {
    double spent = 0;
    for (double s : ref_s) spent += s;
    if (!ref_s.empty() && spent + ref_s.front() > preset.reference_budget_s) break;
    std::fprintf(stderr, "rpa bench: %s: reference run %zu\n", tag.c_str(), ref_s.size() + 1);
    const auto t0 = Clock::now();
    sb.reference();
    ref_s.push_back(seconds(Clock::now() - t0));
  }

  std::vector<Row> rows;
  for (const int threads : sweep) {
    Row row = sb.facts;
    row.threads = threads;
    row.reference_runs = static_cast<int>(ref_s.size());
    row.reference_first_s = ref_s.front();
    row.reference_ms = median(ref_s) * 1e3;

    // Warm-up call, whose output is also the one checked against the reference.
    std::fprintf(stderr, "rpa bench: %s: kernel warm-up on %d threads\n", tag.c_str(), threads);
    const std::string mismatch = sb.check(threads, row);
    if (!row.agree) {
      std::fprintf(stderr,
                   "rpa bench: ERROR: %s on %d threads: THE KERNEL DISAGREES WITH THE REFERENCE: "
                   "%s\n",
                   sb.label.c_str(), threads, mismatch.c_str());
    }
    std::fprintf(stderr, "rpa bench: %s: kernel, %d timed runs on %d threads\n", tag.c_str(),
                 preset.kernel_runs, threads);
    std::vector<double> kernel_s, kernel_cpu_s;
    for (int i = 0; i < preset.kernel_runs; ++i) {
      const double c0 = process_cpu_seconds();
      const auto t0 = Clock::now();
      sb.kernel(threads);
      kernel_s.push_back(seconds(Clock::now() - t0));
      kernel_cpu_s.push_back(process_cpu_seconds() - c0);
    }
    row.kernel_runs = preset.kernel_runs;
    row.kernel_ms = median(kernel_s) * 1e3;
    row.kernel_cpu_ms = median(kernel_cpu_s) * 1e3;
    std::fprintf(stderr, "rpa bench: %s: kernel %.3f ms on %d threads, reference %.1f ms, %s\n",
                 tag.c_str(), row.kernel_ms, threads, row.reference_ms,
                 row.agree ? "agree" : "MISMATCH");
    rows.push_back(std::move(row));
  }
  return rows;
}

PairRow measure_pair(const Subject& jax, const Subject& v3, int threads, int rounds) {
  using Clock = std::chrono::steady_clock;
  const auto timed = [threads](const Subject& sb) {
    const auto t0 = Clock::now();
    sb.kernel(threads);
    return seconds(Clock::now() - t0);
  };
  std::fprintf(stderr, "rpa bench: %s vs %s: %d alternating rounds on %d threads\n",
               jax.label.c_str(), v3.label.c_str(), rounds, threads);
  std::vector<double> ratios;
  for (int i = 0; i < rounds; ++i) {
    double tj = 0, tv = 0;
    if (i % 2 == 0) {
      tj = timed(jax);
      tv = timed(v3);
    } else {
      tv = timed(v3);
      tj = timed(jax);
    }
    ratios.push_back(tj / tv);
  }
  return {jax.facts.workload, jax.facts.dtype, threads, rounds,
          quantile(ratios, 0.25), quantile(ratios, 0.5), quantile(ratios, 0.75)};
}

}  // namespace rpa
