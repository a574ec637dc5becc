// What `rpa campaign` tallies: per worker, merged at the end (and per shard, merged by `rpa
// merge` from each shard's state, cli/campaign_state.h), read by its summary (text, JSON,
// markdown, cli/campaign_summary.h), its HTML report (cli/campaign_report.h) and its JUnit
// report.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "casegen/production_reach.h"
#include "validation/mode.h"

namespace rpa {

struct Finding {
  int64_t case_index = 0;  // which case of the run found it (findings are kept in this order)
  std::string check;   // "validation (jax)", "kernel vs reference (...)", "raw call",
                       // "exception", "pallas"
  std::string detail;  // one line
  std::string spec;    // spec hex: rpa gen --spec replays it
  std::string raw;     // a raw call's bytes in hex: fuzz_raw_inputs replays them
};

// Error / tolerance of the kernel-semantics checks, in bins: exactly 0; below 1e-5; half
// decades from 1e-5 to 1 (10 bins); above 1 (a mismatch).
inline constexpr int kBudgetBins = 13;
using BudgetHistogram = std::array<int64_t, kBudgetBins>;
int budget_bin(double used);
std::string budget_bin_label(int bin);       // "0", "<1e-5", "1e-5..3e-5", ..., ">1"
std::string budget_bin_axis_label(int bin);  // "0", "<1e-5", "1e-5", "3e-5", ..., ">1"

// Least dropped key weights caught, every finite one, per key (a q/kv pair, or a v3 dialect
// and pair).
using KeyWeights = std::map<std::string, std::vector<double>>;

struct Stats {
  int max_size = 100;
  int64_t cases = 0, mutated = 0, validation_checks = 0, kernel_checks = 0;
  int64_t raw_calls = 0, raw_strict_accepted = 0, raw_ran = 0;
  std::map<std::string, int64_t> verdicts[2];  // per mode (strict, jax): rule (or "valid") -> count
  // "q/kv" dtypes -> most of the tolerance used, in the kernel semantics (the oracle's) and in
  // JAX's reference semantics, and the weakest check's discrimination (kernel semantics).
  std::map<std::string, double> worst_budget;
  std::map<std::string, double> worst_budget_reference;
  std::map<std::string, double> worst_discrimination;
  // The least weight of a dropped key each kernel-semantics check is sure to catch
  // (Comparison::min_detectable_key_weight), every finite one, per pair: the summary gives
  // the median and the largest.
  KeyWeights key_weights;
  std::map<std::string, int64_t> pair_checks;
  std::map<std::string, BudgetHistogram> budget_histogram;  // kernel semantics, per pair
  std::map<std::string, int64_t> biased;  // kernel-semantics checks found biased, per pair
  int64_t could_not_reject_zero = 0;  // kernel-semantics checks an all-zero output would pass
  int64_t findings_total = 0;
  std::map<std::string, int64_t> findings_by_check;  // Finding::check -> count
  std::vector<Finding> findings;  // the first kMaxFindings
  // The Pallas kernel cross-check: "" when not asked for, else its summary line.
  std::string pallas;
  // The tpu-inference v3 share of the cases (DESIGN.md section 16), per dialect name:
  // generated cases (half of them with named mutations, casegen/v3_mutation.h), each mode's
  // verdicts (native, strict: rule or "valid" -> count), and,
  // per "dialect q/kv" key, the tiled kernel's checks against the v3 reference (kernel
  // semantics, v3_compare: cache bit for bit, out within the tolerance): how many, the most
  // of the tolerance used, the largest tolerance at that worst element, and their power as
  // the jax dialect's above: every finite least dropped key weight caught
  // (V3Comparison::min_detectable_key_weight), the checks an all-zero output would pass, and
  // the error / tolerance histogram.
  std::map<std::string, int64_t> v3_cases;
  std::map<std::string, int64_t> v3_mutated;  // per dialect: the cases with named mutations
  std::map<std::string, std::map<std::string, int64_t>> v3_verdicts[2];  // kV3Modes order
  int64_t v3_kernel_checks = 0;
  std::map<std::string, int64_t> v3_pair_checks;
  std::map<std::string, double> v3_worst_share;
  std::map<std::string, double> v3_tolerance_at_worst;
  KeyWeights v3_key_weights;
  int64_t v3_could_not_reject_zero = 0;
  // Checks that left (row, head) pairs out of the comparison, where a float32 kernel's logits
  // may leave float32's range (V3Comparison::past_float32, finding 28), and those pairs.
  int64_t v3_past_float32_checks = 0;
  int64_t v3_past_float32_pairs = 0;
  std::map<std::string, BudgetHistogram> v3_budget_histogram;  // per "dialect q/kv" key
  // --profile production: what the production calls reached (empty otherwise).
  props::ProductionReach reach;
};

inline constexpr size_t kMaxFindings = 20;
inline constexpr Mode kModes[] = {Mode::kStrict, Mode::kJax};
// The v3 modes in the order of Stats::v3_verdicts: native (Mode::kJax), strict.
inline constexpr Mode kV3Modes[] = {Mode::kJax, Mode::kStrict};
// A v3 mode's name in the summary and the state file's v3_verdicts: the v3 dialects'
// mode_label (service/dialect_ops.h), "native" or "strict".
std::string_view v3_verdict_mode_name(Mode m);

void record(Stats& st, Finding f);

// Keeps the most of the tolerance a v3 check used for the key, with the tolerance there: of
// equal shares the larger tolerance, so that what a run reports does not depend on the order
// its cases, or its workers' and shards' tallies, come in.
void keep_v3_worst(Stats& st, const std::string& key, double share, double tolerance);

// The median and the largest of the key weights a key holds (Stats::key_weights per q/kv
// pair, Stats::v3_key_weights per dialect and pair; "-" for none): "0.00012 / 0.0031".
std::string key_weight_text(const KeyWeights& weights, const std::string& key);

// The v3 checks that left rows out past float32's range, as the summary, summary.md and the
// report page say it: LEAD + "3 kernel checks left out 40 (row, head) pairs where ...".
std::string v3_past_float32_text(const Stats& st, const std::string& lead);

// One worker's (or one shard's, `rpa merge`) tallies into the run's: counts add up, the
// worst budgets and discriminations are the worst of either, key weights are pooled, the
// Pallas line is the one that has it (one run of the job does the cross-check), and the
// findings are the first kMaxFindings by case index whatever the order of the merges: each
// side's list is its first findings by case index (a worker takes its cases in increasing
// order), and no case is in two of them, so ties (a case's several findings) keep their order.
void merge_into(Stats& to, const Stats& from);

}  // namespace rpa
