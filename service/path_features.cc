#include "service/path_features.h"

#include <string>
#include <vector>

#include "service/dialect_ops.h"

namespace rpa {

PathFeatures case_path_features(const Case& c, const TargetProfile& target) {
  const DialectOps& ops = dialect_ops(c.dialect);
  const std::vector<RuleReport> bad = ops.failures(c, {.mode = Mode::kJax, .target = target}, false);
  if (!bad.empty()) {
    PathFeatures f;
    f.hit("rejected." + std::string(bad.front().rule));
    return f;
  }
  return ops.walk_features(c, target);
}

}  // namespace rpa
