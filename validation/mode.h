// The two validation modes every dialect's rule table is enforced in (DESIGN.md section 3), and
// the shape of a failed rule in any of them.
#pragma once

#include <string>
#include <string_view>

#include "validation/target_profile.h"

namespace rpa {

enum class Mode {
  kJax,     // exactly what JAX accepts and rejects, with JAX's messages
  kStrict,  // exactly the inputs on which the definition and the tiled kernel are sound
};

std::string_view mode_name(Mode m);

// What every dialect's validation is asked: the mode, and the TPU generation whose VMEM/SMEM
// capacities bound the strict budget rules (and whose literal program runs).
struct ValidateOptions {
  Mode mode = Mode::kStrict;
  TargetProfile target = default_target_profile();
};

// One failed rule of a dialect's table (Id: its rule enum) with its message, e.g.
// {soft_cap_zero, "soft_cap=-0.0 must not be 0.0."}.
template <class Id>
struct RuleFailure {
  Id rule;
  std::string message;
  bool operator==(const RuleFailure&) const = default;
};

}  // namespace rpa
