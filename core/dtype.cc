#include "core/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "core/float32_scalar.h"

namespace rpa {
namespace {

enum class Kind : uint8_t { kFloat, kInteger, kBool };

struct DTypeInfo {
  DType type;
  std::string_view name;
  int size;
  Kind kind;
  bool ml_dtypes;  // defined by ml_dtypes rather than numpy, so numpy's repr omits quotes
};

// Indexed by the enum's value.
constexpr std::array<DTypeInfo, 15> kInfos = {{
    {DType::kFloat32, "float32", 4, Kind::kFloat, false},
    {DType::kBFloat16, "bfloat16", 2, Kind::kFloat, true},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 1, Kind::kFloat, true},
    {DType::kFloat8E5M2, "float8_e5m2", 1, Kind::kFloat, true},
    {DType::kInt32, "int32", 4, Kind::kInteger, false},
    {DType::kInt64, "int64", 8, Kind::kInteger, false},
    {DType::kInt16, "int16", 2, Kind::kInteger, false},
    {DType::kInt8, "int8", 1, Kind::kInteger, false},
    {DType::kUInt8, "uint8", 1, Kind::kInteger, false},
    {DType::kUInt16, "uint16", 2, Kind::kInteger, false},
    {DType::kUInt32, "uint32", 4, Kind::kInteger, false},
    {DType::kUInt64, "uint64", 8, Kind::kInteger, false},
    {DType::kFloat16, "float16", 2, Kind::kFloat, false},
    {DType::kFloat64, "float64", 8, Kind::kFloat, false},
    {DType::kBool, "bool", 1, Kind::kBool, false},
}};

constexpr bool infos_match_enum() {
  for (size_t k = 0; k < kInfos.size(); ++k) {
    if (static_cast<size_t>(kInfos[k].type) != k) return false;
  }
  return static_cast<size_t>(DType::kBool) + 1 == kInfos.size();
}
static_assert(infos_match_enum(), "kInfos must list every DType in enum order");

const DTypeInfo& info(DType t) {
  const auto k = static_cast<size_t>(t);
  if (k >= kInfos.size()) throw std::logic_error("invalid DType");
  return kInfos[k];
}

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kFloatExpMask = 0x7F800000u;
constexpr uint32_t kFloatQuietNan = 0x7FC00000u;
constexpr int kFloatBias = 127;
constexpr int kFloatMantBits = 23;

// An 8-bit float with 1 sign bit, kExpBits exponent bits and kMantBits mantissa bits. With
// kHasInf the all-ones exponent holds IEEE infinities and NaNs; without it (the "fn"
// formats) only the all-ones code of each sign is NaN and the rest of that binade is finite.
template <int kExpBits, int kMantBits, bool kHasInf>
struct Fp8Format {
  static constexpr int kExp = kExpBits;
  static constexpr int kMant = kMantBits;
  static constexpr bool kInf = kHasInf;
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr int kMinNormalExp = 1 - kBias;
};

using E4M3FN = Fp8Format<4, 3, false>;
using E5M2 = Fp8Format<5, 2, true>;

// Shifts `value` right by `shift` (1..31) bits, rounding to nearest, ties to even. The
// caller keeps value + 2^(shift-1) within uint32.
constexpr uint32_t shift_round_even(uint32_t value, int shift) {
  const uint32_t half_minus_one = (uint32_t{1} << (shift - 1)) - 1;
  const uint32_t lsb = (value >> shift) & 1;
  return (value + half_minus_one + lsb) >> shift;
}

// The magnitude code (sign stripped) that finite, non-negative float bits `a` round to. The
// result may exceed the format's largest finite code, or spill into its all-ones exponent;
// the caller maps that to infinity or NaN.
template <class F>
constexpr uint32_t fp8_magnitude_code(uint32_t a) {
  const int exp = static_cast<int>(a >> kFloatMantBits) - kFloatBias;
  if (exp >= F::kMinNormalExp) {
    // Rounding the float's exponent-and-mantissa field as one integer carries a mantissa
    // overflow into the exponent, which is exactly the next binade's code.
    const uint32_t rounded = shift_round_even(a, kFloatMantBits - F::kMant);
    return rounded - (static_cast<uint32_t>(kFloatBias - F::kBias) << F::kMant);
  }
  // Below the smallest normal: count units of the smallest subnormal. A float subnormal is
  // far below half of that unit, as is anything needing a shift past the 24-bit significand.
  if ((a & kFloatExpMask) == 0) return 0;
  const uint32_t significand = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = kFloatMantBits - F::kMant + (F::kMinNormalExp - exp);
  if (shift > kFloatMantBits + 1) return 0;
  // A result of 1 << kMant is the smallest normal code, again by construction.
  return shift_round_even(significand, shift);
}

template <class F>
constexpr float fp8_decode(uint8_t bits) {
  const uint32_t sign = (bits & 0x80u) != 0 ? kSignBit : 0;
  const int exp_field = (bits >> F::kMant) & ((1 << F::kExp) - 1);
  const uint32_t mant = bits & ((1u << F::kMant) - 1);
  const bool top_binade = exp_field == (1 << F::kExp) - 1;
  uint32_t magnitude;
  if (F::kInf && top_binade) {
    magnitude = mant == 0 ? kFloatExpMask : kFloatQuietNan;
  } else if (!F::kInf && top_binade && mant == (1u << F::kMant) - 1) {
    magnitude = kFloatQuietNan;
  } else if (exp_field == 0) {
    // m * 2^(min_normal_exp - kMant); the product is exact in float.
    const auto unit_exp = static_cast<uint32_t>(F::kMinNormalExp - F::kMant + kFloatBias);
    const float unit = std::bit_cast<float>(unit_exp << kFloatMantBits);
    magnitude = std::bit_cast<uint32_t>(static_cast<float>(mant) * unit);
  } else {
    const auto float_exp = static_cast<uint32_t>(exp_field - F::kBias + kFloatBias);
    magnitude = (float_exp << kFloatMantBits) | (mant << (kFloatMantBits - F::kMant));
  }
  return std::bit_cast<float>(sign | magnitude);
}

template <class F>
constexpr std::array<float, 256> fp8_table() {
  std::array<float, 256> table{};
  for (int code = 0; code < 256; ++code) {
    table[static_cast<size_t>(code)] = fp8_decode<F>(static_cast<uint8_t>(code));
  }
  return table;
}

constexpr std::array<float, 256> kE4M3FNValues = fp8_table<E4M3FN>();
constexpr std::array<float, 256> kE5M2Values = fp8_table<E5M2>();

constexpr uint8_t kE4M3FNMaxFinite = 0x7E;
constexpr uint8_t kE4M3FNNan = 0x7F;
constexpr uint8_t kE5M2MaxFinite = 0x7B;
constexpr uint8_t kE5M2Inf = 0x7C;
constexpr uint8_t kE5M2Nan = 0x7E;

template <class T>
T read_element(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(data) + i * static_cast<int64_t>(sizeof(T)),
              sizeof(T));
  return v;
}

