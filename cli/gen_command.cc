// rpa gen: one generated case as a case file, from a seed or from the hex a failing
// property prints, with the verdicts the spec model expects (jax dialect) or the v3
// validators' verdicts (v3 dialects, whose generated cases are all valid).
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>

#include "casefile/case_file.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "core/dialect.h"
#include "casegen/jax_case_codec.h"
#include "casegen/generate.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "service/path_features.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

std::string v3_verdict_text(const std::optional<V3Failure>& f) {
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "valid";
}

// --features: the path features of the call's program on the target (service/path_features.h),
// one "  feature NAME COUNT" line each, after the case.
void print_features(const Case& c, const std::optional<TargetProfile>& features) {
  if (!features) return;
  const PathFeatures f = case_path_features(c, *features);
  std::printf("  path features on %.*s (%zu):\n", static_cast<int>(features->name.size()),
              features->name.data(), f.size());
  for (const auto& [name, count] : f.counts()) {
    std::printf("  feature %s %lld\n", name.c_str(), static_cast<long long>(count));
  }
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

// The production profile: a recipe from the seed or its prod: hex, the call of its dialect,
// and the validators' verdicts (production calls are built valid; a rejection says which
// rule a serving-shaped call runs into).
int gen_production(Dialect dialect, bool dialect_given, std::optional<uint64_t> seed,
                   const std::string& spec_text, const std::string& output,
                   const std::optional<TargetProfile>& features) {
  props::ProductionSpec spec;
  if (seed) {
    spec = props::seeded_production_spec(*seed, dialect);
  } else {
    std::optional<props::ProductionSpec> decoded = props::production_spec_from_hex(spec_text);
    if (!decoded) {
      return usage_error("--spec takes the prod: hex rpa gen printed, whole (" +
                         std::to_string(spec_text.size()) + " characters given)");
    }
    spec = std::move(*decoded);
    if (dialect_given && spec.dialect != dialect) {
      return usage_error("--spec names dialect " + std::string(dialect_name(spec.dialect)) +
                         ", not " + std::string(dialect_name(dialect)));
    }
    dialect = spec.dialect;
  }
  Case c;
  c.dialect = dialect;
  std::string strict, native;
  if (is_v3(dialect)) {
    const props::V3Materialized m = props::materialize_v3(props::production_v3_case(spec));
    strict = v3_verdict_text(v3_validate(dialect, m.inputs, m.params, Mode::kStrict));
    native = v3_verdict_text(v3_validate(dialect, m.inputs, m.params, Mode::kJax));
    c.v3_inputs = m.inputs;
    c.v3_params = m.params;
  } else {
    const props::Materialized m = props::materialize(props::production_case(spec));
    strict = props::verdict_text(validate(m.inputs, m.params, {.mode = Mode::kStrict}));
    native = props::verdict_text(validate(m.inputs, m.params, {.mode = Mode::kJax}));
    c.inputs = m.inputs;
    c.params = m.params;
  }
  if (std::string err; !write_case_file(output, c, &err)) {
    std::fprintf(stderr, "rpa: %s\n", err.c_str());
    return kExitUnreadable;
  }
  std::printf("%s\n  spec: %s\n  strict: %s\n  %s: %s\nwrote %s\n", props::describe(spec).c_str(),
              props::production_spec_hex(spec).c_str(), strict.c_str(),
              is_v3(dialect) ? "native" : "jax", native.c_str(), output.c_str());
  print_features(c, features);
  return kExitOk;
}

}  // namespace

