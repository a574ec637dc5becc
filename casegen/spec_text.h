// How a spec's description (describe()) prints its optional parameters, in every dialect.
#pragma once

#include <optional>
#include <ostream>
#include <type_traits>

#include "core/python_repr.h"

namespace rpa::props {

// " name=value" (floats as Python prints them), nothing when the parameter is unset.
template <class T>
void print_optional(std::ostream& os, const char* name, const std::optional<T>& v) {
  if (!v) return;
  os << " " << name << "=";
  if constexpr (std::is_floating_point_v<T>) {
    os << py_float_repr(*v);
  } else {
    os << *v;
  }
}

}  // namespace rpa::props
