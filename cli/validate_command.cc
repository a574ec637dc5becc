#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "service/rule_report.h"
#include "service/v3_run_case.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

// The failures of the case's dialect in the mode: every one (--all) or the first.
std::vector<RuleReport> failures_of(const Case& c, const CliArgs& a) {
  const Mode mode = a.validate.mode;
  std::vector<RuleReport> out;
  if (is_v3(c.dialect)) {
    std::vector<V3Failure> fs;
    if (a.all) {
      fs = v3_validate_all(c.dialect, c.v3_inputs, c.v3_params, mode);
    } else if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, mode)) {
      fs.push_back(std::move(*f));
    }
    for (const V3Failure& f : fs) out.push_back(rule_report(f, mode));
  } else {
    std::vector<Failure> fs;
    if (a.all) {
      fs = validate_all(c.inputs, c.params, a.validate);
    } else if (auto f = validate(c.inputs, c.params, a.validate)) {
      fs.push_back(std::move(*f));
    }
    for (const Failure& f : fs) out.push_back(rule_report(f, mode));
  }
  return out;
}

}  // namespace

int validate_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err =
          parse_cli_args(args, {"--mode", "--all", "--json", "--target", "--max-bytes"}, a);
      !err.empty()) {
    return usage_error(err);
  }
  const std::optional<Case> c = read_case_or_report(a);
  if (!c) return kExitUnreadable;
  const std::vector<RuleReport> failures = failures_of(*c, a);
  const bool valid = failures.empty(), v3 = is_v3(c->dialect);
  // A v3 dialect's mode is "native" or "strict", and its lines and JSON name the dialect.
  const std::string mode(v3 ? v3_mode_name(a.validate.mode) : mode_name(a.validate.mode));
  const std::string dialect(dialect_name(c->dialect));
  const std::string where = v3 ? " (" + dialect + ")" : std::string();
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(valid).key("mode").value(mode);
    if (v3) j.key("dialect").value(dialect);
    if (!valid) write_rule_json(j, failures.front());
    if (a.all) {
      j.key("failures").begin_array();
      for (const RuleReport& f : failures) {
        j.begin_object();
        write_rule_json(j, f);
        j.end_object();
      }
      j.end_array();
    }
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  } else if (valid) {
    std::printf("%s: valid in %s mode%s\n", a.path.c_str(), mode.c_str(), where.c_str());
  }
  for (const RuleReport& f : failures) {
    std::fprintf(stderr, "%s: rejected in %s mode%s by %s\n", a.path.c_str(), mode.c_str(),
                 where.c_str(), rule_line(f).c_str());
  }
  return valid ? kExitOk : kExitRejected;
}

}  // namespace rpa
