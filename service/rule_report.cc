#include "service/rule_report.h"

namespace rpa {

std::string rule_line(const RuleReport& r) {
  std::string line = std::string(r.rule) + ": " + r.message;
  if (r.crash) {
    line += " [" + std::string(r.who) + " crashes or misbehaves here instead of raising ValueError]";
  }
  return line;
}

void write_rule_json(JsonWriter& j, const RuleReport& r) {
  j.key("rule").value(r.rule).key("message").value(r.message);
  if (r.crash) j.key("jax_crash").value(true);
}

}  // namespace rpa
