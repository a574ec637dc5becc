#include "cli/campaign_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "cli/campaign_report.h"
#include "cli/campaign_state.h"
#include "cli/exit_codes.h"
#include "core/python_repr.h"
#include "service/json_writer.h"

namespace rpa {
namespace {

bool write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
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
    const auto mutated = st.v3_mutated.find(dialect);
    s += "  " + dialect + ": " + std::to_string(n) + " cases (" +
         std::to_string(mutated == st.v3_mutated.end() ? 0 : mutated->second) +
         " with named mutations, checked against the v3 spec model)\n";
    for (int k = 0; k < 2; ++k) {
      s += "    " + std::string(v3_verdict_mode_name(kV3Modes[k])) + " verdicts:";
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

// ", shard I/N" for one shard of a job array, nothing for a whole run (or a merge of all).
std::string shard_words(const CampaignRun& run) {
  return run.shard.whole() ? "" : ", shard " + shard_text(run.shard);
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

}  // namespace

std::string summary_text(const Stats& st, const CampaignRun& run) {
  std::string s = "rpa campaign: " + py_float_repr(std::round(run.seconds * 10) / 10) +
                  " s, seed " + std::to_string(run.seed) + shard_words(run) + ", sizes 0.." +
                  std::to_string(st.max_size) + ": " + std::to_string(st.cases) + " cases (" +
                  std::to_string(st.cases - st.mutated) + " valid, " + std::to_string(st.mutated) +
                  " with mutations) and " + std::to_string(v3_case_count(st)) +
                  " tpu-inference v3 cases\n";
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
  s += '\n';
  s += v3_past_float32_text(st, "  v3 ");
  s += "\n  raw calls (fuzz_raw_inputs' decoder, valid cases with bytes changed): " +
       std::to_string(st.raw_calls) + ", strict accepted " +
       std::to_string(st.raw_strict_accepted) + ", run " + std::to_string(st.raw_ran);
  if (!st.reach.empty()) {
    s += "\n  production reach (each item: the calls that drew it):\n" + st.reach.text("    ");
    s.pop_back();
  }
  s += "\n  Pallas kernel (TPU interpret mode): " + pallas_line(st);
  s += "\n  findings: " + std::to_string(st.findings_total) + "\n";
  for (const Finding& f : st.findings) {
    s += "    " + f.check + ": " + f.detail + "\n      replay: " + finding_replay(f) + "\n";
  }
  return s;
}

std::string summary_json(const Stats& st, const CampaignRun& run) {
  JsonWriter j;
  j.begin_object().key("seconds").value(run.seconds);
  j.key("seed").value(static_cast<int64_t>(run.seed)).key("shard").value(shard_text(run.shard));
  if (run.cases_asked > 0) j.key("cases_asked").value(static_cast<int64_t>(run.cases_asked));
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
  j.end_object().key("mutated_cases").begin_object();
  for (const auto& [d, n] : st.v3_mutated) j.key(d).value(n);
  j.end_object();
  // The error / tolerance histograms: per dialect and pair, each bin's label and count.
  j.key("tolerance_histogram").begin_object();
  for (const auto& [key, h] : st.v3_budget_histogram) {
    j.key(key).begin_object();
    for (int b = 0; b < kBudgetBins; ++b) j.key(budget_bin_label(b)).value(h[b]);
    j.end_object();
  }
  j.end_object();
  for (int k = 0; k < 2; ++k) {
    j.key(std::string(v3_verdict_mode_name(kV3Modes[k])) + "_verdicts").begin_object();
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
  j.key("past_float32").begin_object().key("checks").value(st.v3_past_float32_checks);
  j.key("pairs").value(st.v3_past_float32_pairs).end_object();
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

std::string summary_markdown(const Stats& st, const CampaignRun& run) {
  std::string s = "# rpa campaign\n\n" + std::to_string(st.cases) + " cases in " +
                  py_float_repr(std::round(run.seconds * 10) / 10) + " s (seed " +
                  std::to_string(run.seed) + shard_words(run) +
                  "): " + std::to_string(st.cases - st.mutated) + " valid, " +
                  std::to_string(st.mutated) + " with named mutations.\n\n" +
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
    s += "| " + key + " | " + std::to_string(st.v3_pair_checks.at(key)) + " | " + py_float_repr(w) +
         " | " + py_float_repr(st.v3_tolerance_at_worst.at(key)) + " | " +
         key_weight_text(st.v3_key_weights, key) + " |\n";
  }
  s += "\n" + std::to_string(st.v3_could_not_reject_zero) +
       " v3 kernel-semantics checks could not have rejected an all-zero output.\n";
  s += '\n';
  s += v3_past_float32_text(st, "");
  s += '\n';
  if (!st.v3_budget_histogram.empty()) {
    // Error / tolerance, a row per dialect and pair, a column per bin.
    // (Appended piece by piece: GCC 12 -O3 reports a false -Wrestrict on " " + ... here.)
    const auto cell = [&s](const std::string& text) {
      s += ' ';
      s += text;
      s += " |";
    };
    s += "\n| dialect q / kv |";
    for (int b = 0; b < kBudgetBins; ++b) cell(budget_bin_label(b));
    s += "\n|---|";
    for (int b = 0; b < kBudgetBins; ++b) s += "---|";
    s += '\n';
    for (const auto& [key, h] : st.v3_budget_histogram) {
      s += "|";
      cell(key);
      for (int b = 0; b < kBudgetBins; ++b) cell(std::to_string(h[b]));
      s += '\n';
    }
  }
  s += "\n## Raw calls\n\n" + std::to_string(st.raw_calls) +
       " valid cases in fuzz_raw_inputs' raw form with one to four bytes changed: " +
       std::to_string(st.raw_strict_accepted) + " still strict-valid, " +
       std::to_string(st.raw_ran) + " run through the reference and the kernel.\n";
  if (!st.reach.empty()) {
    s += "\n## Production reach\n\n| dialect | calls | longest kv_len | most rows | highest "
         "position |\n|---|---|---|---|---|\n";
    for (const auto& [d, r] : st.reach.by_dialect()) {
      s += "| " + d + " | " + std::to_string(r.calls) + " | " + std::to_string(r.longest_kv_len) +
           " | " + std::to_string(r.most_rows) + " | " + std::to_string(r.highest_position) +
           " |\n";
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

bool report_dir_writable(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return !ec && write_text(std::filesystem::path(dir) / "summary.json", "{}\n");
}

int report_campaign(const Stats& st, const CampaignRun& run,
                    const std::optional<std::string>& report,
                    const std::optional<std::string>& junit) {
  std::printf("%s", summary_text(st, run).c_str());
  if (report) {
    const std::filesystem::path dir(*report);
    if (!write_text(dir / "summary.json", summary_json(st, run) + "\n") ||
        !write_text(dir / "summary.md", summary_markdown(st, run)) ||
        !write_text(dir / "report.html",
                    campaign_report_html(st, run, write_finding_files(st, dir))) ||
        !write_text(dir / kCampaignStateFile, campaign_state_text(st, run))) {
      std::fprintf(stderr, "rpa: cannot write the report to %s\n", report->c_str());
      return kExitUnreadable;
    }
    std::printf("report: %s/report.html, %s/summary.json, %s/summary.md, %s/%s\n", report->c_str(),
                report->c_str(), report->c_str(), report->c_str(), kCampaignStateFile);
  }
  if (junit) {
    if (const std::string err =
            write_junit(*junit, "rpa campaign", junit_cases(st, run.seconds), run.seconds);
        !err.empty()) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  return st.findings_total == 0 ? kExitOk : kExitMismatch;
}

}  // namespace rpa
