// rpa bench: the tiled kernel on the named workloads (DESIGN.md section 11), against the
// dense reference and against this machine's limits measured in the same run. Each workload
// is timed by its dialect's entry (DialectCommands::bench_workload, cli/bench_measure.h).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness/workloads.h"
#include "cli/bench_measure.h"
#include "cli/bench_production.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/dialect_commands.h"
#include "cli/exit_codes.h"
#include "core/dialect.h"
#include "core/dtype.h"
#include "service/json_writer.h"
#include "service/number_text.h"

namespace rpa {
namespace {

// This machine's limits on `threads` threads, measured in the same run as the kernel.
struct Limits {
  int threads = 0;
  bench::TriadResult triad;
  bench::GemmResult gemm;
};

// The roofline bound of a workload on a machine: the longer of its useful flops at the
// GEMM peak and its KV bytes at the triad bandwidth. For decode that is the bandwidth, for
// prefill the GEMM peak, for the mix whichever its mix makes binding.
struct Roofline {
  double seconds;
  const char* bound;  // "memory" or "compute"
};
Roofline roofline(double flops, double kv_bytes, const Limits& m) {
  const double compute_s = flops / (m.gemm.gflop_per_s * 1e9);
  const double memory_s = kv_bytes / (m.triad.gb_per_s * 1e9);
  return memory_s >= compute_s ? Roofline{memory_s, "memory"} : Roofline{compute_s, "compute"};
}

int hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

std::optional<Preset> find_preset(std::string_view name) {
  if (name == "quick") return Preset{"quick", {"decode", "prefill", "mixed"}, 5, 3, 3.0};
  // The two dialects on the same shapes and data, one after the other in one run, so that
  // their %limit can be compared (DESIGN.md section 16).
  // Each v3 workload is also timed against its jax twin in alternation (measure_pair).
  if (name == "v3") return Preset{"v3", {"decode", "v3-decode", "mixed", "v3-mixed"}, 21, 5, 15.0};
  if (name == "v3-decode") return Preset{"v3-decode", {"decode", "v3-decode"}, 21, 5, 15.0};
  for (std::string_view w : bench::workload_names()) {
    if (name == w) return Preset{std::string(w), {std::string(w)}, 21, 5, 15.0};
  }
  return std::nullopt;
}

// The dialect that times a preset's workload: of those rpa bench times, the one whose
// bench_prefix is the longest that `name` starts with ("v3-decode": tpu_inference_v3,
// "decode": jax).
const DialectCommands& bench_dialect(std::string_view name) {
  const DialectCommands* found = nullptr;
  for (const Dialect d : kDialects) {
    const DialectCommands& c = dialect_commands(d);
    if (c.bench_workload == nullptr || !name.starts_with(c.bench_prefix)) continue;
    if (found == nullptr || c.bench_prefix.size() > found->bench_prefix.size()) found = &c;
  }
  if (found == nullptr) {
    throw std::logic_error("bench: no dialect times workload '" + std::string(name) + "'");
  }
  return *found;
}

const Limits& limits_for(const std::vector<Limits>& limits, int threads) {
  for (const Limits& m : limits) {
    if (m.threads == threads) return m;
  }
  throw std::logic_error("bench: no limits measured for " + std::to_string(threads) + " threads");
}

// A row's rates against the limits measured on its thread count: what the table and the JSON
// both print.
struct RowRates {
  double gflops, pct_gemm, gbps, pct_triad, pct_limit;
  Roofline roof;
};

RowRates row_rates(const Row& r, const std::vector<Limits>& limits) {
  const Limits& m = limits_for(limits, r.threads);
  const double kernel_s = r.kernel_ms * 1e-3;
  const double gflops = r.flops / kernel_s / 1e9;
  const double gbps = r.kv_bytes / kernel_s / 1e9;
  const Roofline roof = roofline(r.flops, r.kv_bytes, m);
  return {gflops, 100.0 * gflops / m.gemm.gflop_per_s, gbps, 100.0 * gbps / m.triad.gb_per_s,
          100.0 * roof.seconds / kernel_s, roof};
}

void print_table(const std::vector<Row>& rows, const std::vector<Limits>& limits) {
  std::printf("%-9s %-8s %3s %10s %8s %8s %6s %8s %7s %8s %11s %9s  %s\n", "workload", "dtype",
              "thr", "kernel ms", "(cpu ms)", "GFLOP/s", "%GEMM", "GB/s", "%triad", "%limit",
              "ref ms", "speed-up", "check");
  for (const Row& r : rows) {
    const RowRates q = row_rates(r, limits);
    const std::string ref_ms =
        fixed(r.reference_ms, 1) + (r.reference_runs == 1 ? "*" : "");
    std::printf("%-9s %-8s %3d %10.3f %8.1f %8.2f %5.1f%% %8.2f %6.1f%% %6.1f%%%c %11s %8.1fx  %s\n",
                r.workload.c_str(), r.dtype.c_str(), r.threads, r.kernel_ms, r.kernel_cpu_ms,
                q.gflops, q.pct_gemm, q.gbps, q.pct_triad, q.pct_limit,
                q.roof.bound[0] == 'm' ? 'm' : 'c', ref_ms.c_str(), r.reference_ms / r.kernel_ms,
                r.agree ? "agree" : "MISMATCH");
  }
  std::printf("\n");
  for (const Row& r : rows) {
    if (r.threads != rows.front().threads) continue;  // the same workload facts per sweep
    const std::string ref_runs =
        r.reference_runs == 1
            ? "1 run (* one call took " + fixed(r.reference_first_s, 2) + " s, so it ran once)"
            : std::to_string(r.reference_runs) + " runs";
    const std::string blocks =
        r.dialect == "jax"
            ? "TPU grid " + std::to_string(r.grid_heads) + "x" + std::to_string(r.grid_q) + ", bkv " +
                  std::to_string(r.bkv) + " pages, bq " + std::to_string(r.bq)
            : r.dialect + ", packed cache, bkv " + std::to_string(r.bkv) + " pages per step";
    std::printf("  %s/%s: kernel median of %d runs per thread count (%s); reference median of %s; "
                "%.3f useful GFLOP, %.2f MB of KV\n",
                r.workload.c_str(), r.dtype.c_str(), r.kernel_runs, blocks.c_str(), ref_runs.c_str(),
                r.flops / 1e9, r.kv_bytes / 1e6);
  }
  std::printf(
      "\nthr: kernel threads (the limits are measured on as many). kernel ms: wall time (what "
      "GFLOP/s and GB/s use); cpu ms: CPU time of all threads.\n"
      "GFLOP/s: 4 * Hq * D per attended (query, key) pair; GB/s: K and V bytes the "
      "definition needs (kv_len * 2 * Hkv * D * kv_bytes per sequence), each read once.\n"
      "%%limit: the roofline bound (the longer of the useful flops at the GEMM peak and the KV "
      "bytes at the triad bandwidth; m: memory-bound, c: compute-bound) over the kernel time.\n");
}

void print_pairs(const std::vector<PairRow>& pairs) {
  if (pairs.empty()) return;
  std::printf("\nv3 / jax %%limit, paired (each round one call of each dialect, alternating "
              "which goes first; the jax call's time over the v3 call's):\n");
  for (const PairRow& p : pairs) {
    std::printf("  %s/%s on %d thread%s: median %.3f (quartiles %.3f-%.3f) over %d rounds\n",
                p.workload.c_str(), p.dtype.c_str(), p.threads, p.threads == 1 ? "" : "s",
                p.median, p.p25, p.p75, p.rounds);
  }
}

void print_json(const std::vector<Row>& rows, const std::vector<PairRow>& pairs,
                const Preset& preset, const std::string& date, const std::string& load,
                const std::vector<Limits>& limits) {
  JsonWriter j;
  j.begin_object();
  j.key("preset").value(preset.name).key("date").value(date);
  j.key("cpu").value(bench::cpu_model_name()).key("cores").value(hardware_threads());
  j.key("load_average").value(load);
  j.key("simd").value(limits.front().gemm.simd);
  j.key("limits").begin_array();
  for (const Limits& m : limits) {
    j.begin_object();
    j.key("threads").value(m.threads);
    j.key("triad_gb_per_s").value(m.triad.gb_per_s);
    j.key("triad_bytes_per_sweep").value(m.triad.bytes_per_sweep);
    j.key("gemm_gflop_per_s").value(m.gemm.gflop_per_s);
    j.key("gemm_n").value(m.gemm.n);
    j.end_object();
  }
  j.end_array();
  bool all_agree = true;
  j.key("results").begin_array();
  for (const Row& r : rows) {
    const RowRates q = row_rates(r, limits);
    all_agree = all_agree && r.agree;
    j.begin_object();
    j.key("workload").value(r.workload).key("dialect").value(r.dialect).key("dtype").value(r.dtype);
    j.key("threads").value(r.threads);
    j.key("useful_flops").value(r.flops).key("kv_bytes").value(r.kv_bytes);
    j.key("grid").begin_array().value(r.grid_heads).value(r.grid_q).end_array();
    j.key("kv_pages_per_block").value(r.bkv).key("queries_per_block").value(r.bq);
    j.key("kernel_ms").value(r.kernel_ms).key("kernel_cpu_ms").value(r.kernel_cpu_ms);
    j.key("kernel_runs").value(r.kernel_runs);
    j.key("gflop_per_s").value(q.gflops).key("pct_gemm").value(q.pct_gemm);
    j.key("gb_per_s").value(q.gbps).key("pct_triad").value(q.pct_triad);
    j.key("bound").value(q.roof.bound).key("pct_limit").value(q.pct_limit);
    j.key("reference_ms").value(r.reference_ms).key("reference_runs").value(r.reference_runs);
    j.key("speedup").value(r.reference_ms / r.kernel_ms);
    j.key("agree").value(r.agree);
    j.key("max_abs_err").value(r.max_abs_err);
    j.key("atol").value(r.atol).key("rtol").value(r.rtol);
    j.end_object();
  }
  j.end_array();
  j.key("v3_over_jax_pct_limit").begin_array();
  for (const PairRow& p : pairs) {
    j.begin_object();
    j.key("workload").value(p.workload).key("dtype").value(p.dtype).key("threads").value(p.threads);
    j.key("rounds").value(p.rounds).key("median").value(p.median);
    j.key("p25").value(p.p25).key("p75").value(p.p75);
    j.end_object();
  }
  j.end_array();
  j.key("all_agree").value(all_agree);
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

// --threads: a comma-separated list of positive counts and "all" (every core), in order,
// repeats dropped. nullopt on anything else.
std::optional<std::vector<int>> parse_thread_sweep(std::string_view text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    int n = 0;
    if (item == "all") {
      n = hardware_threads();
    } else {
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
      if (ec != std::errc{} || end != item.data() + item.size() || n < 1 || n > 4096) return std::nullopt;
    }
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int bench_command(const std::vector<std::string_view>& args) {
  std::string preset_name = "quick";
  std::string threads_arg = "1,2,all";
  bool json = false;
  bool threads_given = false;
  std::optional<int> runs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json = true;
    } else if (args[i] == "--runs") {
      if (i + 1 >= args.size()) return usage_error("--runs needs a value");
      int n = 0;
      const std::string_view v = args[++i];
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc{} || end != v.data() + v.size() || n < 1 || n > 1000) {
        return usage_error("--runs takes a count of timed kernel calls from 1 to 1000, got '" +
                           std::string(v) + "'");
      }
      runs = n;
    } else if (args[i] == "--preset" || args[i] == "--threads") {
      if (i + 1 >= args.size()) return usage_error(std::string(args[i]) + " needs a value");
      (args[i] == "--preset" ? preset_name : threads_arg) = args[i + 1];
      threads_given = threads_given || args[i] == "--threads";
      ++i;
    } else {
      return usage_error("bench: unexpected argument '" + std::string(args[i]) + "'");
    }
  }
  const std::optional<std::vector<int>> sweep = parse_thread_sweep(threads_arg);
  if (!sweep) {
    return usage_error("--threads takes a comma-separated list of thread counts (1 to 4096) and "
                       "'all', e.g. 1,2,all; got '" + threads_arg + "'");
  }
  if (is_production_preset(preset_name)) {
    if (runs) return usage_error("--runs does not apply to --preset production (each stage runs once)");
    // One thread count for the tiled kernel (default: every core); each stage runs once.
    if (!threads_given) return bench_production(preset_name, 0, json);
    if (sweep->size() != 1) {
      return usage_error("--preset production takes one thread count, got '" + threads_arg + "'");
    }
    return bench_production(preset_name, sweep->front(), json);
  }
  std::optional<Preset> preset = find_preset(preset_name);
  if (!preset) {
    return usage_error("--preset takes quick, decode, prefill, mixed, v3, v3-decode, production "
                       "or production:NAME");
  }
  if (runs) {
    // Fewer timed calls (a quick look, or a sanitizer build where each call is slow): the
    // kernel's runs, the reference's at most as many, the alternating rounds 2 runs + 1.
    preset->kernel_runs = *runs;
    preset->reference_runs = std::min(preset->reference_runs, *runs);
  }

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
  std::vector<Limits> limits;
  for (const int threads : *sweep) {
    Limits m;
    m.threads = threads;
    std::fprintf(stderr, "rpa bench: measuring memory bandwidth (triad, %d threads)\n", threads);
    m.triad = bench::measure_triad(int64_t{48} << 20, threads, 10);
    std::fprintf(stderr, "rpa bench: triad %.2f GB/s; measuring float32 GEMM (%d threads)\n",
                 m.triad.gb_per_s, threads);
    m.gemm = bench::measure_gemm(2048, threads, 5);
    std::fprintf(stderr, "rpa bench: GEMM %.2f GFLOP/s\n", m.gemm.gflop_per_s);
    limits.push_back(m);
  }

