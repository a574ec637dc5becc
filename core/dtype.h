// Element types of RPA arrays and exact conversions between them and float.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rpa {

// The logical element type of an array. The float types are the ones the kernel computes
// with; the integer and wide float types exist so that a case file holding, say, int64
// kv_lens can be read and then rejected by validation with JAX's message.
enum class DType : uint8_t {
  kFloat32,
  kBFloat16,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kInt32,
  kInt64,
  kInt16,
  kInt8,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat64,
  kBool,
};

// numpy's name: "float32", "bfloat16", "float8_e4m3fn", "int64", "bool", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes per element.
int dtype_size(DType t);
int dtype_bits(DType t);
bool dtype_is_integer(DType t);  // bool excluded
bool dtype_is_float(DType t);    // every floating type, fp8 included
// The dtypes the TPU kernel computes with: q float32 or bfloat16; KV also float8.
bool is_kernel_q_dtype(DType t);
bool is_kernel_kv_dtype(DType t);

// KV dtypes JAX's Pallas kernel also runs on (jax mode accepts them; its strided loads
// bitcast them like float8): float16 and integers up to 32 bits. bool fails its bitcast,
// 64-bit types its packing.
bool is_pallas_extra_kv_dtype(DType t);
// Element i as numpy's astype(float32) gives it (round to nearest): the kernel dtypes and
// the extra KV dtypes above.
float load_as_float32(DType t, const void* data, int64_t i);

// K_eff / V_eff of one KV element x (as load_as_float32 gives it) as the Pallas kernel
// computes with it: with a scale, round_to(q dtype, x * scale) in float32, a subnormal
// product flushed (flush_subnormal); without one, x,
// except that an integer K under a bfloat16 q is promoted to bfloat16 by the einsum.
float kv_eff(DType q_dtype, DType kv_dtype, const std::optional<double>& scale, bool key, float x);
// How numpy prints the dtype inside a message: dtype('int32'); ml_dtypes types print
// without quotes, e.g. dtype(bfloat16).
std::string dtype_repr(DType t);

// Exact conversions. Narrowing rounds to nearest, ties to even. NaN stays NaN (with its
// sign). bfloat16 and float8_e5m2 overflow to infinity; float8_e4m3fn has no infinity, so
// overflow (|x| > 464, the midpoint above its max 448, or exactly 464 rounding to odd) and
// infinities become NaN, as in ml_dtypes.
uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t bits);
uint8_t float_to_e4m3fn(float x);
float e4m3fn_to_float(uint8_t bits);
uint8_t float_to_e5m2(float x);
float e5m2_to_float(uint8_t bits);

// IEEE half (numpy's float16), decoded exactly; only read, for index arrays a case file
// may hold.
float f16_to_float(uint16_t bits);

// Significand bits, the implicit one included, of a float type: float32 24, bfloat16 8,
// float8_e4m3fn 4, float8_e5m2 3, float16 11, float64 53; 0 for the others.
int dtype_precision_bits(DType t);
// The smallest positive normal and subnormal of a float type (0 for the others).
double dtype_min_normal(DType t);
double dtype_min_subnormal(DType t);
// The spacing of float type t at x: one ulp, or the smallest subnormal below the normal range.
double dtype_ulp(DType t, double x);

// finfo(t).max of a float type: float32 3.4028235e38, bfloat16 3.3895314e38, float8_e4m3fn 448,
// float8_e5m2 57344, float16 65504, float64 DBL_MAX; 0 for the others.
double dtype_finite_max(DType t);

// Reads element i of a buffer of type t as float (the float types only).
float load_float(DType t, const void* data, int64_t i);
// x, or a zero of x's sign where x is a float32 subnormal: how a TPU computes with it (TPUs
// flush subnormals, and rpa's kernel runs with FTZ | DAZ, under which x86 reads them so).
float flush_subnormal(float x);
// Element i of a float type as a TPU computes with it: load_float, flushed. A bfloat16
// subnormal is a float32 subnormal, so it becomes 0; a float8 subnormal is a normal float32
// and stays. The references read q, K and V through it (fuzz_raw_inputs found a subnormal q
// element times an infinite key: -inf in the definition, 0 * inf = NaN in the kernel).
float load_flushed(DType t, const void* data, int64_t i);
// Rounds x to type t and stores it as element i (the float types only).
void store_float(DType t, void* data, int64_t i, float x);
// Rounds x to the nearest value representable in t (the float types only).
float round_to(DType t, float x);
// The same for a double, rounded once: going through float first would round twice and
// can land on the wrong side of a tie (1 + 2^-8 + 2^-30 must round up to bfloat16).
float round_double_to(DType t, double x);

}  // namespace rpa
