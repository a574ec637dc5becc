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
// ADDRESS those cases run as Ray tasks on that cluster (rpa._cluster).
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
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "harness/workloads.h"
#include "casefile/case_file.h"
#include "cli/campaign_report.h"
#include "cli/campaign_run.h"
#include "cli/campaign_stats.h"
#include "cli/campaign_summary.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "casegen/jax_raw_call.h"
#include "harness/jax_raw_check.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/compare.h"
#include "oracle/dot_precision.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "casegen/jax_case_codec.h"
#include "casegen/generate.h"
#include "casegen/v3_generate.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/v3_production.h"
#include "casegen/jax_production.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "reference/jax_reference.h"
#include "reference/v3_reference.h"
#include "service/check_case.h"
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

// fuzz_raw_inputs' decoder and checks in process: the raw form (casegen/jax_raw_call.h) of a valid
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
    const Comparison c = compare_outputs(out, ref.out, kv_view(m.inputs),
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

// Up to `count` named v3 mutations (casegen/v3_mutation.h) that compose on spec, drawn from
// seed: an optional shape one, then parameter ones of distinct groups, as the validation
// properties draw them.
std::vector<props::V3Mutation> seeded_v3_mutations(const props::V3CaseSpec& spec, uint64_t seed,
                                                   int count) {
  std::vector<props::V3Mutation> out;
  for (int n = 0; n < count; ++n) {
    std::vector<props::V3MutationKind> kinds;
    for (const props::V3MutationKind k : props::all_v3_mutation_kinds()) {
      std::vector<props::V3Mutation> with = out;
      with.push_back({k, 0});
      if (props::v3_mutations_compose(spec, with)) kinds.push_back(k);
    }
    if (kinds.empty()) break;
    const props::V3MutationKind kind = kinds[props::splitmix64(seed) % kinds.size()];
    out.push_back({kind, static_cast<int64_t>(props::splitmix64(seed) % 256)});
  }
  return out;
}

// A v3 case: the generator's case with its named mutations (none: valid in both modes), each
// mode's verdict against the v3 spec model (casegen/v3_spec_model.h: the rule and message
// the mutations declare, never computed by the validator); a case strict accepts, the
// tiled kernel against the v3 reference in the kernel semantics (v3_compare: the updated cache
// bit for bit, out within the derived tolerance). The reference semantics is not the
// kernel's: its tolerance (oracle/v3_compare.h) bounds tpu-inference's own ref, so the kernel
// is not judged against it here. The check's power (the least dropped key weight caught,
// whether an all-zero output fails) and its error / tolerance are tallied per dialect and
// dtype pair.
// hex: the replay hex of the call (a production recipe's or the spec's; the mutations are
// named in a finding's line).
void run_v3_spec(const props::V3CaseSpec& spec, std::span<const props::V3Mutation> mutations,
                 const std::string& hex, int64_t i, Stats& st) {
  const Dialect d = spec.dialect;
  const std::string name(dialect_name(d));
  ++st.v3_cases[name];  // Stats::cases and validation_checks count the jax dialect's
  if (!mutations.empty()) ++st.v3_mutated[name];
  const props::V3MutatedCase mutated = props::mutate_v3(spec, mutations);
  const props::V3Materialized& m = mutated.call;
  bool strict_valid = false;
  for (int k = 0; k < 2; ++k) {
    const Mode mode = kV3Modes[k];
    const std::optional<V3Failure> want = props::expected_v3_failure(mutated.declared, mode);
    const std::optional<V3Failure> got = v3_validate(d, m.inputs, m.params, mode);
    ++st.v3_verdicts[k][name][got ? std::string(v3_rule_info(got->rule).name) : "valid"];
    if (got != want) {
      record(st, {i, "v3 validation (" + std::string(v3_mode_name(mode)) + ")",
                  name + ", mutations " + props::describe_v3_mutations(mutations) +
                      ": spec model: " + props::v3_verdict_text(want) +
                      " | validate: " + props::v3_verdict_text(got),
                  hex, ""});
    }
    if (mode == Mode::kStrict) strict_valid = !got && !want;
  }
  // The kernel runs on every case strict accepts, a mutation's valid side included (k_scale
  // of the largest float32, finite as strict asks: the rows where a float32 kernel's logits
  // may leave float32's range are left out of the comparison and counted, finding 28).
  if (!strict_valid) return;
  const V3KernelResult k =
      v3_tiled_attention(d, m.inputs, m.params, {.threads = static_cast<int>(i / 4 % 2) + 1});
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  const V3Comparison c = v3_compare(d, m.inputs, m.params, ref, k.out, k.kv_cache);
  ++st.v3_kernel_checks;
  const std::string key = name + " " + std::string(dtype_name(m.inputs.queries.dtype())) + "/" +
                          std::string(dtype_name(m.inputs.kv_cache.dtype()));
  ++st.v3_pair_checks[key];
  keep_v3_worst(st, key, c.max_share, c.tolerance_at_max);
  if (c.past_float32 > 0) {
    ++st.v3_past_float32_checks;
    st.v3_past_float32_pairs += c.past_float32;
  }
  ++st.v3_budget_histogram[key][budget_bin(c.agree() ? c.max_share : INFINITY)];
  // The check's power, as for the jax dialect's kernel-semantics checks, over the unmutated
  // cases: a mutation's valid side (a scale of float32's largest value) can leave a check no
  // power at all (logit errors past any weight: the allowance's cap of 2 max |v|), which says
  // nothing of the checks the generator's calls get.
  if (mutations.empty()) {
    if (std::isfinite(c.min_detectable_key_weight)) {
      st.v3_key_weights[key].push_back(c.min_detectable_key_weight);
    }
    if (c.compared > 0 && !c.rejects_zero) ++st.v3_could_not_reject_zero;
  }
  if (!c.agree()) {
    record(st, {i, "v3 kernel vs reference (kernel semantics)",
                name + (mutations.empty() ? std::string()
                                          : ", mutations " + props::describe_v3_mutations(mutations)) +
                    ": " + describe_v3_comparison(c),
                hex, ""});
  }
}

// The v3 cases alternate valid and mutated per dialect (i / 8 odd: one or two mutations).
// replay, note: set first to the case's replay hex and the mutations it carries, for a finding
// of the caller's (an exception).
void run_v3_case(Dialect d, uint64_t seed, int64_t i, int max_size, Stats& st, std::string& replay,
                 std::string& note) {
  props::V3BuildOptions options;
  options.dialect = d;
  const uint64_t s = case_seed(seed, i);
  const props::V3CaseSpec spec = props::seeded_v3_spec(s, static_cast<int>(i % (max_size + 1)), options);
  const std::vector<props::V3Mutation> mutations =
      (i / 8) % 2 == 0 ? std::vector<props::V3Mutation>{}
                       : seeded_v3_mutations(spec, s ^ 0x5bd1e995u, 1 + static_cast<int>((i / 16) % 2));
  replay = props::v3_spec_hex(spec);
  if (!mutations.empty()) note = " (mutations " + props::describe_v3_mutations(mutations) + ")";
  run_v3_spec(spec, mutations, replay, i, st);
}

// --profile production: case i is a production call (casegen/production.h) of jax,
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
    run_v3_spec(props::production_v3_case(spec), {}, hex, i, st);
  } else {
    run_case(props::production_case(spec), hex, i, passes, st);
  }
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
  const std::string tag = report ? "" : "-" + std::to_string(getpid());
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
        } else if (const std::optional<Dialect> d = v3_dialect_of(i)) {
          run_v3_case(*d, seed, i, st.max_size, mine, replay, note);
        } else {
          // The jax cases keep their own numbering (even valid, odd mutated).
          const props::CaseSpec spec = case_spec(seed, i - (i + 1) / 4, st.max_size);
          replay = props::spec_hex(spec);
          run_case(spec, "", i, passes, mine);
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
