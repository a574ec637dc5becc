// The two validation modes every dialect's rule table is enforced in (DESIGN.md section 3).
#pragma once

#include <string_view>

namespace rpa {

enum class Mode {
  kJax,     // exactly what JAX accepts and rejects, with JAX's messages
  kStrict,  // exactly the inputs on which the definition and the tiled kernel are sound
};

std::string_view mode_name(Mode m);

}  // namespace rpa
