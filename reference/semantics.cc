#include "reference/semantics.h"

namespace rpa {

std::string_view semantics_name(Semantics s) {
  return s == Semantics::kKernel ? "kernel" : "reference";
}

std::string semantics_label(Semantics s) { return std::string(semantics_name(s)) + " semantics"; }

std::optional<Semantics> parse_semantics(std::string_view name) {
  if (name == "kernel") return Semantics::kKernel;
  if (name == "reference") return Semantics::kReference;
  return std::nullopt;
}

}  // namespace rpa
