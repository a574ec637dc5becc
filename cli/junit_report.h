// JUnit XML reports (`--junit FILE` on check, replay and campaign): the format CI systems
// (GitLab, Jenkins, GitHub test reporters) read without a parser of ours. One <testsuite> per
// command, one <testcase> per case or check class; a failed check is a <failure>, a case that
// could not be checked (unreadable, rejected where a verdict was wanted) an <error>.
#pragma once

#include <string>
#include <vector>

namespace rpa {

struct JunitCase {
  std::string classname;  // e.g. "rpa.check", "rpa.replay.modes"
  std::string name;       // e.g. the case file
  double seconds = 0.0;
  enum class Outcome { kPassed, kFailure, kError } outcome = Outcome::kPassed;
  std::string type;     // the verdict, for a failure or error (e.g. "mismatch")
  std::string message;  // one line
  std::string details;  // the element text (more lines), optional
};

// Writes the report; returns "" or the one-line error (the file could not be written).
// The suite's time is the cases' sum, or seconds where given (>= 0: check classes that ran
// side by side for the whole run).
std::string write_junit(const std::string& path, const std::string& suite,
                        const std::vector<JunitCase>& cases, double seconds = -1.0);

}  // namespace rpa
