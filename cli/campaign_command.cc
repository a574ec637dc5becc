// rpa campaign: the main job. For a bounded time (--seconds) or number of cases (--cases) it
// draws cases from the property generators (valid ones, and ones with named mutations),
// checks both validation modes against the spec model and the tiled kernel against the dense
// reference, shows a live progress line, and ends with a summary (cli/campaign_summary.h;
// also written to --report as JSON, markdown, a page and the state rpa merge reads) whose
// findings each come with the command that replays them. --shard I/N takes only the case
// indices i % N == I, one job of a job array whose reports rpa merge combines. With
// --pallas N, N more generated cases of each dialect then go through the real kernels in TPU
// interpret mode (JAX's: python -m rpa.jax.cross_check --pallas; tpu-inference's v3: python
// -m rpa.jax.v3_cross_check --pallas), and the summary says whether that ran; with --ray
// ADDRESS those cases run as Ray tasks on that cluster (rpa._cluster). Which dialect case i
// is of is the campaign's mix, here; drawing and checking it is the dialect's
// (DialectCommands' campaign fields: cli/jax_campaign.cc, cli/v3_campaign.cc).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "casegen/generate.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "cli/campaign_report.h"
#include "cli/campaign_run.h"
#include "cli/campaign_stats.h"
#include "cli/campaign_summary.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/dialect_commands.h"
#include "cli/exit_codes.h"
#include "core/dialect.h"
#include "harness/workloads.h"
#include "oracle/dot_precision.h"

namespace rpa {
namespace {

using Clock = std::chrono::steady_clock;

// The campaign's mix: every fourth case (i % 4 == 3) is of a tpu-inference v3 dialect,
// kernel.py's and hd64's in turn; the others are jax cases, numbered among themselves.
Dialect dialect_of(int64_t i) {
  if (i % 4 != 3) return Dialect::kJax;
  return (i / 4) % 2 == 0 ? Dialect::kTpuInferenceV3 : Dialect::kTpuInferenceV3Hd64;
}

// --profile production: case i is a production call (casegen/production.h) of jax,
// kernel.py and hd64 in turn (core/dialect.h's order), through the same checks as the other
// cases (the dialect's DialectCommands::campaign_production), and tallied in the reach table.
void run_production_case(uint64_t seed, int64_t i, DotPasses passes, Stats& st) {
  const Dialect d = kDialects[static_cast<size_t>(i) % std::size(kDialects)];
  const props::ProductionSpec spec = props::seeded_production_spec(case_seed(seed, i), d);
  st.reach.add(spec);
  const std::string hex = props::production_spec_hex(spec);
  dialect_commands(d).campaign_production(spec, hex, i, passes, st);
}

// The python with the pinned JAX and the rpa package (rpa.jax): $RPA_JAX_PYTHON, else
// build/venv below the checkout (scripts/python_venv.sh build/venv).
std::string jax_python() {
  if (const char* env = std::getenv("RPA_JAX_PYTHON"); env && *env) return env;
  return std::string(RPA_SOURCE_DIR) + "/build/venv/bin/python";
}

// The python with tpu-inference's pinned JAX and the rpa package (rpa.jax.v3_pallas):
// $RPA_V3_PYTHON, else build/v3venv below the checkout (scripts/python_v3_venv.sh).
std::string v3_python() {
  if (const char* env = std::getenv("RPA_V3_PYTHON"); env && *env) return env;
  return std::string(RPA_SOURCE_DIR) + "/build/v3venv/bin/python";
}

// One cross-check through a real kernel in TPU interpret mode: JAX's (python -m
// rpa.jax.cross_check --pallas N) or tpu-inference's v3 kernels (python -m
// rpa.jax.v3_cross_check --pallas 2N: N calls of each dialect). The rpa package installed in
// that python is what it checks; its output goes to log.
struct PallasCheck {
  std::string python, args, verdict_prefix, what;
};

// production: N production calls (of at most 8 sequences) instead of N generated cases.
// ray: "" or --ray's address, passed on: the generated cases go out as Ray tasks
// (rpa._cluster.map_in_order).
PallasCheck jax_pallas_check(uint64_t n, uint64_t seed, bool production, const std::string& ray) {
  const std::string count = std::to_string(n);
  return {jax_python(), "-m rpa.jax.cross_check --pallas " +
                            (production ? "0 --production " + count : count) + " --seed " +
                            std::to_string(seed) + (ray.empty() ? "" : " --ray " + ray),
          "cross_check_jax pallas: ", "JAX's kernel"};
}

PallasCheck v3_pallas_check(uint64_t n, uint64_t seed, bool production, const std::string& ray) {
  return {v3_python(), "-m rpa.jax.v3_cross_check --cases 0 --reference 0 --scenarios none " +
                           (production ? "--pallas-production " + std::to_string(n)
                                       : "--pallas " + std::to_string(2 * n)) +
                           " --seed " + std::to_string(seed) +
                           (ray.empty() ? "" : " --ray " + ray),
          "v3_cross_check: ", "tpu-inference's v3 kernels"};
}

// --ray's value goes into a shell command: a Ray address (HOST:PORT, ray://HOST:PORT, a
// bracketed IPv6 host) or "local", nothing a shell reads.
bool ray_address_ok(std::string_view v) {
  return !v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789.:/_-[]") == std::string_view::npos;
}

// Runs the check; returns its verdict line's tail ("P passed, F failed") and the failure
// count, or an error.
struct PallasRun {
  std::string verdict;
  int64_t failed = -1;  // -1: no verdict line
  int status = 0;
};

PallasRun run_pallas_check(const PallasCheck& c, const std::filesystem::path& log) {
  const std::string cmd = "'" + c.python + "' " + c.args + " > '" + log.string() + "' 2>&1";
  PallasRun r;
  r.status = std::system(cmd.c_str());
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(c.verdict_prefix)) r.verdict = line.substr(c.verdict_prefix.size());
  }
  const size_t comma = r.verdict.find(" passed, ");
  if (comma != std::string::npos) {
    r.failed = std::strtoll(r.verdict.c_str() + comma + 9, nullptr, 10);
  }
  return r;
}

