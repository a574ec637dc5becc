#include <cstdio>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/v3_commands.h"

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
  if (is_v3(c->dialect)) return validate_v3(*c, a);
  const Mode mode = a.validate.mode;
  std::vector<Failure> failures;
  if (a.all) {
    failures = validate_all(c->inputs, c->params, a.validate);
  } else if (auto f = validate(c->inputs, c->params, a.validate)) {
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
  for (const Failure& f : failures) {
    std::fprintf(stderr, "%s: rejected in %s mode by %s\n", a.path.c_str(),
                 std::string(mode_name(mode)).c_str(), failure_line(f, mode).c_str());
  }
  return valid ? kExitOk : kExitRejected;
}

}  // namespace rpa
