// rpa campaign: the main job. For a bounded time it draws cases from the property
// generators (valid ones, and ones with named mutations), checks both validation modes
// against the spec model and the tiled kernel against the dense reference, shows a live
// progress line, and ends with a summary (also written to --report as JSON and markdown)
// whose findings each come with the command that replays them. With --pallas N, N more
// generated cases of each dialect then go through the real kernels in TPU interpret mode
// (JAX's: python -m rpa.jax.cross_check --pallas; tpu-inference's v3: python -m
// rpa.jax.v3_cross_check --pallas), and the summary says whether that ran.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/workloads.h"
#include "casefile/case_file.h"
#include "cli/campaign_report.h"
#include "cli/campaign_stats.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/junit_report.h"
#include "core/paged_kv_view.h"
#include "core/python_repr.h"
#include "fuzz/jax_raw_call.h"
#include "fuzz/raw_check.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/compare.h"
#include "oracle/dot_precision.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "properties/case_codec.h"
#include "properties/generate.h"
#include "properties/jax_build_case.h"
#include "properties/jax_materialize.h"
#include "properties/jax_spec_model.h"
#include "properties/production.h"
#include "properties/random_source.h"
#include "properties/v3_build_case.h"
#include "properties/v3_case_spec.h"
#include "properties/v3_materialize.h"
#include "reference/jax_reference.h"
#include "reference/v3_reference.h"
#include "service/check_case.h"
#include "service/json_writer.h"
#include "service/v3_run_case.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t case_seed(uint64_t seed, int64_t i) {
  return seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ULL;
}

// Case i: even ones valid, odd ones with one or two mutations; sizes cycle 0..max_size as
// in a RapidCheck run.
props::CaseSpec case_spec(uint64_t seed, int64_t i, int max_size) {
  props::BuildOptions options;
  options.min_mutations = i % 2 == 0 ? 0 : 1;
  options.max_mutations = i % 2 == 0 ? 0 : 2;
  props::RandomSource source(case_seed(seed, i), static_cast<int>(i % (max_size + 1)));
  return props::build_case(source, options);
}

// fuzz_raw_inputs' decoder and checks in process: the raw form (fuzz/jax_raw_call.h) of a valid
// case with one to four bytes changed, three times in four among the bytes before q's and
// kv_pages' contents (shapes, dtypes, parameters, index arrays: what validation reads).
void run_raw_call(const props::Materialized& m, uint64_t seed, int64_t i, Stats& st) {
  std::optional<std::vector<uint8_t>> bytes = fuzz::encode_raw_call({m.inputs, m.params});
  if (!bytes || bytes->empty()) return;  // over the raw element budget
  const uint64_t data = static_cast<uint64_t>(m.inputs.q.nbytes() + m.inputs.kv_pages.nbytes());
  const uint64_t head = bytes->size() > data ? bytes->size() - data : bytes->size();
  uint64_t state = seed;
  const uint64_t changes = 1 + props::splitmix64(state) % 4;
  for (uint64_t k = 0; k < changes; ++k) {
    const uint64_t span = props::splitmix64(state) % 4 != 0 ? head : bytes->size();
    (*bytes)[props::splitmix64(state) % span] = static_cast<uint8_t>(props::splitmix64(state));
  }
  ++st.raw_calls;
  try {
    const fuzz::RawCheck r = fuzz::check_raw_call(fuzz::decode_raw_call(*bytes));
    st.raw_strict_accepted += r.strict_accepts ? 1 : 0;
    st.raw_ran += r.ran ? 1 : 0;
    if (r.problem) record(st, {i, "raw call", *r.problem, "", props::to_hex(*bytes)});
  } catch (const std::exception& e) {
    record(st, {i, "raw call", std::string("exception: ") + e.what(), "", props::to_hex(*bytes)});
  }
}

// The hex that replays a finding: the production recipe's when the case came from one (its
// expansion is past the generators' codecs), else the spec's own.
std::string replay_hex(const props::CaseSpec& spec, const std::string& production_hex) {
  return production_hex.empty() ? props::spec_hex(spec) : production_hex;
}