template <class T>
void write_element(void* data, int64_t i, T v) {
  std::memcpy(static_cast<std::byte*>(data) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

[[noreturn]] void throw_unsupported(DType t, const char* what) {
  throw std::logic_error(std::string(what) + ": unsupported dtype " + std::string(dtype_name(t)));
}

}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& i : kInfos) {
    if (i.name == name) return i.type;
  }
  return std::nullopt;
}

int dtype_size(DType t) { return info(t).size; }

int dtype_bits(DType t) { return info(t).size * 8; }

bool dtype_is_integer(DType t) { return info(t).kind == Kind::kInteger; }

bool dtype_is_float(DType t) { return info(t).kind == Kind::kFloat; }

std::string dtype_repr(DType t) {
  const DTypeInfo& i = info(t);
  const std::string name(i.name);
  return i.ml_dtypes ? "dtype(" + name + ")" : "dtype('" + name + "')";
}

uint16_t float_to_bf16(float x) {
  const auto bits = std::bit_cast<uint32_t>(x);
  // Truncating a NaN whose payload sits in the low half would leave an infinity.
  if (x != x) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Overflow needs no special case: rounding the largest finite floats up carries into the
  // all-ones exponent with a zero mantissa, which is infinity.
  return static_cast<uint16_t>(shift_round_even(bits, 16));
}

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

uint8_t float_to_e4m3fn(float x) {
  const auto bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint8_t>((bits & kSignBit) != 0 ? 0x80 : 0);
  const uint32_t a = bits & ~kSignBit;
  if ((a & kFloatExpMask) == kFloatExpMask) return sign | kE4M3FNNan;
  const uint32_t code = fp8_magnitude_code<E4M3FN>(a);
  if (code > kE4M3FNMaxFinite) return sign | kE4M3FNNan;
  return static_cast<uint8_t>(sign | code);
}

float e4m3fn_to_float(uint8_t bits) { return kE4M3FNValues[bits]; }

uint8_t float_to_e5m2(float x) {
  const auto bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint8_t>((bits & kSignBit) != 0 ? 0x80 : 0);
  const uint32_t a = bits & ~kSignBit;
  if (a > kFloatExpMask) return sign | kE5M2Nan;
  if (a == kFloatExpMask) return sign | kE5M2Inf;
  const uint32_t code = fp8_magnitude_code<E5M2>(a);
  if (code > kE5M2MaxFinite) return sign | kE5M2Inf;
  return static_cast<uint8_t>(sign | code);
}

float e5m2_to_float(uint8_t bits) { return kE5M2Values[bits]; }

float load_float(DType t, const void* data, int64_t i) {
  switch (t) {
    case DType::kFloat32: return read_element<float>(data, i);
    case DType::kBFloat16: return bf16_to_float(read_element<uint16_t>(data, i));
    case DType::kFloat8E4M3FN: return e4m3fn_to_float(read_element<uint8_t>(data, i));
    case DType::kFloat8E5M2: return e5m2_to_float(read_element<uint8_t>(data, i));
    default: throw_unsupported(t, "load_float");
  }
}

float flush_subnormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

float load_flushed(DType t, const void* data, int64_t i) {
  return flush_subnormal(load_float(t, data, i));
}

