// A campaign's mergeable state, DIR/campaign-state.txt next to its report: every tally of
// Stats and the run's identity (CampaignRun), so that `rpa merge` can combine the shards of a
// job array into the report an unsharded run of the same cases writes.
//
// Text, one record per line: a first line naming the format and its version
// ("rpa-campaign-state 1"), then records of space-separated tokens, the first naming the
// field (`cases 240`, `pair_checks "float32/float32" 17`, `finding 12 "check" "detail" "spec"
// "raw"`), and a last line `end` (a file cut short has none). Strings are in double quotes
// with \\, \" and \xHH for every byte outside printable ASCII, so any byte round-trips;
// doubles are C's %a (hexadecimal, exact; inf, -inf, nan), read back with strtod.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "cli/campaign_run.h"
#include "cli/campaign_stats.h"

namespace rpa {

inline constexpr const char* kCampaignStateFile = "campaign-state.txt";

struct CampaignState {
  CampaignRun run;
  Stats stats;
};

std::string campaign_state_text(const Stats& st, const CampaignRun& run);

// The state, or a one-line error naming the file and the line: "NAME: line 7: ...".
struct CampaignStateRead {
  std::optional<CampaignState> state;
  std::string error;
};
CampaignStateRead parse_campaign_state(std::string_view text, const std::string& name);
CampaignStateRead read_campaign_state(const std::filesystem::path& file);

}  // namespace rpa
