// rpa bench: the tiled kernel on the named workloads (DESIGN.md section 11), against the
// dense reference and against this machine's limits measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "bench/workloads.h"
#include "kernel/paged_kv_view.h"
#include "kernel/python_repr.h"
#include "kernel/tiled_kernel.h"
#include "oracle/cli_args.h"
#include "oracle/commands.h"
#include "oracle/compare.h"
#include "oracle/exit_codes.h"
#include "oracle/json_writer.h"
#include "oracle/tolerance.h"
#include "reference/dense_reference.h"

namespace rpa {
namespace {

// The kernel runs on both cores of the machine the numbers are meant for; the limits are
// measured with as many threads.
constexpr int kThreads = 2;

struct Preset {
  std::string name;
  std::vector<std::string> workloads;
  int kernel_runs;     // timed kernel calls; the median is reported
  int reference_runs;  // timed reference calls at most ...
  double reference_budget_s;  // ... and no more once their total time passes this
};

std::optional<Preset> find_preset(std::string_view name) {
  if (name == "quick") return Preset{"quick", {"decode", "prefill", "mixed"}, 5, 3, 3.0};
  for (std::string_view w : bench::workload_names()) {
    if (name == w) return Preset{std::string(w), {std::string(w)}, 21, 5, 15.0};
  }
  return std::nullopt;
}

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

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

struct Row {
  std::string workload, dtype;
  double flops = 0, kv_bytes = 0;
  int64_t grid_heads = 0, grid_q = 0, bkv = 0, bq = 0;
  double kernel_ms = 0;
  double kernel_cpu_ms = 0;  // process CPU time per call (all threads), median
  int kernel_runs = 0;
  double reference_ms = 0;
  int reference_runs = 0;
  double reference_first_s = 0;
  Comparison cmp;
};

Row measure(const bench::Workload& w, const Preset& preset, int index, int total) {
  using Clock = std::chrono::steady_clock;
  const std::string tag = "[" + std::to_string(index) + "/" + std::to_string(total) + "] " + w.label();
  Row row;
  row.workload = w.spec.name;
  row.dtype = dtype_name(w.spec.dtype);
  row.flops = bench::useful_flops(w.inputs);
  row.kv_bytes = bench::effective_kv_bytes(w.inputs);
  const KernelOptions options{.threads = kThreads};
  const KernelPlan plan = plan_kernel(w.inputs, w.params, options.target);
  row.grid_heads = plan.num_heads_blks;
  row.grid_q = plan.num_q_blks;
  row.bkv = plan.blocks.kv_pages_per_block;
  row.bq = plan.blocks.queries_per_block;

  // Warm-up call, whose output is also the one checked against the reference.
  std::fprintf(stderr, "rpa bench: %s: kernel warm-up\n", tag.c_str());
  const Tensor kernel_out = tiled_attention(w.inputs, w.params, options);

  std::vector<double> ref_s;
  std::optional<ReferenceResult> ref;
  while (static_cast<int>(ref_s.size()) < preset.reference_runs) {
    double spent = 0;
    for (double s : ref_s) spent += s;
    if (!ref_s.empty() && spent + ref_s.front() > preset.reference_budget_s) break;
    std::fprintf(stderr, "rpa bench: %s: reference run %zu\n", tag.c_str(), ref_s.size() + 1);
    const auto t0 = Clock::now();
    ReferenceResult r = dense_reference(w.inputs, w.params);
    ref_s.push_back(seconds(Clock::now() - t0));
    if (!ref) ref = std::move(r);
  }
  row.reference_runs = static_cast<int>(ref_s.size());
  row.reference_first_s = ref_s.front();
  row.reference_ms = median(ref_s) * 1e3;

  const Tolerance tol = tolerance_for_case(w.inputs, w.params, *ref);
  row.cmp = compare_outputs(kernel_out, ref->out, PagedKvView(w.inputs), tol);
  if (!row.cmp.agree()) {
    std::fprintf(stderr,
                 "rpa bench: ERROR: %s: THE KERNEL DISAGREES WITH THE REFERENCE: %s "
                 "(atol %s, rtol %s)\n",
                 w.label().c_str(), describe_mismatch(row.cmp).c_str(),
                 py_float_repr(tol.atol).c_str(), py_float_repr(tol.rtol).c_str());
  }

  std::fprintf(stderr, "rpa bench: %s: kernel, %d timed runs on %d threads\n", tag.c_str(),
               preset.kernel_runs, kThreads);
  std::vector<double> kernel_s, kernel_cpu_s;
  for (int i = 0; i < preset.kernel_runs; ++i) {
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    const Tensor out = tiled_attention(w.inputs, w.params, options);
    kernel_s.push_back(seconds(Clock::now() - t0));
    kernel_cpu_s.push_back(process_cpu_seconds() - c0);
  }
  row.kernel_runs = preset.kernel_runs;
  row.kernel_ms = median(kernel_s) * 1e3;
  row.kernel_cpu_ms = median(kernel_cpu_s) * 1e3;
  std::fprintf(stderr, "rpa bench: %s: kernel %.3f ms, reference %.1f ms, %s\n", tag.c_str(),
               row.kernel_ms, row.reference_ms, row.cmp.agree() ? "agree" : "MISMATCH");
  return row;
}

void print_table(const std::vector<Row>& rows, const bench::TriadResult& triad,
                 const bench::GemmResult& gemm) {
  std::printf("%-8s %-8s %10s %8s %8s %6s %8s %7s %11s %9s  %s\n", "workload", "dtype",
              "kernel ms", "(cpu ms)", "GFLOP/s", "%GEMM", "GB/s", "%triad", "ref ms",
              "speed-up", "check");
  for (const Row& r : rows) {
    const double kernel_s = r.kernel_ms * 1e-3;
    const double gflops = r.flops / kernel_s / 1e9;
    const double gbps = r.kv_bytes / kernel_s / 1e9;
    const std::string ref_ms =
        fixed(r.reference_ms, 1) + (r.reference_runs == 1 ? "*" : "");
    std::printf("%-8s %-8s %10.3f %8.1f %8.2f %5.1f%% %8.2f %6.1f%% %11s %8.1fx  %s\n",
                r.workload.c_str(), r.dtype.c_str(), r.kernel_ms, r.kernel_cpu_ms, gflops,
                100.0 * gflops / gemm.gflop_per_s, gbps, 100.0 * gbps / triad.gb_per_s,
                ref_ms.c_str(), r.reference_ms / r.kernel_ms,
                r.cmp.agree() ? "agree" : "MISMATCH");
  }
  std::printf("\n");
  for (const Row& r : rows) {
    const std::string ref_runs =
        r.reference_runs == 1
            ? "1 run (* one call took " + fixed(r.reference_first_s, 2) + " s, so it ran once)"
            : std::to_string(r.reference_runs) + " runs";
    std::printf("  %s/%s: kernel median of %d runs on %d threads (grid %lldx%lld, bkv %lld pages, "
                "bq %lld); reference median of %s; %.3f useful GFLOP, %.2f MB of KV\n",
                r.workload.c_str(), r.dtype.c_str(), r.kernel_runs, kThreads,
                static_cast<long long>(r.grid_heads), static_cast<long long>(r.grid_q),
                static_cast<long long>(r.bkv), static_cast<long long>(r.bq), ref_runs.c_str(),
                r.flops / 1e9, r.kv_bytes / 1e6);
  }
  std::printf(
      "\nkernel ms: wall time (what GFLOP/s and GB/s use); cpu ms: CPU time of all threads.\n"
      "GFLOP/s: 4 * Hq * D per attended (query, key) pair; GB/s: K and V bytes the "
      "definition needs (kv_len * 2 * Hkv * D * kv_bytes per sequence), each read once.\n");
}

void print_json(const std::vector<Row>& rows, const Preset& preset, const std::string& date,
                const std::string& load, const bench::TriadResult& triad, const bench::GemmResult& gemm) {
  JsonWriter j;
  j.begin_object();
  j.key("preset").value(preset.name).key("date").value(date);
  j.key("cpu").value(bench::cpu_model_name()).key("threads").value(kThreads);
  j.key("load_average").value(load);
  j.key("machine").begin_object();
  j.key("triad_gb_per_s").value(triad.gb_per_s);
  j.key("triad_bytes_per_sweep").value(triad.bytes_per_sweep);
  j.key("gemm_gflop_per_s").value(gemm.gflop_per_s);
  j.key("gemm_n").value(gemm.n);
  j.key("gemm_simd").value(gemm.simd);
  j.end_object();
  bool all_agree = true;
  j.key("results").begin_array();
  for (const Row& r : rows) {
    const double kernel_s = r.kernel_ms * 1e-3;
    const double gflops = r.flops / kernel_s / 1e9;
    const double gbps = r.kv_bytes / kernel_s / 1e9;
    all_agree = all_agree && r.cmp.agree();
    j.begin_object();
    j.key("workload").value(r.workload).key("dtype").value(r.dtype);
    j.key("useful_flops").value(r.flops).key("kv_bytes").value(r.kv_bytes);
    j.key("grid").begin_array().value(r.grid_heads).value(r.grid_q).end_array();
    j.key("kv_pages_per_block").value(r.bkv).key("queries_per_block").value(r.bq);
    j.key("kernel_ms").value(r.kernel_ms).key("kernel_cpu_ms").value(r.kernel_cpu_ms);
    j.key("kernel_runs").value(r.kernel_runs);
    j.key("gflop_per_s").value(gflops).key("pct_gemm").value(100.0 * gflops / gemm.gflop_per_s);
    j.key("gb_per_s").value(gbps).key("pct_triad").value(100.0 * gbps / triad.gb_per_s);
    j.key("reference_ms").value(r.reference_ms).key("reference_runs").value(r.reference_runs);
    j.key("speedup").value(r.reference_ms / r.kernel_ms);
    j.key("agree").value(r.cmp.agree());
    j.key("max_abs_err").value(r.cmp.max_abs_err);
    j.key("atol").value(r.cmp.tol.atol).key("rtol").value(r.cmp.tol.rtol);
    j.end_object();
  }
  j.end_array();
  j.key("all_agree").value(all_agree);
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

int bench_command(const std::vector<std::string_view>& args) {
  std::string preset_name = "quick";
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json = true;
    } else if (args[i] == "--preset") {
      if (i + 1 >= args.size()) return usage_error("--preset needs a value");
      preset_name = args[++i];
    } else {
      return usage_error("bench: unexpected argument '" + std::string(args[i]) + "'");
    }
  }
  const std::optional<Preset> preset = find_preset(preset_name);
  if (!preset) return usage_error("--preset takes quick, decode, prefill or mixed");

