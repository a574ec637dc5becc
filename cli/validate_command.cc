#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "service/dialect_ops.h"
#include "service/rule_report.h"

namespace rpa {

int validate_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err =
          parse_cli_args(args, {"--mode", "--all", "--json", "--target", "--max-bytes"}, a);
      !err.empty()) {
    return usage_error(err);
  }
  const std::optional<Case> c = read_case_or_report(a);
  if (!c) return kExitUnreadable;
  const DialectOps& ops = dialect_ops(c->dialect);
  const std::vector<RuleReport> failures = ops.failures(*c, a.validate, a.all);
  const bool valid = failures.empty();
  // The mode by the dialect's name for it ("jax" or "native", "strict"); the lines and JSON
  // of a dialect that reports its name say which.
  const std::string mode(mode_label(c->dialect, a.validate.mode));
  const std::string dialect(dialect_name(c->dialect));
  const std::string where = ops.reports_dialect ? " (" + dialect + ")" : std::string();
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(valid).key("mode").value(mode);
    if (ops.reports_dialect) j.key("dialect").value(dialect);
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
