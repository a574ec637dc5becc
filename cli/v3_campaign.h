// rpa campaign's cases of tpu-inference's v3 dialects, kernel.py's and hd64's
// (cli/dialect_commands.h's campaign fields, defined in cli/v3_campaign.cc): the v3
// generator's cases with named mutations and the production profile's v3 calls, checked
// against the v3 spec model and the v3 reference, and their findings' files next to the
// report.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "cli/campaign_stats.h"
#include "core/dialect.h"
#include "oracle/dot_precision.h"

namespace rpa {

namespace props {
struct ProductionSpec;  // casegen/production.h
}  // namespace props

// DialectCommands::campaign_case of the v3 dialects (d: which; passes unused, the v3 checks
// take no dot passes).
void v3_campaign_case(Dialect d, uint64_t seed, int64_t i, int max_size, DotPasses passes,
                      Stats& st, std::string& replay, std::string& note);
// DialectCommands::campaign_production of the v3 dialects.
void v3_campaign_production(const props::ProductionSpec& spec, const std::string& hex,
                            int64_t i, DotPasses passes, Stats& st);
// DialectCommands::write_finding_file of the v3 dialects: a v3 spec's case (a "v3:" hex).
std::optional<std::string> v3_write_finding_file(const Finding& f,
                                                 const std::filesystem::path& dir,
                                                 const std::string& stem);

}  // namespace rpa