// Threads alternate 1 and 2 over the valid cases.
void run_case(const props::CaseSpec& spec, const std::string& production_hex, int64_t i,
              DotPasses passes, Stats& st) {
  ++st.cases;
  st.mutated += spec.mutations.empty() ? 0 : 1;
  const props::Materialized m = props::materialize(spec);

  bool strict_valid = false;
  for (int k = 0; k < 2; ++k) {
    const Mode mode = kModes[k];
    const std::optional<Failure> want = props::expected_failure(m, mode);
    const std::optional<Failure> got = validate(m.inputs, m.params, {.mode = mode});
    ++st.validation_checks;
    ++st.verdicts[k][got ? std::string(rule_info(got->rule).name) : "valid"];
    if (got != want) {
      record(st, {i, "validation (" + std::string(mode_name(mode)) + ")",
                  "spec model: " + props::verdict_text(want) +
                      " | validate: " + props::verdict_text(got),
                  replay_hex(spec, production_hex), ""});
    }
    if (mode == Mode::kStrict) strict_valid = !got && !want;
  }
  if (!strict_valid) return;

  run_raw_call(m, case_seed(static_cast<uint64_t>(spec.data_seed), i), i, st);
  const Tensor out =
      tiled_attention(m.inputs, m.params, {.threads = static_cast<int>(i / 2 % 2) + 1});
  ++st.kernel_checks;
  const std::string pair =
      std::string(dtype_name(spec.q_dtype)) + "/" + std::string(dtype_name(spec.kv_dtype));
  ++st.pair_checks[pair];
  const auto [kernel_ref, reference_ref] =
      dense_reference_both(m.inputs, m.params, most_logit_error(passes));
  for (const ReferenceResult* r : {&kernel_ref, &reference_ref}) {
    const ReferenceResult& ref = *r;
    const Semantics semantics = ref.semantics;
    const Comparison c = compare_outputs(out, ref.out, PagedKvView(m.inputs),
                                         tolerance_for_case(m.inputs, m.params, ref, passes));
    const bool kernel = semantics == Semantics::kKernel;
    double& worst = (kernel ? st.worst_budget : st.worst_budget_reference)[pair];
    worst = std::max(worst, c.max_budget_used);
    if (kernel) {
      ++st.budget_histogram[pair][budget_bin(c.agree() ? c.max_budget_used : INFINITY)];
      if (c.agree() && c.bias.biased()) {
        ++st.biased[pair];
        record(st, {i, "kernel vs reference (bias)", bias_line(c), replay_hex(spec, production_hex), ""});
      }
    }
    if (kernel && std::isfinite(c.min_detectable_key_weight)) {
      st.key_weights[pair].push_back(c.min_detectable_key_weight);
    }
    if (kernel && std::isfinite(c.discrimination)) {
      double& weakest = st.worst_discrimination[pair];
      weakest = std::max(weakest, c.discrimination);
      if (!c.rejects_zero()) ++st.could_not_reject_zero;
    }
    if (!c.agree()) {
      record(st, {i, "kernel vs reference (" + semantics_label(semantics) + ")",
                  describe_mismatch(c), replay_hex(spec, production_hex), ""});
    }
  }
}

// Every fourth case (i % 4 == 3) is of a tpu-inference v3 dialect, kernel.py's and hd64's
// in turn; the others are jax cases, numbered among themselves.
std::optional<Dialect> v3_dialect_of(int64_t i) {
  if (i % 4 != 3) return std::nullopt;
  return (i / 4) % 2 == 0 ? Dialect::kTpuInferenceV3 : Dialect::kTpuInferenceV3Hd64;
}