int gen_command(const std::vector<std::string_view>& args) {
  std::optional<uint64_t> seed;
  std::optional<int> size;
  std::string spec_text, profile, output;
  std::optional<int64_t> head_dim;
  std::optional<Dialect> dialect;
  bool has_spec = false;
  std::optional<TargetProfile> features;
  std::string_view target = default_target_profile().name;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--features") {
      features = default_target_profile();
      continue;
    }
    if (a != "--seed" && a != "--size" && a != "--spec" && a != "--profile" && a != "-o" &&
        a != "--head-dim" && a != "--dialect" && a != "--target") {
      return usage_error("unknown option " + std::string(a));
    }
    if (i + 1 >= args.size()) return usage_error(std::string(a) + " needs a value");
    const std::string_view v = args[++i];
    if (a == "--seed") {
      uint64_t s = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
      if (ec != std::errc() || end != v.data() + v.size()) {
        return usage_error("--seed takes a non-negative integer");
      }
      seed = s;
    } else if (a == "--size") {
      int n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 0 || n > props::kFullSize) {
        return usage_error("--size takes 0 to " + std::to_string(props::kFullSize));
      }
      size = n;
    } else if (a == "--spec") {
      spec_text = v;
      has_spec = true;
    } else if (a == "--dialect") {
      dialect = parse_dialect(v);
      if (!dialect) {
        return usage_error("--dialect takes jax, tpu_inference_v3 or tpu_inference_v3_hd64 (got '" +
                           std::string(v) + "')");
      }
    } else if (a == "--profile") {
      profile = v;
    } else if (a == "--target") {
      if (!find_target_profile(v)) {
        return usage_error("--target takes v2 v3 v4 v4i v5e v5p v6e 7x (got '" + std::string(v) + "')");
      }
      target = v;
    } else if (a == "--head-dim") {
      int64_t d = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
      if (ec != std::errc() || end != v.data() + v.size() || d < 1 || d > props::kMaxHeadDim) {
        return usage_error("--head-dim takes 1 to " + std::to_string(props::kMaxHeadDim));
      }
      head_dim = d;
    } else {
      output = v;
    }
  }
  if (seed.has_value() == has_spec) return usage_error("gen needs one of --seed and --spec");
  if (features) {
    features = find_target_profile(target);
  } else if (target != default_target_profile().name) {
    return usage_error("--target goes with --features (the program whose path features print)");
  }
  if (output.empty()) return usage_error("gen needs -o CASE.npz");
  if (!seed && (!profile.empty() || size || head_dim))
    return usage_error("--profile, --size and --head-dim go with --seed");
  if (profile == props::kProductionProfile || spec_text.starts_with(props::kProductionSpecPrefix)) {
    if (size || head_dim) {
      return usage_error("--size and --head-dim do not go with profile production (the model "
                         "and the bounds size its calls)");
    }
    return gen_production(dialect.value_or(Dialect::kJax), dialect.has_value(), seed, spec_text,
                          output, features);
  }
  // A v3 spec names its dialect; --dialect, if given, must agree.
  if (has_spec && spec_text.starts_with(props::kV3SpecPrefix)) {
    const std::optional<props::V3CaseSpec> decoded = props::v3_spec_from_hex(spec_text);
    if (decoded && dialect && *dialect != decoded->dialect) {
      return usage_error("--spec names dialect " + std::string(dialect_name(decoded->dialect)) +
                         ", not " + std::string(dialect_name(*dialect)));
    }
    return gen_v3(decoded ? decoded->dialect : Dialect::kTpuInferenceV3, seed, size, spec_text,
                  {.profile = profile, .head_dim = head_dim}, output, features);
  }
  if (dialect && is_v3(*dialect)) {
    if (has_spec) {
      return usage_error("--spec for dialect " + std::string(dialect_name(*dialect)) +
                         " takes the 'v3:' hex rpa gen printed");
    }
    return gen_v3(*dialect, seed, size, spec_text, {.profile = profile, .head_dim = head_dim},
                  output, features);
  }
  const props::GenOptions options = props::gen_options({.profile = profile, .head_dim = head_dim});
  if (!options.options) return usage_error(options.error);

  props::CaseSpec spec;
  if (seed) {
    spec = props::seeded_spec(*seed, size.value_or(100), *options.options);
  } else {
    std::optional<props::CaseSpec> decoded = props::spec_from_hex(spec_text);
    if (!decoded) {
      return usage_error("--spec takes the hex a property or rpa gen printed, whole (" +
                         std::to_string(spec_text.size()) + " characters given)");
    }
    spec = std::move(*decoded);
  }
  const props::Materialized m = props::materialize(spec);
  Case c;
  c.inputs = m.inputs;
  c.params = m.params;
  if (std::string err; !write_case_file(output, c, &err)) {
    std::fprintf(stderr, "rpa: %s\n", err.c_str());
    return kExitUnreadable;
  }
  std::printf("%s\n  spec: %s\n  expected strict: %s\n  expected jax: %s\nwrote %s\n",
              props::describe(spec).c_str(), props::spec_hex(spec).c_str(),
              props::verdict_text(props::expected_failure(m, Mode::kStrict)).c_str(),
              props::verdict_text(props::expected_failure(m, Mode::kJax)).c_str(), output.c_str());
  print_features(c, features);
  return kExitOk;
}

}  // namespace rpa
