#include "validation/mode.h"

namespace rpa {

std::string_view mode_name(Mode m) { return m == Mode::kJax ? "jax" : "strict"; }

}  // namespace rpa
