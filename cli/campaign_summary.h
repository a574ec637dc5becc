// What a campaign's tallies are reported as: the summary on stdout, DIR/summary.json,
// DIR/summary.md, the report page and the finding files (cli/campaign_report.h), the state
// `rpa merge` reads (cli/campaign_state.h) and the JUnit report. `rpa campaign` and `rpa merge`
// both end in report_campaign, so a merge of shards writes what one run of the same cases
// writes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/campaign_run.h"
#include "cli/campaign_stats.h"
#include "cli/junit_report.h"

namespace rpa {

// The summary printed on stdout; its first line names the run (and the shard of a sharded one).
std::string summary_text(const Stats& st, const CampaignRun& run);
// DIR/summary.json: "shard" is "0/1" for an unsharded run and for a merge of every shard, and
// "cases_asked" is there when --cases bounded the run; only "seconds" is wall clock.
std::string summary_json(const Stats& st, const CampaignRun& run);
std::string summary_markdown(const Stats& st, const CampaignRun& run);
// One JUnit test case per check class: a failure when it found something.
std::vector<JunitCase> junit_cases(const Stats& st, double seconds);

// Makes the report directory and writes a placeholder summary.json: a bad --report fails
// before the run, not after it.
bool report_dir_writable(const std::string& dir);

// Prints the summary and writes the report (with report: DIR's summaries, page, finding
// files and campaign-state.txt) and the JUnit file (with junit). Returns the exit code: 0 no
// findings, 1 findings, 3 when a report could not be written (one line on stderr).
int report_campaign(const Stats& st, const CampaignRun& run,
                    const std::optional<std::string>& report,
                    const std::optional<std::string>& junit);

}  // namespace rpa