  const std::string date = bench::now_string();
  const std::string load_before = bench::load_average();
  // More runnable work than cores: the measurement shares them and wall times stretch.
  const bool busy = std::atof(load_before.c_str()) > 1.5;
  if (busy) {
    std::fprintf(stderr,
                 "rpa bench: warning: load average %s: other processes compete for the cores, "
                 "so wall times (and the limits) will be off\n",
                 load_before.c_str());
  }
  std::fprintf(stderr, "rpa bench: measuring memory bandwidth (triad, %d threads)\n", kThreads);
  const bench::TriadResult triad = bench::measure_triad(int64_t{48} << 20, kThreads, 10);
  std::fprintf(stderr, "rpa bench: triad %.2f GB/s; measuring float32 GEMM (%d threads)\n",
               triad.gb_per_s, kThreads);
  const bench::GemmResult gemm = bench::measure_gemm(2048, kThreads, 5);
  std::fprintf(stderr, "rpa bench: GEMM %.2f GFLOP/s\n", gemm.gflop_per_s);

  std::vector<Row> rows;
  const int total = static_cast<int>(preset->workloads.size()) * 2;
  for (const std::string& name : preset->workloads) {
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      const bench::WorkloadSpec spec = bench::workload_spec(name, t);
      std::fprintf(stderr, "rpa bench: [%zu/%d] %s/%s: building\n", rows.size() + 1, total,
                   name.c_str(), std::string(dtype_name(t)).c_str());
      const bench::Workload w = bench::build_workload(spec);  // throws if strict rejects
      rows.push_back(measure(w, *preset, static_cast<int>(rows.size()) + 1, total));
    }
  }

