// rpa gen for the v3 dialects (cli/v3_gen.h): the spec from the seed or the 'v3:' hex, its case
// file, and the v3 validators' verdicts (v3 generated cases are all valid).
#include "cli/v3_gen.h"

#include <cstdio>
#include <optional>
#include <string>

#include "casefile/case_file.h"
#include "cli/cli_args.h"
#include "cli/exit_codes.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_generate.h"
#include "casegen/v3_materialize.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

std::string v3_verdict_text(const std::optional<V3Failure>& f) {
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "valid";
}

// The v3 half of gen: the spec from the seed or the hex, its case file, the report.
int gen_v3(Dialect dialect, std::optional<uint64_t> seed, std::optional<int> size,
           const std::string& spec_text, const props::GenRequest& request,
           const std::string& output, const std::optional<TargetProfile>& features) {
  props::V3CaseSpec spec;
  if (seed) {
    const props::V3GenOptions options = props::v3_gen_options(dialect, request);
    if (!options.options) return usage_error(options.error);
    spec = props::seeded_v3_spec(*seed, size.value_or(100), *options.options);
  } else {
    std::optional<props::V3CaseSpec> decoded = props::v3_spec_from_hex(spec_text);
    if (!decoded) {
      return usage_error("--spec takes the hex a property or rpa gen printed, whole (" +
                         std::to_string(spec_text.size()) + " characters given)");
    }
    spec = std::move(*decoded);
  }
  const props::V3Materialized m = props::materialize_v3(spec);
  Case c;
  c.dialect = spec.dialect;
  c.v3_inputs = m.inputs;
  c.v3_params = m.params;
  if (std::string err; !write_case_file(output, c, &err)) {
    std::fprintf(stderr, "rpa: %s\n", err.c_str());
    return kExitUnreadable;
  }
  // A long-tier call is past the codec's bounds: its case file is what replays it.
  const std::string hex = props::v3_spec_encodes(spec)
                              ? props::v3_spec_hex(spec)
                              : "none (past the codec's bounds: the case file replays it)";
  std::printf("%s\n  spec: %s\n  expected strict: %s\n  expected native: %s\nwrote %s\n",
              props::describe(spec).c_str(), hex.c_str(),
              v3_verdict_text(v3_validate(spec.dialect, m.inputs, m.params, Mode::kStrict)).c_str(),
              v3_verdict_text(v3_validate(spec.dialect, m.inputs, m.params, Mode::kJax)).c_str(),
              output.c_str());
  print_features(c, features);
  return kExitOk;
}

}  // namespace

int gen_v3_dialect(std::optional<Dialect> requested, const GenArgs& a) {
  // A v3 spec names its dialect; --dialect, if given, must agree.
  if (!a.seed && a.spec_text.starts_with(props::kV3SpecPrefix)) {
    const std::optional<props::V3CaseSpec> decoded = props::v3_spec_from_hex(a.spec_text);
    if (decoded && requested && *requested != decoded->dialect) {
      return usage_error("--spec names dialect " + std::string(dialect_name(decoded->dialect)) +
                         ", not " + std::string(dialect_name(*requested)));
    }
    return gen_v3(decoded ? decoded->dialect : Dialect::kTpuInferenceV3, a.seed, a.size,
                  a.spec_text, a.request, a.output, a.features);
  }
  if (!a.seed) {
    return usage_error("--spec for dialect " + std::string(dialect_name(*requested)) +
                       " takes the 'v3:' hex rpa gen printed");
  }
  return gen_v3(*requested, a.seed, a.size, a.spec_text, a.request, a.output, a.features);
}

}  // namespace rpa
