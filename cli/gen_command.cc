// rpa gen: one generated case as a case file, from a seed or from the hex a failing
// property prints, with the verdicts the spec model expects (jax dialect) or the v3
// validators' verdicts (v3 dialects, whose generated cases are all valid): each dialect's part
// through cli/dialect_commands.h (gen; cli/jax_gen.cc, cli/v3_gen.cc); the production profile,
// of every dialect, here (its call through casegen/dialect_generator.h, its verdicts through
// service/dialect_ops.h).
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>

#include "casefile/case_file.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/dialect_commands.h"
#include "cli/exit_codes.h"
#include "cli/gen_args.h"
#include "core/dialect.h"
#include "casegen/dialect_generator.h"
#include "casegen/generate.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "service/dialect_ops.h"
#include "service/path_features.h"

namespace rpa {

void print_features(const Case& c, const std::optional<TargetProfile>& features) {
  if (!features) return;
  const PathFeatures f = case_path_features(c, *features);
  std::printf("  path features on %.*s (%zu):\n", static_cast<int>(features->name.size()),
              features->name.data(), f.size());
  for (const auto& [name, count] : f.counts()) {
    std::printf("  feature %s %lld\n", name.c_str(), static_cast<long long>(count));
  }
}

namespace {

// The first rule the case fails in the mode, "rule: message", or "valid".
std::string verdict_text(const Case& c, Mode mode) {
  const std::vector<RuleReport> f = dialect_ops(c.dialect).failures(c, {.mode = mode}, false);
  return f.empty() ? "valid" : std::string(f.front().rule) + ": " + f.front().message;
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
  const Case c = props::dialect_generator(dialect).production_call(spec);
  const std::string strict = verdict_text(c, Mode::kStrict), native = verdict_text(c, Mode::kJax);
  if (std::string err; !write_case_file(output, c, &err)) {
    std::fprintf(stderr, "rpa: %s\n", err.c_str());
    return kExitUnreadable;
  }
  std::printf("%s\n  spec: %s\n  strict: %s\n  %s: %s\nwrote %s\n", props::describe(spec).c_str(),
              props::production_spec_hex(spec).c_str(), strict.c_str(),
              std::string(dialect_ops(dialect).native_mode).c_str(), native.c_str(), output.c_str());
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
      if (ec != std::errc() || end != v.data() + v.size() || d < 1 || d > props::kGenMaxHeadDim) {
        return usage_error("--head-dim takes 1 to " + std::to_string(props::kGenMaxHeadDim));
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
  // A spec in a dialect's tagged form ('v3:') goes to that dialect's part, which checks it
  // against --dialect; any other goes to --dialect's (jax without one).
  Dialect d = dialect.value_or(Dialect::kJax);
  for (Dialect e : kDialects) {
    const std::string_view prefix = dialect_commands(e).gen_spec_prefix;
    if (has_spec && !prefix.empty() && spec_text.starts_with(prefix)) {
      d = e;
      break;
    }
  }
  return dialect_commands(d).gen(dialect, {.seed = seed,
                                           .size = size,
                                           .spec_text = spec_text,
                                           .request = {.profile = profile, .head_dim = head_dim},
                                           .output = output,
                                           .features = features});
}

}  // namespace rpa
