#include "cli/campaign_stats.h"

#include <algorithm>
#include <cmath>

#include "core/dialect.h"
#include "service/dialect_ops.h"
#include "service/number_text.h"

namespace rpa {

// Both v3 dialects name their modes alike.
std::string_view v3_verdict_mode_name(Mode m) { return mode_label(Dialect::kTpuInferenceV3, m); }

int budget_bin(double used) {
  if (used == 0.0) return 0;
  if (!(used <= 1.0)) return kBudgetBins - 1;  // above 1, or NaN
  if (used < 1e-5) return 1;
  // Half decades: 1e-5 .. 10^-4.5 is bin 2, ..., 10^-0.5 .. 1 is bin 11.
  const int k = static_cast<int>(std::floor(2.0 * (std::log10(used) + 5.0)));
  return std::clamp(k, 0, 9) + 2;
}

// The half-decade edges 10^(-5 + k/2), k = 0..10, rounded for labels.
constexpr const char* kEdges[] = {"1e-5",  "3e-5", "1e-4", "3e-4", "0.001", "0.003",
                                  "0.01",  "0.03", "0.1",  "0.3",  "1"};

std::string budget_bin_label(int bin) {
  if (bin == 0) return "0";
  if (bin == 1) return "<1e-5";
  if (bin == kBudgetBins - 1) return ">1";
  return std::string(kEdges[bin - 2]) + ".." + kEdges[bin - 1];
}

std::string budget_bin_axis_label(int bin) {
  if (bin <= 1 || bin == kBudgetBins - 1) return budget_bin_label(bin);
  return kEdges[bin - 2];
}

void record(Stats& st, Finding f) {
  ++st.findings_total;
  ++st.findings_by_check[f.check];
  if (st.findings.size() < kMaxFindings) st.findings.push_back(std::move(f));
}

void keep_v3_worst(Stats& st, const std::string& key, double share, double tolerance) {
  const auto it = st.v3_worst_share.find(key);
  if (it != st.v3_worst_share.end() &&
      (share < it->second ||
       (share == it->second && tolerance <= st.v3_tolerance_at_worst.at(key)))) {
    return;
  }
  st.v3_worst_share[key] = share;
  st.v3_tolerance_at_worst[key] = tolerance;
}

void merge_into(Stats& to, const Stats& from) {
  to.cases += from.cases;
  to.mutated += from.mutated;
  to.validation_checks += from.validation_checks;
  to.kernel_checks += from.kernel_checks;
  to.raw_calls += from.raw_calls;
  to.raw_strict_accepted += from.raw_strict_accepted;
  to.raw_ran += from.raw_ran;
  for (int k = 0; k < 2; ++k) {
    for (const auto& [rule, n] : from.verdicts[k]) to.verdicts[k][rule] += n;
  }
  for (const auto& [pair, w] : from.worst_budget) to.worst_budget[pair] = std::max(to.worst_budget[pair], w);
  for (const auto& [pair, w] : from.worst_budget_reference) {
    to.worst_budget_reference[pair] = std::max(to.worst_budget_reference[pair], w);
  }
  for (const auto& [pair, w] : from.worst_discrimination) {
    to.worst_discrimination[pair] = std::max(to.worst_discrimination[pair], w);
  }
  for (const auto& [pair, w] : from.key_weights) {
    std::vector<double>& mine = to.key_weights[pair];
    mine.insert(mine.end(), w.begin(), w.end());
  }
  for (const auto& [key, w] : from.v3_key_weights) {
    std::vector<double>& mine = to.v3_key_weights[key];
    mine.insert(mine.end(), w.begin(), w.end());
  }
  to.v3_could_not_reject_zero += from.v3_could_not_reject_zero;
  to.v3_past_float32_checks += from.v3_past_float32_checks;
  to.v3_past_float32_pairs += from.v3_past_float32_pairs;
  to.reach.merge(from.reach);
  for (const auto& [pair, n] : from.pair_checks) to.pair_checks[pair] += n;
  for (const auto& [pair, h] : from.budget_histogram) {
    BudgetHistogram& mine = to.budget_histogram[pair];
    for (int b = 0; b < kBudgetBins; ++b) mine[b] += h[b];
  }
  for (const auto& [pair, n] : from.biased) to.biased[pair] += n;
  to.could_not_reject_zero += from.could_not_reject_zero;
  for (const auto& [d, n] : from.v3_cases) to.v3_cases[d] += n;
  for (const auto& [d, n] : from.v3_mutated) to.v3_mutated[d] += n;
  for (const auto& [key, h] : from.v3_budget_histogram) {
    BudgetHistogram& mine = to.v3_budget_histogram[key];
    for (int b = 0; b < kBudgetBins; ++b) mine[b] += h[b];
  }
  for (int k = 0; k < 2; ++k) {
    for (const auto& [d, rules] : from.v3_verdicts[k]) {
      for (const auto& [rule, n] : rules) to.v3_verdicts[k][d][rule] += n;
    }
  }
  to.v3_kernel_checks += from.v3_kernel_checks;
  for (const auto& [key, n] : from.v3_pair_checks) to.v3_pair_checks[key] += n;
  for (const auto& [key, w] : from.v3_worst_share) {
    keep_v3_worst(to, key, w, from.v3_tolerance_at_worst.at(key));
  }
  if (!from.pallas.empty()) to.pallas += (to.pallas.empty() ? "" : "; ") + from.pallas;
  to.findings_total += from.findings_total;
  for (const auto& [check, n] : from.findings_by_check) to.findings_by_check[check] += n;
  to.findings.insert(to.findings.end(), from.findings.begin(), from.findings.end());
  std::stable_sort(to.findings.begin(), to.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.case_index < b.case_index; });
  if (to.findings.size() > kMaxFindings) to.findings.resize(kMaxFindings);
}

std::string v3_past_float32_text(const Stats& st, const std::string& lead) {
  std::string s = lead;
  s += std::to_string(st.v3_past_float32_checks);
  s += " kernel checks left out ";
  s += std::to_string(st.v3_past_float32_pairs);
  s += " (row, head) pairs where a float32 kernel's logits may leave float32's range "
       "(finding 28).";
  return s;
}

std::string key_weight_text(const KeyWeights& weights, const std::string& key) {
  const auto it = weights.find(key);
  if (it == weights.end() || it->second.empty()) return "-";
  std::vector<double> w = it->second;
  const auto mid = w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2);
  std::nth_element(w.begin(), mid, w.end());
  return formatted(*mid, "%.2g") + " / " + formatted(*std::max_element(w.begin(), w.end()), "%.2g");
}

}  // namespace rpa
