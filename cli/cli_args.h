// Command-line parsing and the steps every rpa command shares: read the case, validate it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "casefile/case_file.h"
#include "service/case_options.h"
#include "service/json_writer.h"

namespace rpa {

// The command line's arguments: the case options both doors share (service/case_options.h),
// the files named, and how the command prints.
struct CliArgs : CaseOptions {
  std::vector<std::string> paths;  // every file or directory named, in order (path: the first)
  std::string junit;               // --junit FILE: a JUnit XML report
  bool json = false;
  std::string output;  // -o
};

// The flags of rpa run and rpa check: the service's options and the printing flags.
inline const std::set<std::string_view> kRunFlags = [] {
  std::set<std::string_view> s = kRunOptions;
  s.insert({"-o", "--json"});
  return s;
}();
inline const std::set<std::string_view> kCheckFlags = [] {
  std::set<std::string_view> s = kCheckOptions;
  s.insert({"--json", "--junit"});
  return s;
}();

// Parses args (after the command name). allowed lists the flags this command takes, e.g.
// {"--mode", "--json"}; many_paths: it takes several files or directories (at least one).
// Returns an error message, or "" on success.
std::string parse_cli_args(const std::vector<std::string_view>& args,
                           const std::set<std::string_view>& allowed, CliArgs& out,
                           bool many_paths = false);

// Prints the usage error and the usage text to stderr; returns kExitUsage.
int usage_error(const std::string& what);
extern const char* const kUsage;

// Reads the case named in args. On failure prints the one-line error (and, with --json,
// {"error": ...} on stdout) and returns nullopt; the caller exits with kExitUnreadable.
std::optional<Case> read_case_or_report(const CliArgs& args);

}  // namespace rpa
