// Renders values the way Python prints them inside an f-string, so that validation
// messages match JAX's text byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rpa {

// repr() of a Python float: shortest round-trip digits; scientific when the decimal
// exponent is < -4 or >= 16 ("1e-05", "1e+16", "1.5e-07"), otherwise positional with at
// least one fractional digit ("0.0", "-0.0", "50.0", "0.0001", "1234567890123456.0");
// "inf", "-inf", "nan" (Python prints every NaN as "nan").
std::string py_float_repr(double x);
// repr() of a numpy float32 scalar: the same layout with the shortest digits that
// round-trip in float32 (np.float32(2.1) prints 2.1, not 2.0999999046325684).
std::string py_float32_repr(float x);
// repr() of a Python int.
std::string py_int_repr(int64_t x);
// repr() of a JAX int32 scalar array, as an f-string's `=` prints it: Array(8, dtype=int32).
std::string jax_int32_repr(int64_t x);
// repr() of a JAX int32 vector: numpy right-justifies every element to the widest,
// Array([ 0, 12], dtype=int32); empty, Array([], shape=(0,), dtype=int32).
std::string jax_int32_vector_repr(const std::vector<int64_t>& v);

}  // namespace rpa
