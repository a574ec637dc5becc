// The dialect registry: the one service file that names every dialect. Adding a dialect adds
// its entry here (docs/layout.md's checklist).
#include <array>
#include <stdexcept>
#include <string>

#include "service/dialect_ops.h"
#include "service/jax_dialect_ops.h"
#include "service/v3_dialect_ops.h"

namespace rpa {
namespace {

constexpr std::array<const DialectOps*, 3> kRegistry = {&kJaxDialectOps, &kV3DialectOps,
                                                         &kV3Hd64DialectOps};

}  // namespace

const DialectOps& dialect_ops(Dialect d) {
  for (const DialectOps* ops : kRegistry) {
    if (ops->dialect == d) return *ops;
  }
  throw std::logic_error("dialect " + std::string(dialect_name(d)) + " is not registered");
}

std::span<const DialectOps* const> registered_dialects() { return kRegistry; }

std::string_view mode_label(Dialect d, Mode m) {
  return m == Mode::kStrict ? "strict" : dialect_ops(d).native_mode;
}

}  // namespace rpa
