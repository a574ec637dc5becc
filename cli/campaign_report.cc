#include "cli/campaign_report.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "harness/workloads.h"
#include "cli/dialect_commands.h"
#include "cli/xml_escape.h"
#include "core/dialect.h"
#include "core/python_repr.h"
#include "service/dialect_ops.h"
#include "service/number_text.h"

namespace rpa {
namespace {

std::string num(double v, const char* format = "%.3g") { return formatted(v, format); }

std::string count(int64_t n) { return py_int_repr(n); }

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 13px; }
th { background: #f0f0f0; } td.n, td.v { text-align: right; font-variant-numeric: tabular-nums; }
td.unreached { background: #ffd6d6; color: #900; font-weight: bold; }
td.na { color: #aaa; }
.chart { display: inline-block; width: 500px; margin: 6px 18px 12px 0; vertical-align: top; }
.chart h3 { font-size: 14px; margin: 4px 0; }
svg text { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 10px; fill: #333; }
rect.bar { fill: #3366cc; } rect.bar.over { fill: #cc3333; }
code { background: #f4f4f4; padding: 1px 4px; font-size: 12px; word-break: break-all; }
.ok { color: #060; } .bad { color: #b00; font-weight: bold; }
)";

// One pair's histogram: bars of height proportional to each bin's count (the tallest bin
// full height), the count above each bar, the bin's range below.
std::string histogram_svg(const std::string& pair, const BudgetHistogram& h) {
  const int bar = 28, gap = 6, left = 10, top = 18, height = 120, bottom = 46;
  const int width = left + kBudgetBins * (bar + gap) + 10;
  const int64_t tallest = std::max<int64_t>(1, *std::max_element(h.begin(), h.end()));
  std::string s = "<svg class=\"histogram\" data-pair=\"" +
                  xml_escape(pair) + "\" width=\"" + std::to_string(width) + "\" height=\"" +
                  std::to_string(top + height + bottom) + "\" role=\"img\" aria-label=\"" +
                  xml_escape("error / tolerance histogram for " + pair) + "\">\n";
  s += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(top + height) +
       "\" x2=\"" + std::to_string(width - 10) + "\" y2=\"" + std::to_string(top + height) +
       "\" stroke=\"#888\"/>\n";
  for (int b = 0; b < kBudgetBins; ++b) {
    const int x = left + b * (bar + gap);
    const int bar_h = h[b] == 0 ? 0
                                : std::max(2, static_cast<int>(static_cast<double>(height) *
                                                               static_cast<double>(h[b]) /
                                                               static_cast<double>(tallest)));
    s += "<rect class=\"bar" + std::string(b == kBudgetBins - 1 ? " over" : "") + "\" data-bin=\"" +
         xml_escape(budget_bin_label(b)) + "\" data-count=\"" + count(h[b]) + "\" x=\"" +
         std::to_string(x) + "\" y=\"" + std::to_string(top + height - bar_h) + "\" width=\"" +
         std::to_string(bar) + "\" height=\"" + std::to_string(bar_h) + "\"/>\n";
    s += "<text x=\"" + std::to_string(x + bar / 2) + "\" y=\"" +
         std::to_string(top + height - bar_h - 3) + "\" text-anchor=\"middle\">" + count(h[b]) +
         "</text>\n";
    s += "<text transform=\"translate(" + std::to_string(x + bar / 2 + 3) + "," +
         std::to_string(top + height + 8) + ") rotate(50)\">" + xml_escape(budget_bin_axis_label(b)) +
         "</text>\n";
  }
  return s + "</svg>\n";
}

std::string row(std::initializer_list<std::string> cells) {
  std::string s = "<tr>";
  for (const std::string& c : cells) s += c;
  return s + "</tr>\n";
}

std::string td(const std::string& text, const char* cls = nullptr) {
  return std::string("<td") + (cls ? std::string(" class=\"") + cls + "\"" : "") + ">" + text +
         "</td>";
}

}  // namespace

std::string finding_replay(const Finding& f, const std::string& file) {
  if (f.check == "pallas") {
    return "build/venv/bin/python -m rpa.jax.cross_check --pallas N --seed S, or for the v3 "
           "kernels build/v3venv/bin/python -m rpa.jax.v3_cross_check --cases 0 --reference 0 "
           "--scenarios none --pallas 2N --seed S (the N and S above; the finding names which)";
  }
  if (!f.raw.empty()) {
    if (!file.empty()) return "build/release/fuzz/fuzz_raw_inputs " + file;
    return "python3 -c \"open('raw.bin', 'wb').write(bytes.fromhex('" + f.raw +
           "'))\" && build/release/fuzz/fuzz_raw_inputs raw.bin";
  }
  const std::string path = file.empty() ? "case.npz" : file;
  const std::string command =
      "rpa " + (f.check.starts_with("v3 validation (native)") ? "validate --mode native " + path
                : f.check.starts_with("v3 validation")  ? "validate " + path
                : f.check.starts_with("validation (jax)") ? "validate --mode jax " + path
                : f.check.starts_with("validation")     ? "validate " + path
                : f.check.ends_with("(reference semantics)")
                    ? "check " + path + " --semantics reference"
                    : "check " + path);
  return file.empty() ? "rpa gen --spec " + f.spec + " -o case.npz && " + command : command;
}

std::vector<ReportedFinding> write_finding_files(const Stats& st, const std::filesystem::path& dir) {
  std::vector<ReportedFinding> out;
  for (size_t n = 0; n < st.findings.size(); ++n) {
    const Finding& f = st.findings[n];
    ReportedFinding r{f, finding_replay(f), ""};
    const std::string stem = "finding-" + std::to_string(n + 1);
    // Whatever goes wrong writing one finding's file (an exception finding's spec may be the
    // case that threw), the page still lists it, with the command that needs no file.
    try {
      // The first dialect whose finding it is writes it (JAX's: a raw call's bytes or a jax
      // spec's case; the v3 dialects': a v3 spec's case).
      for (const Dialect d : kDialects) {
        if (const std::optional<std::string> file =
                dialect_commands(d).write_finding_file(f, dir, stem)) {
          r.case_file = *file;
          break;
        }
      }
    } catch (const std::exception&) {
      r.case_file.clear();
    }
    if (!r.case_file.empty()) r.replay = finding_replay(f, (dir / r.case_file).string());
    out.push_back(std::move(r));
  }
  return out;
}

std::string machine_description() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return bench::cpu_model_name() + " (" + std::to_string(cores) + (cores == 1 ? " core)" : " cores)");
}

std::string campaign_report_html(const Stats& st, const CampaignRun& run,
                                 const std::vector<ReportedFinding>& findings) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<title>rpa campaign, seed " + std::to_string(run.seed) + "</title>\n<style>" +
       std::string(kStyle) + "</style>\n</head>\n<body>\n";
  h += "<h1>rpa campaign: " +
       std::string(st.findings_total == 0 ? "<span class=\"ok\">no findings</span>"
                                          : "<span class=\"bad\">" + count(st.findings_total) +
                                                " findings</span>") +
       "</h1>\n";

  h += "<h2 id=\"run\">The run</h2>\n<table>\n";
  h += row({td("started"), td(xml_escape(run.started))});
  h += row({td("seed"), td(std::to_string(run.seed))});
  h += row({td("seconds"),
            td(num(run.seconds, "%.1f") +
               (run.cases_asked > 0 ? " (" + std::to_string(run.cases_asked) + " cases asked)"
                                    : " (asked " + std::to_string(run.seconds_asked) + ")"))});
  if (!run.shard.whole()) {
    h += row({td("shard"), td(shard_text(run.shard) + " (the case indices i with i % " +
                              std::to_string(run.shard.count) + " == " +
                              std::to_string(run.shard.index) + ")")});
  }
  h += row({td("sizes"), td("0.." + std::to_string(st.max_size))});
  h += row({td("machine"), td(xml_escape(run.machine) + ", " + std::to_string(run.workers) +
                                 " workers")});
  h += row({td("cases"), td(count(st.cases) + " (" + count(st.cases - st.mutated) + " valid, " +
                               count(st.mutated) + " with named mutations)")});
  {
    std::string v3 = "-";
    for (const auto& [d, n] : st.v3_cases) {
      const auto mutated = st.v3_mutated.find(d);
      v3 = (v3 == "-" ? "" : v3 + ", ") + count(n) + " " + xml_escape(d) + " (" +
           count(mutated == st.v3_mutated.end() ? 0 : mutated->second) + " with named mutations)";
    }
    h += row({td("tpu-inference v3 cases"), td(v3)});
  }
  h += row({td("cases / s"), td(num(run.seconds > 0 ? static_cast<double>(st.cases) / run.seconds
                                                     : 0.0,
                                     "%.0f"))});
  h += row({td("checks"), td(count(st.validation_checks) + " validation vs spec model, " +
                                count(st.kernel_checks) + " kernel vs reference, " +
                                count(st.raw_calls) + " raw calls, " +
                                count(st.v3_kernel_checks) + " v3 kernel vs v3 reference")});
  h += row({td("Pallas kernel"), td(xml_escape(st.pallas.empty() ? "not run" : st.pallas))});
  h += "</table>\n";

  h += "<h2 id=\"error\">Kernel vs reference: error / tolerance</h2>\n";
  h += "<p>Per strict-valid case, the largest |kernel &minus; reference| over its tolerance "
       "(kernel semantics); 1 is the tolerance, a bar past it a mismatch.</p>\n";
  for (const auto& [pair, hist] : st.budget_histogram) {
    const auto biased = st.biased.find(pair);
    h += "<div class=\"chart\"><h3>q/kv " + xml_escape(pair) + ": " +
         count(st.pair_checks.count(pair) ? st.pair_checks.at(pair) : 0) + " checks, most " +
         num(st.worst_budget.count(pair) ? st.worst_budget.at(pair) : 0.0) + " of tolerance, " +
         count(biased == st.biased.end() ? 0 : biased->second) +
         " biased; least dropped key weight caught, median / largest: " +
         xml_escape(key_weight_text(st.key_weights, pair)) + "</h3>\n" +
         histogram_svg(pair, hist) + "</div>\n";
  }
  if (st.budget_histogram.empty()) h += "<p>No strict-valid case reached the kernel.</p>\n";

  h += "<h2 id=\"rules\">Rule coverage</h2>\n";
  h += "<p>How many cases each rule rejected, per mode. <span class=\"bad\">Highlighted</span>: "
       "a rule of that mode no case reached.</p>\n<table>\n";
  h += "<tr><th>rule</th><th>strict</th><th>jax</th></tr>\n";
  int unreached = 0;
  const auto cell = [&](const std::string& name, int k, bool in_mode) {
    if (!in_mode) return td("&mdash;", "na");
    const auto it = st.verdicts[k].find(name);
    const int64_t n = it == st.verdicts[k].end() ? 0 : it->second;
    if (n == 0) ++unreached;
    return td(count(n), n == 0 ? "n unreached" : "n");
  };
  h += row({td("valid"), cell("valid", 0, true), cell("valid", 1, true)});
  for (const DialectRule& r : dialect_ops(Dialect::kJax).rules()) {
    const std::string name(r.name);
    h += row({td("<code>" + xml_escape(name) + "</code>"), cell(name, 0, r.in_strict),
              cell(name, 1, r.in_native)});
  }
  h += "</table>\n<p id=\"unreached\">" + std::to_string(unreached) +
       " (rule, mode) pairs never reached.</p>\n";

  // The v3 dialects: the same per dialect and mode (native: tpu-inference's own validators).
  h += "<h2 id=\"rules-v3\">Rule coverage: tpu-inference v3</h2>\n";
  h += "<p>How many v3 cases each rule rejected, per dialect and mode (native: tpu-inference's "
       "own validators, strict: the definition). <span class=\"bad\">Highlighted</span>: a rule "
       "of that dialect and mode no case reached.</p>\n<table id=\"rules-v3-table\">\n<tr><th>rule</th>";
  const Dialect v3_dialects[] = {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64};
  for (const Dialect d : v3_dialects) {
    for (const Mode m : kV3Modes) {
      h += "<th>" + xml_escape(std::string(dialect_name(d))) + " " + std::string(mode_label(d, m)) +
           "</th>";
    }
  }
  h += "</tr>\n";
  int v3_unreached = 0;
  const auto v3_cell = [&](const std::string& name, Dialect d, int k, bool in_mode) {
    if (!in_mode) return td("&mdash;", "na");
    const auto& per_dialect = st.v3_verdicts[k];
    const auto it = per_dialect.find(std::string(dialect_name(d)));
    int64_t n = 0;
    if (it != per_dialect.end()) {
      const auto r = it->second.find(name);
      n = r == it->second.end() ? 0 : r->second;
    }
    if (n == 0) ++v3_unreached;
    return td(count(n), n == 0 ? "n unreached" : "n");
  };
  const auto v3_row = [&](const std::string& name, auto in) {
    std::string r = "<tr>" + td(name == "valid" ? name : "<code>" + xml_escape(name) + "</code>");
    for (const Dialect d : v3_dialects) {
      for (int k = 0; k < 2; ++k) r += v3_cell(name, d, k, in(d, kV3Modes[k]));
    }
    return r + "</tr>\n";
  };
  h += v3_row("valid", [](Dialect, Mode) { return true; });
  // The v3 rule table, in its order (each v3 dialect's DialectOps::rules: the same rules, each
  // with the modes that dialect enforces it in).
  for (const DialectRule& r : dialect_ops(v3_dialects[0]).rules()) {
    const std::string name(r.name);
    h += v3_row(name, [&name](Dialect d, Mode m) {
      for (const DialectRule& rule : dialect_ops(d).rules()) {
        if (rule.name == name) return m == Mode::kJax ? rule.in_native : rule.in_strict;
      }
      return false;
    });
  }
  h += "</table>\n<p id=\"unreached-v3\">" + std::to_string(v3_unreached) +
       " (rule, dialect, mode) triples never reached.</p>\n";
  h += "<table id=\"v3-kernel\">\n<tr><th>dialect q/kv</th><th>cases</th><th>most of the "
       "tolerance used (kernel semantics)</th><th>tolerance there</th><th>least dropped key "
       "weight caught, median / largest</th></tr>\n";
  for (const auto& [key, w] : st.v3_worst_share) {
    // (class "v", not "n": a 0 here is a measurement, not an unreached rule)
    h += row({td(xml_escape(key)), td(count(st.v3_pair_checks.at(key)), "v"), td(num(w), "v"),
              td(num(st.v3_tolerance_at_worst.at(key)), "v"),
              td(xml_escape(key_weight_text(st.v3_key_weights, key)), "v")});
  }
  h += "</table>\n<p id=\"v3-zero\">" + count(st.v3_could_not_reject_zero) +
       " v3 kernel-semantics checks could not have rejected an all-zero output.</p>\n";
  h += "<p id=\"v3-past-float32\">" + xml_escape(v3_past_float32_text(st, "")) + "</p>\n";
  h += "<h2 id=\"error-v3\">tpu-inference v3, kernel vs reference: error / tolerance</h2>\n";
  h += "<p>Per strict-valid v3 case, the largest |kernel &minus; reference| over its tolerance "
       "(kernel semantics, oracle/v3_compare.h), per dialect and q/kv pair; 1 is the tolerance, "
       "a bar past it a mismatch.</p>\n<div id=\"v3-histograms\">\n";
  for (const auto& [key, hist] : st.v3_budget_histogram) {
    h += "<div class=\"chart\"><h3>" + xml_escape(key) + ": " +
         count(st.v3_pair_checks.count(key) ? st.v3_pair_checks.at(key) : 0) + " checks, most " +
         num(st.v3_worst_share.count(key) ? st.v3_worst_share.at(key) : 0.0) +
         " of tolerance</h3>\n" + histogram_svg(key, hist) + "</div>\n";
  }
  if (st.v3_budget_histogram.empty()) h += "<p>No strict-valid v3 case reached the kernel.</p>\n";
  h += "</div>\n";

  h += "<h2 id=\"findings\">Findings</h2>\n";
  if (findings.empty()) {
    h += "<p class=\"ok\">None.</p>\n";
  } else {
    if (st.findings_total > static_cast<int64_t>(findings.size())) {
      h += "<p>The first " + std::to_string(findings.size()) + " of " + count(st.findings_total) +
           ".</p>\n";
    }
    h += "<table>\n<tr><th>case</th><th>check</th><th>what</th><th>replay</th><th>file</th></tr>\n";
    for (const ReportedFinding& f : findings) {
      h += row({td(f.finding.case_index == INT64_MAX ? "-" : count(f.finding.case_index)),
                td(xml_escape(f.finding.check)), td(xml_escape(f.finding.detail)),
                td("<code>" + xml_escape(f.replay) + "</code>"),
                td(f.case_file.empty() ? "-"
                                       : "<a href=\"" + xml_escape(f.case_file) + "\">" +
                                             xml_escape(f.case_file) + "</a>")});
    }
    h += "</table>\n";
  }
  return h + "</body>\n</html>\n";
}

}  // namespace rpa