// A v3 case: the generator's cases are all strict-valid (it has no mutations yet), so both
// modes must accept them (until properties/v3_spec_model.h gives the expected verdicts of
// mutated ones); then the tiled kernel against the v3 reference in the kernel semantics
// (v3_compare: the updated cache bit for bit, out within the derived tolerance). The
// reference semantics is not the kernel's: its tolerance (oracle/v3_compare.h) bounds
// tpu-inference's own ref, so the kernel is not judged against it here. The check's power
// (the least dropped key weight caught, whether an all-zero output fails) is tallied per
// dialect and dtype pair.
// hex: the replay hex of the call (a production recipe's or the spec's).
void run_v3_spec(const props::V3CaseSpec& spec, const std::string& hex, int64_t i, Stats& st) {
  const Dialect d = spec.dialect;
  const std::string name(dialect_name(d));
  ++st.v3_cases[name];  // Stats::cases and validation_checks count the jax dialect's
  const props::V3Materialized m = props::materialize_v3(spec);
  bool strict_valid = false;
  for (int k = 0; k < 2; ++k) {
    const Mode mode = kV3Modes[k];
    const std::optional<V3Failure> got = v3_validate(d, m.inputs, m.params, mode);
    ++st.v3_verdicts[k][name][got ? std::string(v3_rule_info(got->rule).name) : "valid"];
    if (got) {
      record(st, {i, "v3 validation (" + std::string(v3_mode_name(mode)) + ")",
                  name + ": a generated valid case rejected by " + rule_line(rule_report(*got, mode)),
                  hex, ""});
    }
    if (mode == Mode::kStrict) strict_valid = !got;
  }
  if (!strict_valid) return;
  const V3KernelResult k =
      v3_tiled_attention(d, m.inputs, m.params, {.threads = static_cast<int>(i / 4 % 2) + 1});
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  const V3Comparison c = v3_compare(d, m.inputs, m.params, ref, k.out, k.kv_cache);
  ++st.v3_kernel_checks;
  const std::string key = name + " " + std::string(dtype_name(m.inputs.queries.dtype())) + "/" +
                          std::string(dtype_name(m.inputs.kv_cache.dtype()));
  ++st.v3_pair_checks[key];
  if (!st.v3_worst_share.contains(key) || c.max_share > st.v3_worst_share[key]) {
    st.v3_worst_share[key] = c.max_share;
    st.v3_tolerance_at_worst[key] = c.tolerance_at_max;
  }
  // The check's power, as for the jax dialect's kernel-semantics checks.
  if (std::isfinite(c.min_detectable_key_weight)) {
    st.v3_key_weights[key].push_back(c.min_detectable_key_weight);
  }
  if (c.compared > 0 && !c.rejects_zero) ++st.v3_could_not_reject_zero;
  if (!c.agree()) {
    record(st, {i, "v3 kernel vs reference (kernel semantics)",
                name + ": " + describe_v3_comparison(c), hex, ""});
  }
}

void run_v3_case(Dialect d, uint64_t seed, int64_t i, int max_size, Stats& st) {
  props::V3BuildOptions options;
  options.dialect = d;
  const props::V3CaseSpec spec =
      props::seeded_v3_spec(case_seed(seed, i), static_cast<int>(i % (max_size + 1)), options);
  run_v3_spec(spec, props::v3_spec_hex(spec), i, st);
}

// --profile production: case i is a production call (properties/production.h) of jax,
// kernel.py and hd64 in turn, through the same checks as the other cases, and tallied in the
// reach table.
void run_production_case(uint64_t seed, int64_t i, DotPasses passes, Stats& st) {
  constexpr Dialect kDialects[] = {Dialect::kJax, Dialect::kTpuInferenceV3,
                                   Dialect::kTpuInferenceV3Hd64};
  const Dialect d = kDialects[i % 3];
  const props::ProductionSpec spec = props::seeded_production_spec(case_seed(seed, i), d);
  st.reach.add(spec);
  const std::string hex = props::production_spec_hex(spec);
  if (is_v3(d)) {
    run_v3_spec(props::production_v3_case(spec), hex, i, st);
  } else {
    run_case(props::production_case(spec), hex, i, passes, st);
  }
}

// Three significant digits, for the one-line summary.
double round_sig(double x) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

