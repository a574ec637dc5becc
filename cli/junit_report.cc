#include "cli/junit_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "cli/xml_escape.h"
#include "service/number_text.h"

namespace rpa {

std::string write_junit(const std::string& path, const std::string& suite,
                        const std::vector<JunitCase>& cases, double seconds) {
  int failures = 0, errors = 0;
  double sum = 0.0;
  for (const JunitCase& c : cases) {
    failures += c.outcome == JunitCase::Outcome::kFailure;
    errors += c.outcome == JunitCase::Outcome::kError;
    sum += c.seconds;
  }
  if (seconds < 0.0) seconds = sum;
  char totals[160];
  std::snprintf(totals, sizeof totals, "tests=\"%zu\" failures=\"%d\" errors=\"%d\" time=\"%.3f\"",
                cases.size(), failures, errors, seconds);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"" + xml_escape(suite) + "\" " + totals + ">\n";
  x += "  <testsuite name=\"" + xml_escape(suite) + "\" " + totals + " skipped=\"0\">\n";
  for (const JunitCase& c : cases) {
    x += "    <testcase classname=\"" + xml_escape(c.classname) + "\" name=\"" +
         xml_escape(c.name) + "\" time=\"" + fixed(c.seconds, 3) + "\"";
    if (c.outcome == JunitCase::Outcome::kPassed) {
      x += "/>\n";
      continue;
    }
    const char* const tag = c.outcome == JunitCase::Outcome::kFailure ? "failure" : "error";
    x += ">\n      <" + std::string(tag) + " type=\"" + xml_escape(c.type) + "\" message=\"" +
         xml_escape(c.message) + "\">" + xml_escape(c.details) + "</" + tag + ">\n";
    x += "    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return "cannot write the JUnit report " + path + ": " + std::strerror(errno);
  out << x;
  out.close();
  if (!out) return "cannot write the JUnit report " + path + ": " + std::strerror(errno);
  return "";
}

}  // namespace rpa
