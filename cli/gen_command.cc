// rpa gen: one generated case as a case file, from a seed or from the hex a failing
// property prints, with the verdicts the spec model expects.
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>

#include "casefile/case_file.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "properties/case_codec.h"
#include "properties/generate.h"
#include "properties/materialize.h"
#include "properties/random_source.h"
#include "properties/spec_model.h"

namespace rpa {

int gen_command(const std::vector<std::string_view>& args) {
  std::optional<uint64_t> seed;
  std::optional<int> size;
  std::string spec_text, profile, output;
  std::optional<int64_t> head_dim;
  bool has_spec = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a != "--seed" && a != "--size" && a != "--spec" && a != "--profile" && a != "-o" &&
        a != "--head-dim") {
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
    } else if (a == "--profile") {
      profile = v;
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
  if (output.empty()) return usage_error("gen needs -o CASE.npz");
  if (!seed && (!profile.empty() || size || head_dim))
    return usage_error("--profile, --size and --head-dim go with --seed");
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
  return kExitOk;
}

}  // namespace rpa
