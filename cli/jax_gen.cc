// rpa gen for the jax dialect (cli/jax_gen.h): the spec from the seed or the hex a failing
// property prints, its case file, and the verdicts the spec model expects.
#include "cli/jax_gen.h"

#include <cstdio>
#include <optional>
#include <string>

#include "casefile/case_file.h"
#include "cli/cli_args.h"
#include "cli/exit_codes.h"
#include "casegen/jax_case_codec.h"
#include "casegen/jax_generate.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"

namespace rpa {

int gen_jax(std::optional<Dialect>, const GenArgs& a) {
  const props::GenOptions options = props::gen_options(a.request);
  if (!options.options) return usage_error(options.error);

  props::CaseSpec spec;
  if (a.seed) {
    spec = props::seeded_spec(*a.seed, a.size.value_or(100), *options.options);
  } else {
    std::optional<props::CaseSpec> decoded = props::spec_from_hex(a.spec_text);
    if (!decoded) {
      return usage_error("--spec takes the hex a property or rpa gen printed, whole (" +
                         std::to_string(a.spec_text.size()) + " characters given)");
    }
    spec = std::move(*decoded);
  }
  const props::Materialized m = props::materialize(spec);
  Case c;
  c.inputs = m.inputs;
  c.params = m.params;
  if (std::string err; !write_case_file(a.output, c, &err)) {
    std::fprintf(stderr, "rpa: %s\n", err.c_str());
    return kExitUnreadable;
  }
  std::printf("%s\n  spec: %s\n  expected strict: %s\n  expected jax: %s\nwrote %s\n",
              props::describe(spec).c_str(), props::spec_hex(spec).c_str(),
              props::verdict_text(props::expected_failure(m, Mode::kStrict)).c_str(),
              props::verdict_text(props::expected_failure(m, Mode::kJax)).c_str(), a.output.c_str());
  print_features(c, a.features);
  return kExitOk;
}

}  // namespace rpa
