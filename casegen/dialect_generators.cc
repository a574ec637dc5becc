// The generator registry: the one casegen file that names every dialect. Adding a dialect adds
// its entry here (docs/layout.md's checklist).
#include <array>
#include <stdexcept>
#include <string>

#include "casegen/dialect_generator.h"
#include "casegen/jax_dialect_generator.h"
#include "casegen/v3_dialect_generator.h"

namespace rpa::props {
namespace {

constexpr std::array<const DialectGenerator*, 3> kRegistry = {&kJaxGenerator, &kV3Generator,
                                                               &kV3Hd64Generator};

}  // namespace

const DialectGenerator& dialect_generator(Dialect d) {
  for (const DialectGenerator* g : kRegistry) {
    if (g->dialect == d) return *g;
  }
  throw std::logic_error("dialect " + std::string(dialect_name(d)) + " has no generator");
}

}  // namespace rpa::props