void store_float(DType t, void* data, int64_t i, float x) {
  switch (t) {
    case DType::kFloat32: return write_element<float>(data, i, x);
    case DType::kBFloat16: return write_element<uint16_t>(data, i, float_to_bf16(x));
    case DType::kFloat8E4M3FN: return write_element<uint8_t>(data, i, float_to_e4m3fn(x));
    case DType::kFloat8E5M2: return write_element<uint8_t>(data, i, float_to_e5m2(x));
    default: throw_unsupported(t, "store_float");
  }
}

float round_to(DType t, float x) {
  switch (t) {
    case DType::kFloat32: return x;
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(x));
    case DType::kFloat8E4M3FN: return e4m3fn_to_float(float_to_e4m3fn(x));
    case DType::kFloat8E5M2: return e5m2_to_float(float_to_e5m2(x));
    default: throw_unsupported(t, "round_to");
  }
}

float f16_to_float(uint16_t bits) {
  const float sign = (bits & 0x8000u) != 0 ? -1.0f : 1.0f;
  const int exp = (bits >> 10) & 0x1F;
  const int mant = bits & 0x3FF;
  if (exp == 0x1F) return mant != 0 ? std::copysign(NAN, sign) : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  return sign * std::ldexp(static_cast<float>(mant + 1024), exp - 25);
}

float round_double_to(DType t, double x) {
  const auto f = static_cast<float>(x);
  if (t == DType::kFloat32 || std::isnan(x) || static_cast<double>(f) == x) return round_to(t, f);
  // Round to odd: truncate toward zero, then set the last bit. float keeps at least two more
  // bits than any narrower type here, so the second rounding is then exact to nearest-even.
  float truncated = std::fabs(static_cast<double>(f)) > std::fabs(x) ? std::nextafter(f, 0.0f) : f;
  auto bits = std::bit_cast<uint32_t>(truncated);
  bits |= 1u;
  return round_to(t, std::bit_cast<float>(bits));
}

bool is_kernel_q_dtype(DType t) { return t == DType::kFloat32 || t == DType::kBFloat16; }

bool is_kernel_kv_dtype(DType t) {
  return is_kernel_q_dtype(t) || t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

bool is_pallas_extra_kv_dtype(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32: return true;
    default: return false;
  }
}

float load_as_float32(DType t, const void* data, int64_t i) {
  switch (t) {
    case DType::kFloat16: return f16_to_float(read_element<uint16_t>(data, i));
    case DType::kInt8: return static_cast<float>(read_element<int8_t>(data, i));
    case DType::kUInt8: return static_cast<float>(read_element<uint8_t>(data, i));
    case DType::kInt16: return static_cast<float>(read_element<int16_t>(data, i));
    case DType::kUInt16: return static_cast<float>(read_element<uint16_t>(data, i));
    case DType::kInt32: return static_cast<float>(read_element<int32_t>(data, i));
    case DType::kUInt32: return static_cast<float>(read_element<uint32_t>(data, i));
    default: return load_float(t, data, i);
  }
}

float kv_eff(DType q_dtype, DType kv_dtype, const std::optional<double>& scale, bool key,
             float x) {
  if (scale) return round_to(q_dtype, flush_subnormal(x * float32_scalar(*scale)));
  if (key && q_dtype == DType::kBFloat16 && dtype_is_integer(kv_dtype)) {
    return round_to(DType::kBFloat16, x);
  }
  return x;
}

int dtype_precision_bits(DType t) {
  switch (t) {
    case DType::kFloat32: return 24;
    case DType::kBFloat16: return 8;
    case DType::kFloat8E4M3FN: return 4;
    case DType::kFloat8E5M2: return 3;
    case DType::kFloat16: return 11;
    case DType::kFloat64: return 53;
    default: return 0;
  }
}

double dtype_min_normal(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kBFloat16: return 0x1p-126;
    case DType::kFloat8E4M3FN: return 0x1p-6;
    case DType::kFloat8E5M2:
    case DType::kFloat16: return 0x1p-14;
    case DType::kFloat64: return 0x1p-1022;
    default: return 0.0;
  }
}

double dtype_min_subnormal(DType t) {
  const int bits = dtype_precision_bits(t);
  return bits == 0 ? 0.0 : std::ldexp(dtype_min_normal(t), 1 - bits);
}

double dtype_ulp(DType t, double x) {
  const double ax = std::fabs(x);
  if (!(ax >= dtype_min_normal(t))) return dtype_min_subnormal(t);
  return std::ldexp(1.0, std::ilogb(ax) + 1 - dtype_precision_bits(t));
}

double dtype_finite_max(DType t) {
  switch (t) {
    case DType::kFloat32: return 3.4028234663852886e38;
    case DType::kBFloat16: return 3.3895313892515355e38;
    case DType::kFloat8E4M3FN: return 448.0;
    case DType::kFloat8E5M2: return 57344.0;
    case DType::kFloat16: return 65504.0;
    case DType::kFloat64: return 1.7976931348623157e308;
    default: return 0.0;
  }
}

}  // namespace rpa
