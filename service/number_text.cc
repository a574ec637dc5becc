#include "service/number_text.h"

#include <cstdio>

namespace rpa {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string signed_fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f", digits, v);
  return buf;
}

std::string formatted(double v, const char* printf_format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

}  // namespace rpa