// Runs both checks, writes their lines into st.pallas and records a finding per check that
// failed or gave no verdict.
void run_pallas_checks(uint64_t n, uint64_t seed, bool production, const std::string& ray,
                       const std::optional<std::string>& report, Stats& st) {
  const std::filesystem::path dir =
      report ? std::filesystem::path(*report) : std::filesystem::temp_directory_path();
  // Appended, not "-" + ...: GCC 12 warns (-Wrestrict, a false positive) on that inlined.
  const std::string tag = report ? std::string() : std::string("-").append(std::to_string(getpid()));
  const std::pair<PallasCheck, std::string> checks[] = {
      {jax_pallas_check(n, seed, production, ray), "pallas" + tag + ".log"},
      {v3_pallas_check(n, seed, production, ray), "pallas-v3" + tag + ".log"}};
  for (const auto& [check, name] : checks) {
    const std::filesystem::path log = dir / name;
    std::fprintf(stderr, "rpa campaign: %llu cases %sthrough %s (log %s)\n",
                 static_cast<unsigned long long>(n), check.python == v3_python() ? "of each v3 dialect " : "",
                 check.what.c_str(), log.c_str());
    const PallasRun r = run_pallas_check(check, log);
    const std::string command = "python " + check.args;
    std::string line;
    if (r.failed < 0) {
      line = "ERROR: " + command + " gave no verdict (exit status " + std::to_string(r.status) +
             "; see " + log.string() + ")";
      record(st, {INT64_MAX, "pallas", line, "", ""});
    } else {
      line = r.verdict + " (" + command + "; log " + log.string() + ")";
      if (r.failed > 0) {
        record(st, {INT64_MAX, "pallas",
                    check.what + ": " + std::to_string(r.failed) + " cases differ: see " +
                        log.string(),
                    "", ""});
      }
    }
    st.pallas += (st.pallas.empty() ? "" : "; ") + check.what + ": " + line;
  }
}

std::optional<uint64_t> parse_u64(std::string_view v) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return n;
}

}  // namespace

