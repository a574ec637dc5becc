// The rpa command line: an oracle for ragged paged attention cases (DESIGN.md section 8).
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/validate.h"
#include "oracle/case_file.h"
#include "oracle/exit_codes.h"
#include "oracle/json_writer.h"

namespace rpa {
namespace {

constexpr const char* kUsage =
    "usage: rpa <command> [options]\n"
    "\n"
    "commands:\n"
    "  validate CASE.npz [--mode jax|strict] [--all] [--json] [--target NAME] [--max-bytes N]\n"
    "      Check a case against the rules of one mode (default strict). Exit 0 valid,\n"
    "      2 rejected (rule and message on stderr), 3 unreadable, 64 usage.\n"
    "\n"
    "  --target NAME   TPU generation for the strict VMEM/SMEM budget: v2 v3 v4 v4i v5e v5p\n"
    "                  v6e 7x (default v6e)\n"
    "  --max-bytes N   refuse case files whose arrays exceed N bytes (default 8 GiB)\n";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "rpa: %s\n%s", what.c_str(), kUsage);
  return kExitUsage;
}

struct ValidateArgs {
  std::string path;
  ValidateOptions options;
  bool all = false;
  bool json = false;
  CaseReadOptions read;
};

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Returns an error message, or "" when the arguments parsed.
std::string parse_validate_args(const std::vector<std::string_view>& args, ValidateArgs& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto next = [&]() -> std::optional<std::string_view> {
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    if (a == "--all") {
      out.all = true;
    } else if (a == "--json") {
      out.json = true;
    } else if (a == "--mode") {
      const auto v = next();
      if (v == "jax") {
        out.options.mode = Mode::kJax;
      } else if (v == "strict") {
        out.options.mode = Mode::kStrict;
      } else {
        return "--mode takes jax or strict";
      }
    } else if (a == "--target") {
      const auto v = next();
      const auto profile = v ? find_target_profile(*v) : std::nullopt;
      if (!profile) return "--target takes one of v2 v3 v4 v4i v5e v5p v6e 7x";
      out.options.target = *profile;
    } else if (a == "--max-bytes") {
      const auto v = next();
      const auto n = v ? parse_int(*v) : std::nullopt;
      if (!n || *n < 0) return "--max-bytes takes a non-negative byte count";
      out.read.max_bytes = *n;
    } else if (a.starts_with("-")) {
      return "unknown option " + std::string(a);
    } else if (out.path.empty()) {
      out.path = a;
    } else {
      return "more than one case file given";
    }
  }
  if (out.path.empty()) return "validate needs a case file";
  return "";
}

void write_failure_json(JsonWriter& j, const Failure& f, Mode mode) {
  const RuleInfo& info = rule_info(f.rule);
  j.key("rule").value(info.name).key("message").value(f.message);
  if (mode == Mode::kJax && info.jax_crash) j.key("jax_crash").value(true);
}

std::string failure_line(const Failure& f, Mode mode) {
  const RuleInfo& info = rule_info(f.rule);
  std::string line = std::string(info.name) + ": " + f.message;
  if (mode == Mode::kJax && info.jax_crash) {
    line += " [JAX crashes or misbehaves here instead of raising ValueError]";
  }
  return line;
}

int run_validate(const std::vector<std::string_view>& args) {
  ValidateArgs a;
  if (std::string err = parse_validate_args(args, a); !err.empty()) return usage_error(err);
  const CaseReadResult read = read_case_file(a.path, a.read);
  if (!read.value) {
    std::fprintf(stderr, "rpa: %s\n", read.error.c_str());
    if (a.json) {
      std::printf("%s\n", JsonWriter().begin_object().key("error").value(read.error).end_object()
                              .str().c_str());
    }
    return kExitUnreadable;
  }
  const Case& c = *read.value;
  const Mode mode = a.options.mode;
  std::vector<Failure> failures;
  if (a.all) {
    failures = validate_all(c.inputs, c.params, a.options);
  } else if (auto f = validate(c.inputs, c.params, a.options)) {
    failures.push_back(std::move(*f));
  }
  const bool valid = failures.empty();
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(valid).key("mode").value(mode_name(mode));
    if (!valid) write_failure_json(j, failures.front(), mode);
    if (a.all) {
      j.key("failures").begin_array();
      for (const Failure& f : failures) {
        j.begin_object();
        write_failure_json(j, f, mode);
        j.end_object();
      }
      j.end_array();
    }
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  } else if (valid) {
    std::printf("%s: valid in %s mode\n", a.path.c_str(), std::string(mode_name(mode)).c_str());
  }
  if (!valid) {
    for (const Failure& f : failures) {
      std::fprintf(stderr, "%s: rejected in %s mode by %s\n", a.path.c_str(),
                   std::string(mode_name(mode)).c_str(), failure_line(f, mode).c_str());
    }
  }
  return valid ? kExitOk : kExitRejected;
}

int main_impl(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given");
  const std::string_view command = argv[1];
  const std::vector<std::string_view> args(argv + 2, argv + argc);
  if (command == "validate") return run_validate(args);
  if (command == "--help" || command == "-h" || command == "help") {
    std::printf("%s", kUsage);
    return kExitOk;
  }
  return usage_error("unknown command '" + std::string(command) + "'");
}

}  // namespace
}  // namespace rpa

int main(int argc, char** argv) {
  try {
    return rpa::main_impl(argc, argv);
  } catch (const std::exception& e) {
    // Reaching here is a bug in rpa, not in the case: say so rather than abort.
    std::fprintf(stderr, "rpa: internal error: %s\n", e.what());
    return 70;
  }
}
