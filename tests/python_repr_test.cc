#include "core/python_repr.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace rpa {
namespace {

// Expected strings are what CPython 3 prints for repr() of the same double.

TEST(PyFloatRepr, ShortestDigits) {
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(py_float_repr(2.5), "2.5");
  EXPECT_EQ(py_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(py_float_repr(4.35), "4.35");
  EXPECT_EQ(py_float_repr(12345.678), "12345.678");
  EXPECT_EQ(py_float_repr(-0.7 * 3.4028234663852886e+38), "-2.381976426469702e+38");
}

TEST(PyFloatRepr, IntegralValuesKeepPointZero) {
  EXPECT_EQ(py_float_repr(0.0), "0.0");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(50.0), "50.0");
  EXPECT_EQ(py_float_repr(100.0), "100.0");
  EXPECT_EQ(py_float_repr(-7.0), "-7.0");
}

TEST(PyFloatRepr, PositionalUpTo1e16) {
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(py_float_repr(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(py_float_repr(123.456), "123.456");
}

TEST(PyFloatRepr, ScientificFrom1e16) {
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(py_float_repr(1e22), "1e+22");
  EXPECT_EQ(py_float_repr(1e300), "1e+300");
  EXPECT_EQ(py_float_repr(9007199254740992.0 * 1024), "9.223372036854776e+18");
  EXPECT_EQ(py_float_repr(-1.7976931348623157e+308), "-1.7976931348623157e+308");
}

TEST(PyFloatRepr, PositionalDownTo1eMinus4) {
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(0.00012345), "0.00012345");
  EXPECT_EQ(py_float_repr(-0.001), "-0.001");
}

TEST(PyFloatRepr, ScientificBelow1eMinus4) {
  EXPECT_EQ(py_float_repr(9.999e-05), "9.999e-05");
  EXPECT_EQ(py_float_repr(1e-05), "1e-05");
  EXPECT_EQ(py_float_repr(1.25e-05), "1.25e-05");
  EXPECT_EQ(py_float_repr(1.5e-07), "1.5e-07");
  EXPECT_EQ(py_float_repr(2.2250738585072014e-308), "2.2250738585072014e-308");
}

TEST(PyFloatRepr, Subnormals) {
  const double min_sub = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(py_float_repr(min_sub), "5e-324");
  EXPECT_EQ(py_float_repr(2 * min_sub), "1e-323");
  EXPECT_EQ(py_float_repr(3 * min_sub), "1.5e-323");
  EXPECT_EQ(py_float_repr(-min_sub), "-5e-324");
}

TEST(PyFloatRepr, InfAndNan) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(py_float_repr(inf), "inf");
  EXPECT_EQ(py_float_repr(-inf), "-inf");
  EXPECT_EQ(py_float_repr(nan), "nan");
  EXPECT_EQ(py_float_repr(-nan), "nan");
  EXPECT_EQ(py_float_repr(std::bit_cast<double>(uint64_t{0xFFF0000000000001})), "nan");
}

// Whatever digits are chosen, Python's float() must read back the same double.
TEST(PyFloatRepr, ParsesBackExactly) {
  uint64_t state = 0x9E3779B97F4A7C15u;
  for (int k = 0; k < 20000; ++k) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const double x = std::bit_cast<double>(state);
    if (!std::isfinite(x)) continue;
    const std::string s = py_float_repr(x);
    EXPECT_EQ(std::bit_cast<uint64_t>(std::strtod(s.c_str(), nullptr)), std::bit_cast<uint64_t>(x))
        << s;
  }
}

TEST(PyIntRepr, Values) {
  EXPECT_EQ(py_int_repr(0), "0");
  EXPECT_EQ(py_int_repr(-1), "-1");
  EXPECT_EQ(py_int_repr(42), "42");
  EXPECT_EQ(py_int_repr(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(py_int_repr(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
}

TEST(PyFloat32Repr, ShortestDigitsInFloat32) {
  EXPECT_EQ(py_float32_repr(2.1f), "2.1");
  EXPECT_EQ(py_float_repr(double{2.1f}), "2.0999999046325684");
  EXPECT_EQ(py_float32_repr(1e-5f), "1e-05");
  EXPECT_EQ(py_float32_repr(1e16f), "1e+16");
  EXPECT_EQ(py_float32_repr(100.0f), "100.0");
  EXPECT_EQ(py_float32_repr(-0.0f), "-0.0");
  EXPECT_EQ(py_float32_repr(NAN), "nan");
}

// As Python prints jnp.int32(8) and jnp.array([0, 12, -3], jnp.int32) (JAX 0.11.2).
TEST(JaxInt32Repr, ScalarsAndRightJustifiedVectors) {
  EXPECT_EQ(jax_int32_repr(8), "Array(8, dtype=int32)");
  EXPECT_EQ(jax_int32_repr(-2147483648), "Array(-2147483648, dtype=int32)");
  EXPECT_EQ(jax_int32_vector_repr({0, 12, -3}), "Array([ 0, 12, -3], dtype=int32)");
  EXPECT_EQ(jax_int32_vector_repr({5}), "Array([5], dtype=int32)");
  EXPECT_EQ(jax_int32_vector_repr({}), "Array([], shape=(0,), dtype=int32)");
}

}  // namespace
}  // namespace rpa