  const std::string load = load_before + " at start, " + bench::load_average() + " at end";
  if (json) {
    print_json(rows, *preset, date, load, triad, gemm);
  } else {
    std::printf("rpa bench --preset %s: %s, %s, kernel on %d threads; load average %s\n",
                preset->name.c_str(), date.c_str(), bench::cpu_model_name().c_str(), kThreads,
                load.c_str());
    std::printf(
        "machine limits: triad %.2f GB/s (a = b + s*c over 3 x %lld MiB of float, %d threads, "
        "best of 10; 3 arrays counted, write-allocate not); GEMM %.2f GFLOP/s (Eigen float32 "
        "%lld^3, columns split over %d threads, best of 5; Eigen SIMD: %s, this build's "
        "flags)\n\n",
        triad.gb_per_s, static_cast<long long>(triad.bytes_per_sweep / 3 >> 20), triad.threads,
        gemm.gflop_per_s, static_cast<long long>(gemm.n), gemm.threads, gemm.simd.c_str());
    if (busy) {
      std::printf("WARNING: the machine was busy (load average %s at start): wall times are "
                  "inflated; compare cpu ms.\n\n",
                  load_before.c_str());
    }
    print_table(rows, triad, gemm);
  }
  const bool all_agree =
      std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.cmp.agree(); });
  if (!all_agree) {
    std::fprintf(stderr, "rpa bench: ERROR: the kernel disagreed with the reference (see above)\n");
  }
  return all_agree ? kExitOk : kExitMismatch;
}

}  // namespace rpa
