// rpa campaign's cases of JAX's dialect (cli/dialect_commands.h's campaign fields, defined in
// cli/jax_campaign.cc): the generators' jax cases and the production profile's jax calls,
// checked against the spec model, the raw-call checks and the dense reference, and their
// findings' files next to the report.
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

// DialectCommands::campaign_case of the jax dialect (d is Dialect::kJax).
void jax_campaign_case(Dialect d, uint64_t seed, int64_t i, int max_size, DotPasses passes,
                       Stats& st, std::string& replay, std::string& note);
// DialectCommands::campaign_production of the jax dialect.
void jax_campaign_production(const props::ProductionSpec& spec, const std::string& hex,
                             int64_t i, DotPasses passes, Stats& st);
// DialectCommands::write_finding_file of the jax dialect: a raw call's bytes, or a jax spec's
// case.
std::optional<std::string> jax_write_finding_file(const Finding& f,
                                                  const std::filesystem::path& dir,
                                                  const std::string& stem);

}  // namespace rpa