int campaign_command(const std::vector<std::string_view>& args) {
  uint64_t seconds = 60, seed = 1, max_size = 100, pallas = 0, cases = 0;
  bool seconds_given = false, production = false;
  DotPasses passes = DotPasses::kSix;
  Shard shard;
  std::optional<std::string> report, junit;
  std::string ray;  // --ray: the Pallas cross-checks' cluster
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a != "--seconds" && a != "--seed" && a != "--report" && a != "--max-size" &&
        a != "--pallas" && a != "--junit" && a != "--dot-passes" && a != "--profile" &&
        a != "--cases" && a != "--shard" && a != "--ray") {
      return usage_error("unknown option " + std::string(a));
    }
    if (i + 1 >= args.size()) return usage_error(std::string(a) + " needs a value");
    const std::string_view v = args[++i];
    if (a == "--report" || a == "--junit") {
      if (v.empty()) return usage_error(std::string(a) + (a == "--junit" ? " needs a file" : " needs a directory"));
      (a == "--report" ? report : junit) = std::string(v);
      continue;
    }
    if (a == "--profile") {
      if (v != props::kProductionProfile) {
        return usage_error("--profile takes production (without it the campaign draws every "
                           "generator's mix; got '" + std::string(v) + "')");
      }
      production = true;
      continue;
    }
    if (a == "--ray") {
      if (!ray_address_ok(v)) {
        return usage_error("--ray takes a Ray address (HOST:PORT, ray://HOST:PORT) or local (got '" +
                           std::string(v) + "')");
      }
      ray = std::string(v);
      continue;
    }
    if (a == "--dot-passes") {
      const auto parsed = parse_dot_passes(v);
      if (!parsed) return usage_error("--dot-passes takes 6, 3 or 1");
      passes = *parsed;
      continue;
    }
    if (a == "--shard") {
      const std::optional<Shard> parsed = parse_shard(v);
      if (!parsed) {
        return usage_error("--shard takes I/N, N 1 to " + std::to_string(kMaxShards) +
                           " and I 0 to N-1 (got '" + std::string(v) + "')");
      }
      shard = *parsed;
      continue;
    }
    const std::optional<uint64_t> n = parse_u64(v);
    if (a == "--seconds") {
      if (!n || *n < 1 || *n > 7 * 24 * 3600) return usage_error("--seconds takes 1 to 604800");
      seconds = *n;
      seconds_given = true;
    } else if (a == "--cases") {
      if (!n || *n < 1 || *n > 1000000000) return usage_error("--cases takes 1 to 1000000000");
      cases = *n;
    } else if (a == "--pallas") {
      if (!n || *n > 100000) return usage_error("--pallas takes 0 to 100000 cases");
      pallas = *n;
    } else if (a == "--seed") {
      if (!n || *n > static_cast<uint64_t>(INT64_MAX)) {
        return usage_error("--seed takes 0 to 9223372036854775807");
      }
      seed = *n;
    } else {
      if (!n || *n > static_cast<uint64_t>(props::kFullSize)) {
        return usage_error("--max-size takes 0 to " + std::to_string(props::kFullSize));
      }
      max_size = *n;
    }
  }
  if (cases > 0 && seconds_given) {
    return usage_error("--cases and --seconds bound the run both: give one (--cases N checks "
                       "cases 0..N-1, --seconds N draws cases for N seconds)");
  }
  if (!ray.empty() && pallas == 0) {
    return usage_error("--ray goes with --pallas N (it runs the Pallas cross-checks' generated "
                       "cases as Ray tasks)");
  }
  if (!ray.empty() && production) {
    return usage_error("--ray goes with --pallas's generated cases; with --profile production "
                       "the Pallas cross-checks run production calls, here");
  }
  // The cross-check is one subprocess run, not a share of the case indices: one shard does
  // it, and rpa merge carries its line.
  if (pallas > 0 && shard.index != 0) {
    return usage_error("--pallas runs in shard 0 only (rpa merge carries its line); got --shard " +
                       shard_text(shard));
  }
  // A bad report path fails now, not after the run.
  if (report && !report_dir_writable(*report)) {
    std::fprintf(stderr, "rpa: cannot write the report to %s\n", report->c_str());
    return kExitUnreadable;
  }

  // The Pallas check needs the pinned JAX: fail now, loudly, not after the run.
  if (pallas > 0 && !std::filesystem::exists(jax_python())) {
    std::fprintf(stderr,
                 "rpa: --pallas needs JAX %s and the rpa package at %s (make it with "
                 "scripts/python_venv.sh build/venv, or set RPA_JAX_PYTHON)\n",
                 "0.10.2", jax_python().c_str());
    return kExitUnreadable;
  }
  if (pallas > 0 && !std::filesystem::exists(v3_python())) {
    std::fprintf(stderr,
                 "rpa: --pallas needs JAX %s, tpu-inference %s and the rpa package at %s (make "
                 "it with scripts/python_v3_venv.sh build/v3venv, or set RPA_V3_PYTHON)\n",
                 "0.11.2", "0.32.0", v3_python().c_str());
    return kExitUnreadable;
  }

  const std::string started = bench::now_string(/*utc_iso=*/true);
  const bool tty = isatty(2) != 0;
  const double step = tty ? 0.25 : 10.0;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  Stats st;
  st.max_size = static_cast<int>(max_size);
  // Every core draws cases: worker w takes the run's next case until the time is up (or,
  // with --cases, the cases are done), with tallies of its own, merged at the end. The run's
  // k-th case is index shard.case_index(k): every index for a whole run, the shard's residue
  // class for one shard. Which cases a timed run reaches depends on the time; what case i is
  // and what it checks depends on i alone, so a shard's case i is a whole run's case i.
  const int64_t shard_cases = shard.cases_of(static_cast<int64_t>(cases));  // with --cases
  const auto more = [&](int64_t k) {
    return cases > 0 ? k < shard_cases : elapsed() < static_cast<double>(seconds);
  };
  const int workers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0}, cases_done{0}, kernel_done{0}, findings_seen{0};
  std::atomic<bool> finished{false};
  std::vector<Stats> per_worker(static_cast<size_t>(workers));
  auto work = [&](size_t w) {
    Stats& mine = per_worker[w];
    mine.max_size = st.max_size;
    for (int64_t k = next++; more(k); k = next++) {
      const int64_t i = shard.case_index(k);
      const int64_t kernel_before = mine.kernel_checks, findings_before = mine.findings_total;
      std::string replay, note;  // the case's replay hex once known, and its v3 mutations
      try {
        if (production) {
          run_production_case(seed, i, passes, mine);
        } else {
          const Dialect d = dialect_of(i);
          dialect_commands(d).campaign_case(d, seed, i, st.max_size, passes, mine, replay, note);
        }
      } catch (const std::exception& e) {  // nothing may escape a worker thread
        record(mine, {i, "exception", e.what() + note, replay, ""});
      }
      ++cases_done;
      kernel_done += mine.kernel_checks - kernel_before;
      findings_seen += mine.findings_total - findings_before;
    }
  };
  // "[ 12.5/60 s] 812 cases, ..." for a timed run, "[ 12.5 s] 812/2000 cases, ..." with --cases.
  const auto show = [&](int64_t done, int64_t kernel, int64_t findings, const std::string& tail) {
    char clock[64], count[64];
    if (cases > 0) {
      std::snprintf(clock, sizeof clock, "%5.1f", elapsed());
      std::snprintf(count, sizeof count, "%lld/%lld", static_cast<long long>(done),
                    static_cast<long long>(shard_cases));
    } else {
      std::snprintf(clock, sizeof clock, "%5.1f/%llu", elapsed(),
                    static_cast<unsigned long long>(seconds));
      std::snprintf(count, sizeof count, "%lld", static_cast<long long>(done));
    }
    std::fprintf(stderr, "%s[%s s] %s cases, %lld kernel checks, %lld findings%s%s",
                 tty ? "\r" : "", clock, count, static_cast<long long>(kernel),
                 static_cast<long long>(findings), tail.c_str(), tty ? "" : "\n");
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(work, static_cast<size_t>(w));
  std::thread progress([&] {
    while (!finished) {
      show(cases_done, kernel_done, findings_seen, "");
      const double until = elapsed() + step;
      while (!finished && elapsed() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
  work(0);
  for (std::thread& t : pool) t.join();
  finished = true;
  progress.join();
  for (const Stats& w : per_worker) merge_into(st, w);
  show(cases_done, kernel_done, findings_seen, " (" + std::to_string(workers) + " workers)");
  if (tty) std::fprintf(stderr, "\n");
  if (pallas > 0) run_pallas_checks(pallas, seed, production, ray, report, st);
  const CampaignRun run{.seed = seed,
                        .seconds_asked = cases > 0 ? 0 : seconds,
                        .seconds = elapsed(),
                        .workers = workers,
                        .machine = machine_description(),
                        .started = started,
                        .production = production,
                        .dot_passes = passes,
                        .cases_asked = cases,
                        .shard = shard};
  return report_campaign(st, run, report, junit);
}

}  // namespace rpa
