// The commands' dialect registry: the one cli/ file that names every dialect. Adding a dialect
// adds its entry here (docs/layout.md's checklist).
#include "cli/dialect_commands.h"

#include <array>
#include <stdexcept>
#include <string>

#include "cli/jax_bench.h"
#include "cli/jax_campaign.h"
#include "cli/jax_commands.h"
#include "cli/jax_gen.h"
#include "cli/v3_bench.h"
#include "cli/v3_campaign.h"
#include "cli/v3_commands.h"
#include "cli/v3_gen.h"

namespace rpa {
namespace {

constexpr std::array<DialectCommands, 3> kRegistry = {{
    {.dialect = Dialect::kJax,
     .run = run_jax,
     .bench_prefix = "",
     .bench_workload = bench_jax_workload,
     .campaign_case = jax_campaign_case,
     .campaign_production = jax_campaign_production,
     .write_finding_file = jax_write_finding_file,
     .gen_spec_prefix = "",
     .gen = gen_jax},
    {.dialect = Dialect::kTpuInferenceV3,
     .run = run_v3,
     .bench_prefix = "v3-",
     .bench_workload = bench_v3_workload,
     .campaign_case = v3_campaign_case,
     .campaign_production = v3_campaign_production,
     .write_finding_file = v3_write_finding_file,
     .gen_spec_prefix = props::kV3SpecPrefix,
     .gen = gen_v3_dialect},
    {.dialect = Dialect::kTpuInferenceV3Hd64,
     .run = run_v3,
     .campaign_case = v3_campaign_case,
     .campaign_production = v3_campaign_production,
     .write_finding_file = v3_write_finding_file,
     .gen_spec_prefix = props::kV3SpecPrefix,
     .gen = gen_v3_dialect},
}};

}  // namespace

const DialectCommands& dialect_commands(Dialect d) {
  for (const DialectCommands& e : kRegistry) {
    if (e.dialect == d) return e;
  }
  throw std::logic_error("dialect " + std::string(dialect_name(d)) + " has no commands");
}

}  // namespace rpa