  BenchResults results;
  const int total = static_cast<int>(preset->workloads.size()) * 2;
  int index = 0;
  for (const std::string& name : preset->workloads) {
    // "v3-NAME": NAME's shapes and data in tpu-inference v3's dialect.
    const DialectCommands& commands = bench_dialect(name);
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      const bench::WorkloadSpec spec =
          bench::workload_spec(name.substr(commands.bench_prefix.size()), t);
      ++index;
      std::fprintf(stderr, "rpa bench: [%d/%d] %s/%s: building\n", index, total, name.c_str(),
                   std::string(dtype_name(t)).c_str());
      commands.bench_workload(spec, BenchStep{*preset, *sweep, index, total}, results);
    }
  }
  const std::vector<Row>& rows = results.rows;
  const std::vector<PairRow>& pairs = results.pairs;

  const std::string load = load_before + " at start, " + bench::load_average() + " at end";
  if (json) {
    print_json(rows, pairs, *preset, date, load, limits);
  } else {
    std::printf("rpa bench --preset %s: %s, %s (%d cores), kernel on %s threads; load average "
                "%s\n",
                preset->name.c_str(), date.c_str(), bench::cpu_model_name().c_str(),
                hardware_threads(), threads_arg.c_str(), load.c_str());
    for (const Limits& m : limits) {
      std::printf(
          "machine limits on %d thread%s: triad %.2f GB/s (a = b + s*c over 3 x %lld MiB of "
          "float, best of 10; 3 arrays counted, write-allocate not); GEMM %.2f GFLOP/s (Eigen "
          "float32 %lld^3, columns split over the threads, best of 5)\n",
          m.threads, m.threads == 1 ? "" : "s", m.triad.gb_per_s,
          static_cast<long long>(m.triad.bytes_per_sweep / 3 >> 20), m.gemm.gflop_per_s,
          static_cast<long long>(m.gemm.n));
    }
    std::printf("Eigen SIMD: %s, this build's flags\n\n", limits.front().gemm.simd.c_str());
    if (busy) {
      std::printf("WARNING: the machine was busy (load average %s at start): wall times are "
                  "inflated; compare cpu ms.\n\n",
                  load_before.c_str());
    }
    print_table(rows, limits);
    print_pairs(pairs);
  }
  const bool all_agree =
      std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.agree; });
  if (!all_agree) {
    std::fprintf(stderr, "rpa bench: ERROR: the kernel disagreed with the reference (see above)\n");
  }
  return all_agree ? kExitOk : kExitMismatch;
}

}  // namespace rpa
