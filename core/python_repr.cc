#include "core/python_repr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <system_error>

namespace rpa {

namespace {

// CPython's repr layout of x's shortest round-trip digits at x's own precision (numpy
// prints its float32 scalars the same way).
template <class F>
std::string shortest_repr(F x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";

  // Shortest round-trip scientific form, "d[.ddd]e[+-]XX": the same digits CPython's repr
  // picks, which are then laid out by CPython's rules below.
  char buf[32];
  const auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(x), std::chars_format::scientific);
  if (ec != std::errc()) throw std::logic_error("shortest_repr: to_chars failed");
  const std::string_view sci(buf, static_cast<size_t>(end - buf));
  const size_t e_pos = sci.find('e');
  std::string digits(sci.substr(0, e_pos));
  if (digits.size() > 1) digits.erase(1, 1);  // the '.'
  const std::string exp_text(sci.substr(e_pos + 1));
  const int exp10 = std::atoi(exp_text.c_str());

  std::string out = std::signbit(x) ? "-" : "";
  const auto n = static_cast<int>(digits.size());
  if (exp10 < -4 || exp10 >= 16) {
    out += digits[0];
    // Appends, not "." + std::string: at -O3 GCC 12 reports a false -Wrestrict on that.
    if (n > 1) out.append(".").append(digits, 1);
    out += exp10 < 0 ? "e-" : "e+";
    const int mag = std::abs(exp10);
    if (mag < 10) out += '0';
    out += std::to_string(mag);
  } else if (exp10 < 0) {
    out.append("0.").append(static_cast<size_t>(-exp10 - 1), '0').append(digits);
  } else if (n <= exp10 + 1) {
    out.append(digits).append(static_cast<size_t>(exp10 + 1 - n), '0').append(".0");
  } else {
    const auto int_len = static_cast<size_t>(exp10 + 1);
    out.append(digits, 0, int_len).append(".").append(digits, int_len);
  }
  return out;
}

}  // namespace

std::string py_float_repr(double x) { return shortest_repr(x); }

std::string py_float32_repr(float x) { return shortest_repr(x); }

std::string py_int_repr(int64_t x) { return std::to_string(x); }

std::string jax_int32_repr(int64_t x) { return "Array(" + py_int_repr(x) + ", dtype=int32)"; }

std::string jax_int32_vector_repr(const std::vector<int64_t>& v) {
  if (v.empty()) return "Array([], shape=(0,), dtype=int32)";
  size_t width = 0;
  for (int64_t x : v) width = std::max(width, py_int_repr(x).size());
  std::string s = "Array([";
  for (size_t k = 0; k < v.size(); ++k) {
    if (k > 0) s += ", ";
    const std::string e = py_int_repr(v[k]);
    s += std::string(width - e.size(), ' ') + e;
  }
  return s + "], dtype=int32)";
}

}  // namespace rpa