std::string pallas_line(const Stats& st) {
  return st.pallas.empty() ? "not run (--pallas N runs N generated cases of each dialect through "
                             "JAX's and tpu-inference's kernels; needs scripts/python_venv.sh "
                             "build/venv and scripts/python_v3_venv.sh build/v3venv)"
                           : st.pallas;
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
PallasCheck jax_pallas_check(uint64_t n, uint64_t seed, bool production) {
  const std::string count = std::to_string(n);
  return {jax_python(), "-m rpa.jax.cross_check --pallas " +
                            (production ? "0 --production " + count : count) + " --seed " +
                            std::to_string(seed),
          "cross_check_jax pallas: ", "JAX's kernel"};
}

PallasCheck v3_pallas_check(uint64_t n, uint64_t seed, bool production) {
  return {v3_python(), "-m rpa.jax.v3_cross_check --cases 0 --reference 0 --scenarios none " +
                           (production ? "--pallas-production " + std::to_string(n)
                                       : "--pallas " + std::to_string(2 * n)) +
                           " --seed " + std::to_string(seed),
          "v3_cross_check: ", "tpu-inference's v3 kernels"};
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
void run_pallas_checks(uint64_t n, uint64_t seed, bool production,
                       const std::optional<std::string>& report, Stats& st) {
  const std::filesystem::path dir =
      report ? std::filesystem::path(*report) : std::filesystem::temp_directory_path();
  const std::string tag = report ? "" : "-" + std::to_string(getpid());
  const std::pair<PallasCheck, std::string> checks[] = {
      {jax_pallas_check(n, seed, production), "pallas" + tag + ".log"},
      {v3_pallas_check(n, seed, production), "pallas-v3" + tag + ".log"}};
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

int64_t v3_case_count(const Stats& st) {
  int64_t n = 0;
  for (const auto& [d, c] : st.v3_cases) n += c;
  return n;
}

// The v3 dialects' lines of the summary: cases and verdicts per dialect and mode, then the
// kernel checks per dialect and q/kv dtypes.
std::string v3_summary_text(const Stats& st) {
  std::string s;
  for (const auto& [dialect, n] : st.v3_cases) {
    s += "  " + dialect + ": " + std::to_string(n) + " cases\n";
    for (int k = 0; k < 2; ++k) {
      s += "    " + std::string(v3_mode_name(kV3Modes[k])) + " verdicts:";
      const auto it = st.v3_verdicts[k].find(dialect);
      if (it != st.v3_verdicts[k].end()) {
        for (const auto& [rule, c] : it->second) s += " " + rule + " " + std::to_string(c);
      }
      s += "\n";
    }
  }
  s += "  v3 kernel vs v3 reference (kernel semantics; cache bit for bit): " +
       std::to_string(st.v3_kernel_checks) +
       " cases; most of the tolerance used (the tolerance there) and the least weight of a "
       "dropped key caught (median / largest), per dialect and q/kv dtypes:";
  for (const auto& [key, share] : st.v3_worst_share) {
    s += " " + key + " " + py_float_repr(round_sig(share)) + " (" +
         py_float_repr(round_sig(st.v3_tolerance_at_worst.at(key))) + "), " +
         key_weight_text(st.v3_key_weights, key) + " (" +
         std::to_string(st.v3_pair_checks.at(key)) + " cases)";
  }
  return s + "\n";
}

std::string summary_text(const Stats& st, double seconds, uint64_t seed) {
  std::string s = "rpa campaign: " + py_float_repr(std::round(seconds * 10) / 10) + " s, seed " +
                  std::to_string(seed) + ", sizes 0.." + std::to_string(st.max_size) + ": " +
                  std::to_string(st.cases) + " cases (" + std::to_string(st.cases - st.mutated) +
                  " valid, " + std::to_string(st.mutated) + " with mutations) and " +
                  std::to_string(v3_case_count(st)) + " tpu-inference v3 cases\n";
  for (int k = 0; k < 2; ++k) {
    s += "  " + std::string(mode_name(kModes[k])) + " verdicts:";
    for (const auto& [rule, n] : st.verdicts[k]) s += " " + rule + " " + std::to_string(n);
    s += "\n";
  }
  s += "  validation vs spec model: " + std::to_string(st.validation_checks) + " checks\n";
  s += "  kernel vs reference: " + std::to_string(st.kernel_checks) +
       " cases; most of the tolerance used (kernel semantics / reference semantics), the "
       "weakest discrimination and the least weight of a dropped key caught (median / "
       "largest), per q/kv dtypes:";
  for (const auto& [pair, worst] : st.worst_budget) {
    const auto weakest = st.worst_discrimination.find(pair);
    s += " " + pair + " " + py_float_repr(round_sig(worst)) + " / " +
         py_float_repr(round_sig(st.worst_budget_reference.at(pair))) + ", " +
         (weakest == st.worst_discrimination.end() ? std::string("-")
                                                   : py_float_repr(round_sig(weakest->second))) +
         ", " + key_weight_text(st.key_weights, pair) + " (" +
         std::to_string(st.pair_checks.at(pair)) + ")";
  }
  s += "\n" + v3_summary_text(st);
  s += "  kernel-semantics checks that could not reject an all-zero output (answer ~0): " +
       std::to_string(st.could_not_reject_zero) + ", v3 " +
       std::to_string(st.v3_could_not_reject_zero);
  s += "\n  raw calls (fuzz_raw_inputs' decoder, valid cases with bytes changed): " +
       std::to_string(st.raw_calls) + ", strict accepted " +
       std::to_string(st.raw_strict_accepted) + ", run " + std::to_string(st.raw_ran);
  if (!st.reach.empty()) {
    s += "\n  production reach (each item: the calls that drew it):\n" +
         st.reach.text("    ");
    s.pop_back();
  }
  s += "\n  Pallas kernel (TPU interpret mode): " + pallas_line(st);
  s += "\n  findings: " + std::to_string(st.findings_total) + "\n";
  for (const Finding& f : st.findings) {
    s += "    " + f.check + ": " + f.detail + "\n      replay: " + finding_replay(f) + "\n";
  }
  return s;
}

// {"KEY": {"median": ..., "largest": ...}, ...} of each key with a finite weight.
void write_key_weights_json(JsonWriter& j, const KeyWeights& weights) {
  j.begin_object();
  for (const auto& [key, w] : weights) {
    if (w.empty()) continue;
    std::vector<double> sorted = w;
    std::sort(sorted.begin(), sorted.end());
    j.key(key).begin_object().key("median").value(sorted[sorted.size() / 2]);
    j.key("largest").value(sorted.back()).end_object();
  }
  j.end_object();
}

std::string summary_json(const Stats& st, double seconds, uint64_t seed) {
  JsonWriter j;
  j.begin_object().key("seconds").value(seconds).key("seed").value(static_cast<int64_t>(seed));
  j.key("max_size").value(st.max_size);
  j.key("cases").value(st.cases).key("mutated_cases").value(st.mutated);
  j.key("validation_checks").value(st.validation_checks);
  for (int k = 0; k < 2; ++k) {
    j.key(std::string(mode_name(kModes[k])) + "_verdicts").begin_object();
    for (const auto& [rule, n] : st.verdicts[k]) j.key(rule).value(n);
    j.end_object();
  }
  j.key("kernel_checks").value(st.kernel_checks).key("max_tolerance_used").begin_object();
  for (const auto& [pair, worst] : st.worst_budget) j.key(pair).value(worst);
  j.end_object().key("max_tolerance_used_reference_semantics").begin_object();
  for (const auto& [pair, worst] : st.worst_budget_reference) j.key(pair).value(worst);
  j.end_object().key("max_discrimination").begin_object();
  for (const auto& [pair, weakest] : st.worst_discrimination) j.key(pair).value(weakest);
  j.end_object().key("min_detectable_key_weight");
  write_key_weights_json(j, st.key_weights);
  j.key("kernel_checks_per_pair").begin_object();
  for (const auto& [pair, n] : st.pair_checks) j.key(pair).value(n);
  j.end_object().key("biased_per_pair").begin_object();
  for (const auto& [pair, n] : st.biased) j.key(pair).value(n);
  j.end_object().key("could_not_reject_zero").value(st.could_not_reject_zero);
  j.key("raw_calls").value(st.raw_calls);
  j.key("raw_strict_accepted").value(st.raw_strict_accepted).key("raw_ran").value(st.raw_ran);
  j.key("pallas").value(pallas_line(st));
  j.key("v3").begin_object().key("cases").begin_object();
  for (const auto& [d, n] : st.v3_cases) j.key(d).value(n);
  j.end_object();
  for (int k = 0; k < 2; ++k) {
    j.key(std::string(v3_mode_name(kV3Modes[k])) + "_verdicts").begin_object();
    for (const auto& [d, rules] : st.v3_verdicts[k]) {
      j.key(d).begin_object();
      for (const auto& [rule, n] : rules) j.key(rule).value(n);
      j.end_object();
    }
    j.end_object();
  }
  j.key("kernel_checks").value(st.v3_kernel_checks).key("kernel_checks_per_pair").begin_object();
  for (const auto& [key, n] : st.v3_pair_checks) j.key(key).value(n);
  j.end_object().key("max_tolerance_used").begin_object();
  for (const auto& [key, w] : st.v3_worst_share) j.key(key).value(w);
  j.end_object().key("tolerance_at_max").begin_object();
  for (const auto& [key, w] : st.v3_tolerance_at_worst) j.key(key).value(w);
  j.end_object().key("min_detectable_key_weight");
  write_key_weights_json(j, st.v3_key_weights);
  j.key("could_not_reject_zero").value(st.v3_could_not_reject_zero);
  j.end_object();
  if (!st.reach.empty()) {
    j.key("production_reach").begin_object();
    for (const auto& [d, r] : st.reach.by_dialect()) {
      j.key(d).begin_object().key("calls").value(r.calls);
      j.key("longest_kv_len").value(r.longest_kv_len).key("most_rows").value(r.most_rows);
      j.key("highest_position").value(r.highest_position).key("items").begin_object();
      for (const auto& [item, n] : r.items) j.key(item).value(n);
      j.end_object().end_object();
    }
    j.end_object();
  }
  j.key("findings_total").value(st.findings_total).key("findings").begin_array();
  for (const Finding& f : st.findings) {
    j.begin_object().key("check").value(f.check).key("detail").value(f.detail);
    j.key("spec").value(f.spec);
    if (!f.raw.empty()) j.key("raw").value(f.raw);
    j.key("replay").value(finding_replay(f)).end_object();
  }
  return j.end_array().end_object().str();
}

std::string summary_markdown(const Stats& st, double seconds, uint64_t seed) {
  std::string s = "# rpa campaign\n\n" + std::to_string(st.cases) + " cases in " +
                  py_float_repr(std::round(seconds * 10) / 10) + " s (seed " +
                  std::to_string(seed) + "): " + std::to_string(st.cases - st.mutated) +
                  " valid, " + std::to_string(st.mutated) + " with named mutations.\n\n" +
                  "## Verdicts\n\n| rule | strict | jax |\n|---|---|---|\n";
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  for (const auto& [rule, n] : st.verdicts[0]) rows[rule].first = n;
  for (const auto& [rule, n] : st.verdicts[1]) rows[rule].second = n;
  for (const auto& [rule, n] : rows) {
    s += "| " + rule + " | " + std::to_string(n.first) + " | " + std::to_string(n.second) + " |\n";
  }
  s += "\n## Kernel vs reference\n\n| q / kv | cases | most of the tolerance used, kernel "
       "semantics | reference semantics | weakest discrimination (kernel) | least dropped key "
       "weight caught (median / largest) |\n"
       "|---|---|---|---|---|---|\n";
  for (const auto& [pair, worst] : st.worst_budget) {
    const auto weakest = st.worst_discrimination.find(pair);
    s += "| " + pair + " | " + std::to_string(st.pair_checks.at(pair)) + " | " +
         py_float_repr(worst) + " | " + py_float_repr(st.worst_budget_reference.at(pair)) + " | " +
         (weakest == st.worst_discrimination.end() ? std::string("-")
                                                   : py_float_repr(weakest->second)) +
         " | " + key_weight_text(st.key_weights, pair) + " |\n";
  }
  s += "\n" + std::to_string(st.could_not_reject_zero) +
       " kernel-semantics checks could not have rejected an all-zero output.\n";
  s += "\n## tpu-inference v3\n\n| dialect | rule | native | strict |\n|---|---|---|---|\n";
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> v3_rows;
  for (const auto& [d, rules] : st.v3_verdicts[0]) {
    for (const auto& [rule, n] : rules) v3_rows[{d, rule}].first = n;
  }
  for (const auto& [d, rules] : st.v3_verdicts[1]) {
    for (const auto& [rule, n] : rules) v3_rows[{d, rule}].second = n;
  }
  for (const auto& [k, n] : v3_rows) {
    s += "| " + k.first + " | " + k.second + " | " + std::to_string(n.first) + " | " +
         std::to_string(n.second) + " |\n";
  }
  s += "\n| dialect q / kv | cases | most of the tolerance used (kernel semantics) | tolerance "
       "there | least dropped key weight caught (median / largest) |\n|---|---|---|---|---|\n";
  for (const auto& [key, w] : st.v3_worst_share) {
    s += "| " + key + " | " + std::to_string(st.v3_pair_checks.at(key)) + " | " +
         py_float_repr(w) + " | " + py_float_repr(st.v3_tolerance_at_worst.at(key)) + " | " +
         key_weight_text(st.v3_key_weights, key) + " |\n";
  }
  s += "\n" + std::to_string(st.v3_could_not_reject_zero) +
       " v3 kernel-semantics checks could not have rejected an all-zero output.\n";
  s += "\n## Raw calls\n\n" + std::to_string(st.raw_calls) +
       " valid cases in fuzz_raw_inputs' raw form with one to four bytes changed: " +
       std::to_string(st.raw_strict_accepted) + " still strict-valid, " +
       std::to_string(st.raw_ran) + " run through the reference and the kernel.\n";
  if (!st.reach.empty()) {
    s += "\n## Production reach\n\n| dialect | calls | longest kv_len | most rows | highest "
         "position |\n|---|---|---|---|---|\n";
    for (const auto& [d, r] : st.reach.by_dialect()) {
      s += "| " + d + " | " + std::to_string(r.calls) + " | " + std::to_string(r.longest_kv_len) +
           " | " + std::to_string(r.most_rows) + " | " + std::to_string(r.highest_position) + " |\n";
    }
    s += "\n| dialect | item | calls |\n|---|---|---|\n";
    for (const auto& [d, r] : st.reach.by_dialect()) {
      for (const auto& [item, n] : r.items) {
        s += "| " + d + " | " + item + " | " + std::to_string(n) + " |\n";
      }
    }
  }
  s += "\n## Pallas kernel (TPU interpret mode)\n\n" + pallas_line(st) + "\n";
  s += "\n## Findings: " + std::to_string(st.findings_total) + "\n\n";
  for (const Finding& f : st.findings) {
    s += "- **" + f.check + "**: " + f.detail + "\n  `" + finding_replay(f) + "`\n";
  }
  return s;
}

bool write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// One JUnit test case per check class: a failure when it found something.
std::vector<JunitCase> junit_cases(const Stats& st, double seconds) {
  struct Class {
    std::string name, prefix;
    int64_t checks;
  };
  const std::vector<Class> classes = {
      {"validation (strict) vs spec model", "validation (strict)", st.cases},
      {"validation (jax) vs spec model", "validation (jax)", st.cases},
      {"kernel vs reference (kernel semantics)", "kernel vs reference (kernel semantics)",
       st.kernel_checks},
      {"kernel vs reference (reference semantics)", "kernel vs reference (reference semantics)",
       st.kernel_checks},
      {"kernel vs reference (bias)", "kernel vs reference (bias)", st.kernel_checks},
      {"raw calls", "raw call", st.raw_calls},
      {"v3 validation (native) of generated valid cases", "v3 validation (native)",
       v3_case_count(st)},
      {"v3 validation (strict) of generated valid cases", "v3 validation (strict)",
       v3_case_count(st)},
      {"v3 kernel vs reference (kernel semantics)", "v3 kernel vs reference (kernel semantics)",
       st.v3_kernel_checks},
      {"exceptions", "exception", st.cases},
      {"pallas kernel", "pallas", st.pallas.empty() ? 0 : 1},
  };
  std::vector<JunitCase> out;
  for (const Class& c : classes) {
    if (c.prefix == "pallas" && st.pallas.empty()) continue;
    JunitCase j;
    j.classname = "rpa.campaign";
    j.name = c.name + " (" + std::to_string(c.checks) + " checks)";
    j.seconds = c.prefix == "pallas" ? 0.0 : seconds;  // the classes ran side by side
    const auto found = st.findings_by_check.find(c.prefix);
    if (found != st.findings_by_check.end() && found->second > 0) {
      j.outcome = JunitCase::Outcome::kFailure;
      j.type = "finding";
      j.message = std::to_string(found->second) + " findings";
      for (const Finding& f : st.findings) {
        if (f.check == c.prefix) j.details += f.detail + "\n  replay: " + finding_replay(f) + "\n";
      }
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<uint64_t> parse_u64(std::string_view v) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return n;
}

}  // namespace

int campaign_command(const std::vector<std::string_view>& args) {
  uint64_t seconds = 60, seed = 1, max_size = 100, pallas = 0;
  bool production = false;
  DotPasses passes = DotPasses::kSix;
  std::optional<std::string> report, junit;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a != "--seconds" && a != "--seed" && a != "--report" && a != "--max-size" &&
        a != "--pallas" && a != "--junit" && a != "--dot-passes" && a != "--profile") {
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
    if (a == "--dot-passes") {
      const auto parsed = parse_dot_passes(v);
      if (!parsed) return usage_error("--dot-passes takes 6, 3 or 1");
      passes = *parsed;
      continue;
    }
    const std::optional<uint64_t> n = parse_u64(v);
    if (a == "--seconds") {
      if (!n || *n < 1 || *n > 7 * 24 * 3600) return usage_error("--seconds takes 1 to 604800");
      seconds = *n;
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
  // A bad report path fails now, not after the run.
  if (report) {
    std::error_code ec;
    std::filesystem::create_directories(*report, ec);
    if (ec || !write_text(std::filesystem::path(*report) / "summary.json", "{}\n")) {
      std::fprintf(stderr, "rpa: cannot write the report to %s\n", report->c_str());
      return kExitUnreadable;
    }
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
  // Every core draws cases: worker w takes the next case index until the time is up, with
  // tallies of its own, merged at the end. Which cases a run reaches depends on the time;
  // what case i is and what it checks does not.
  const int workers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0}, cases_done{0}, kernel_done{0}, findings_seen{0};
  std::vector<Stats> per_worker(static_cast<size_t>(workers));
  auto work = [&](size_t w) {
    Stats& mine = per_worker[w];
    mine.max_size = st.max_size;
    while (elapsed() < static_cast<double>(seconds)) {
      const int64_t i = next++;
      const int64_t kernel_before = mine.kernel_checks, findings_before = mine.findings_total;
      std::optional<props::CaseSpec> spec;
      try {
        if (production) {
          run_production_case(seed, i, passes, mine);
        } else if (const std::optional<Dialect> d = v3_dialect_of(i)) {
          run_v3_case(*d, seed, i, st.max_size, mine);
        } else {
          // The jax cases keep their own numbering (even valid, odd mutated).
          spec = case_spec(seed, i - (i + 1) / 4, st.max_size);
          run_case(*spec, "", i, passes, mine);
        }
      } catch (const std::exception& e) {  // nothing may escape a worker thread
        record(mine, {i, "exception", e.what(), spec ? props::spec_hex(*spec) : "", ""});
      }
      ++cases_done;
      kernel_done += mine.kernel_checks - kernel_before;
      findings_seen += mine.findings_total - findings_before;
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(work, static_cast<size_t>(w));
  std::thread progress([&] {
    while (elapsed() < static_cast<double>(seconds)) {
      std::fprintf(stderr, "%s[%5.1f/%llu s] %lld cases, %lld kernel checks, %lld findings%s",
                   tty ? "\r" : "", elapsed(), static_cast<unsigned long long>(seconds),
                   static_cast<long long>(cases_done.load()), static_cast<long long>(kernel_done.load()),
                   static_cast<long long>(findings_seen.load()), tty ? "" : "\n");
      const double until = std::min(static_cast<double>(seconds), elapsed() + step);
      while (elapsed() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  work(0);
  for (std::thread& t : pool) t.join();
  progress.join();
  for (const Stats& w : per_worker) merge_into(st, w);
  std::fprintf(stderr, "%s[%5.1f/%llu s] %lld cases, %lld kernel checks, %lld findings (%d workers)%s",
               tty ? "\r" : "", elapsed(), static_cast<unsigned long long>(seconds),
               static_cast<long long>(st.cases), static_cast<long long>(st.kernel_checks),
               static_cast<long long>(st.findings_total), workers, tty ? "" : "\n");
  if (tty) std::fprintf(stderr, "\n");
  if (pallas > 0) run_pallas_checks(pallas, seed, production, report, st);
  const double took = elapsed();
  std::printf("%s", summary_text(st, took, seed).c_str());

  if (report) {
    const std::filesystem::path dir(*report);
    const CampaignRun run{seed, seconds, took, workers, machine_description(), started};
    if (!write_text(dir / "summary.json", summary_json(st, took, seed) + "\n") ||
        !write_text(dir / "summary.md", summary_markdown(st, took, seed)) ||
        !write_text(dir / "report.html",
                    campaign_report_html(st, run, write_finding_files(st, dir)))) {
      std::fprintf(stderr, "rpa: cannot write the report to %s\n", report->c_str());
      return kExitUnreadable;
    }
    std::printf("report: %s/report.html, %s/summary.json, %s/summary.md\n", report->c_str(),
                report->c_str(), report->c_str());
  }
  if (junit) {
    if (const std::string err = write_junit(*junit, "rpa campaign", junit_cases(st, took), took);
        !err.empty()) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  return st.findings_total == 0 ? kExitOk : kExitMismatch;
}

}  // namespace rpa
