#include "service/case_options.h"

#include <charconv>
#include <cstdint>

namespace rpa {
namespace {

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The flags that take a value.
const std::set<std::string_view> kValued = {"--mode",      "--target",     "--max-bytes",
                                            "--oracle",    "--semantics",  "--dot-passes",
                                            "--impl",      "--threads"};

}  // namespace

std::optional<std::string> parse_case_option(const std::vector<std::string_view>& args,
                                             size_t& i, CaseOptions& out) {
  const std::string_view a = args[i];
  if (a == "--all") {
    out.all = true;
    return "";
  }
  if (a == "--allow-bias") {
    out.allow_bias = true;
    return "";
  }
  if (a == "--literal") {
    out.literal = true;
    return "";
  }
  if (a == "--schedule" && i + 1 < args.size()) {
    const std::string_view v = args[++i];
    if (v != "default" && v != "literal") return "--schedule takes default or literal";
    out.literal = v == "literal";
    return "";
  }
  if (a != "--schedule" && !kValued.contains(a)) return std::nullopt;
  if (i + 1 >= args.size()) return std::string(a) + " needs a value";
  const std::string_view v = args[++i];
  if (a == "--mode") {
    // native: the case's dialect's own validators; jax names the jax dialect's.
    if (v == "jax" || v == "native") {
      out.validate.mode = Mode::kJax;
    } else if (v == "strict") {
      out.validate.mode = Mode::kStrict;
    } else {
      return "--mode takes native, jax or strict";
    }
  } else if (a == "--target") {
    const auto profile = find_target_profile(v);
    if (!profile) return "--target takes one of v2 v3 v4 v4i v5e v5p v6e 7x";
    out.validate.target = *profile;
  } else if (a == "--max-bytes") {
    const auto n = parse_int(v);
    if (!n || *n < 0) return "--max-bytes takes a non-negative byte count";
    out.read.max_bytes = *n;
  } else if (a == "--oracle") {
    if (v != "reference" && v != "literal") return "--oracle takes reference or literal";
    out.oracle = v;
  } else if (a == "--semantics") {
    out.semantics = parse_semantics(v);
    if (!out.semantics) return "--semantics takes kernel or reference";
  } else if (a == "--dot-passes") {
    const auto passes = parse_dot_passes(v);
    if (!passes) return "--dot-passes takes 6, 3 or 1";
    out.dot_passes = *passes;
  } else if (a == "--impl") {
    out.impl = v;
  } else if (a == "--threads") {
    const auto n = parse_int(v);
    if (!n || *n < 1 || *n > 1024) return "--threads takes a count from 1 to 1024";
    out.threads = static_cast<int>(*n);
  }
  return "";
}

std::string parse_case_options(const std::vector<std::string_view>& args,
                               const std::set<std::string_view>& allowed, CaseOptions& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!allowed.contains(args[i])) return "unknown option " + std::string(args[i]);
    if (std::optional<std::string> err = parse_case_option(args, i, out)) {
      if (!err->empty()) return *err;
    } else {
      return "unknown option " + std::string(args[i]);
    }
  }
  return "";
}

std::string run_options_error(const CaseOptions& a) {
  if (a.impl != "reference" && a.impl != "kernel") {
    return a.impl.empty() ? "run needs --impl reference or --impl kernel"
                          : "--impl takes reference or kernel";
  }
  if (a.literal && a.impl != "kernel") return "--schedule literal needs --impl kernel";
  if (a.semantics && a.impl != "reference") {
    return "--semantics chooses the dense reference's rounding points: it needs --impl reference";
  }
  return "";
}

}  // namespace rpa
