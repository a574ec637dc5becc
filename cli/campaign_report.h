// `rpa campaign --report DIR` writes DIR/report.html: one self-contained page (no JavaScript,
// nothing fetched; charts as inline SVG) with the run, per q/kv dtype pair a histogram of
// error / tolerance (kernel vs reference, kernel semantics), the rule coverage per mode with
// the rules no case reached highlighted, and every finding with its replay command and the
// case file written next to the page.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/campaign_run.h"
#include "cli/campaign_stats.h"

namespace rpa {

struct ReportedFinding {
  Finding finding;
  std::string replay;     // the command that replays it
  std::string case_file;  // its case (or raw bytes) next to the report, "" if none
};

// The command that replays a finding: from its spec (rpa gen --spec), its raw bytes
// (fuzz_raw_inputs) or the Pallas cross-check; given file, the case or bytes written there.
std::string finding_replay(const Finding& f, const std::string& file = "");

// Writes each finding's case next to the report: finding-N.npz from its spec, or
// finding-N.bin with a raw call's bytes; the replay commands then name those files.
std::vector<ReportedFinding> write_finding_files(const Stats& st, const std::filesystem::path& dir);

std::string campaign_report_html(const Stats& st, const CampaignRun& run,
                                 const std::vector<ReportedFinding>& findings);

// "AMD EPYC 7B13 (2 cores)": bench::cpu_model_name() and the core count.
std::string machine_description();

}  // namespace rpa
