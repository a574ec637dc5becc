// The fuzz inputs' family registry: the one harness/ file that names every dialect family.
// Adding a dialect adds its family here, or to the family that owns it (docs/layout.md's
// checklist).
#include "harness/input_families.h"

#include <array>
#include <stdexcept>
#include <string>

#include "harness/jax_family.h"
#include "harness/v3_family.h"

namespace rpa::fuzz {
namespace {

const std::array<const InputFamily*, 2> kRegistry = {&kV3Family, &kJaxFamily};

}  // namespace

std::span<const InputFamily* const> input_families() { return kRegistry; }

FamilyInput input_family(std::span<const uint8_t> bytes) {
  for (const InputFamily* f : kRegistry) {
    if (f->tag.empty()) return {f, bytes};
    if (bytes.size() >= f->tag.size() &&
        std::equal(f->tag.begin(), f->tag.end(), bytes.begin())) {
      return {f, bytes.subspan(f->tag.size())};
    }
  }
  throw std::logic_error("no untagged input family is registered");
}

const InputFamily& family_of(Dialect d) {
  for (const InputFamily* f : kRegistry) {
    if (f->owns(d)) return *f;
  }
  throw std::logic_error("no input family owns dialect " + std::string(dialect_name(d)));
}

}  // namespace rpa::fuzz
