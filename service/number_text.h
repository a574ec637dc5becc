// Numbers as the rpa commands print them in tables and one-line summaries (printf formats).
// Values meant to read back exactly use py_float_repr (core/python_repr.h) instead.
#pragma once

#include <string>

namespace rpa {

std::string fixed(double v, int digits);         // "%.*f": fixed(0.4321, 2) == "0.43"
std::string signed_fixed(double v, int digits);  // "%+.*f": "+0.012"
std::string formatted(double v, const char* printf_format);  // one %-conversion of a double

}  // namespace rpa
