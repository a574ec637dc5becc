#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace rpa {
namespace {

// Expected values come from the bit layout written out here with std::ldexp, never from
// the code under test.

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t to_bits(float x) { return std::bit_cast<uint32_t>(x); }

// The parts of an 8-bit float format that the reference decoder needs.
struct Fp8Spec {
  const char* name;
  int exp_bits;
  int mant_bits;
  bool has_inf;  // IEEE-style top binade; otherwise only the all-ones code is NaN
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);

  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  int exp_field(int code) const { return (code >> mant_bits) & ((1 << exp_bits) - 1); }
  int mant(int code) const { return code & ((1 << mant_bits) - 1); }
  bool is_nan(int code) const {
    const bool top = exp_field(code) == (1 << exp_bits) - 1;
    return has_inf ? top && mant(code) != 0 : top && mant(code) == (1 << mant_bits) - 1;
  }
  bool is_inf(int code) const {
    return has_inf && exp_field(code) == (1 << exp_bits) - 1 && mant(code) == 0;
  }
  // The value the sign/exponent/mantissa formula gives, ignoring NaN and infinity, so that
  // it also yields the "next value past the largest finite one" that overflow rounds to.
  float formula(int code) const {
    const int e = exp_field(code);
    const int m = mant(code);
    const float magnitude =
        e == 0 ? std::ldexp(static_cast<float>(m), 1 - bias() - mant_bits)
               : std::ldexp(static_cast<float>((1 << mant_bits) + m), e - bias() - mant_bits);
    return (code & 0x80) != 0 ? -magnitude : magnitude;
  }
  // Largest finite positive code.
  int max_finite() const {
    int code = 0x7F;
    while (is_nan(code) || is_inf(code)) --code;
    return code;
  }
  // What a positive overflow encodes to.
  uint8_t overflow_code() const { return has_inf ? uint8_t{0x7C} : uint8_t{0x7F}; }
};

const Fp8Spec kE4M3FN{"e4m3fn", 4, 3, false, float_to_e4m3fn, e4m3fn_to_float};
const Fp8Spec kE5M2{"e5m2", 5, 2, true, float_to_e5m2, e5m2_to_float};

void expect_same_code(const Fp8Spec& f, float x, uint8_t expected) {
  const uint8_t got = f.encode(x);
  if (f.is_nan(expected)) {
    EXPECT_TRUE(f.is_nan(got)) << f.name << " x=" << x << " got=" << int{got};
    EXPECT_EQ(got & 0x80, expected & 0x80) << f.name << " x=" << x;
  } else {
    EXPECT_EQ(int{got}, int{expected}) << f.name << " x=" << x;
  }
}

void check_all_codes_decode(const Fp8Spec& f) {
  for (int code = 0; code < 256; ++code) {
    const float got = f.decode(static_cast<uint8_t>(code));
    if (f.is_nan(code)) {
      EXPECT_TRUE(std::isnan(got)) << f.name << " code=" << code;
      EXPECT_EQ(std::signbit(got), code >= 0x80) << f.name << " code=" << code;
    } else if (f.is_inf(code)) {
      EXPECT_EQ(got, code >= 0x80 ? -kInf : kInf) << f.name << " code=" << code;
    } else {
      EXPECT_EQ(to_bits(got), to_bits(f.formula(code))) << f.name << " code=" << code;
    }
  }
}

void check_all_codes_round_trip(const Fp8Spec& f) {
  for (int code = 0; code < 256; ++code) {
    if (f.is_nan(code)) continue;
    const auto c = static_cast<uint8_t>(code);
    EXPECT_EQ(int{f.encode(f.decode(c))}, code) << f.name;
  }
}

// Midpoints between every pair of adjacent finite values of one sign tie to the even code;
// the neighbouring floats go to the nearer value.
void check_midpoints(const Fp8Spec& f) {
  for (int code = 0; code < f.max_finite(); ++code) {
    for (const int sign : {0, 0x80}) {
      const int lo_code = sign | code;
      const int hi_code = sign | (code + 1);
      const float mid = (f.formula(lo_code) + f.formula(hi_code)) / 2;
      const int even = code % 2 == 0 ? lo_code : hi_code;
      const float toward_lo = std::nextafter(mid, f.formula(lo_code));
      const float toward_hi = std::nextafter(mid, f.formula(hi_code));
      EXPECT_EQ(int{f.encode(mid)}, even) << f.name << " mid=" << mid;
      EXPECT_EQ(int{f.encode(toward_lo)}, lo_code) << f.name << " mid=" << mid;
      EXPECT_EQ(int{f.encode(toward_hi)}, hi_code) << f.name << " mid=" << mid;
    }
  }
}

// Every bfloat16 value as float (all magnitudes, infinities, NaNs) and its two float
// neighbours, plus a deterministic spray of arbitrary floats.
std::vector<float> probe_floats() {
  std::vector<float> probes;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float x = from_bits(b << 16);
    probes.push_back(x);
    if (std::isfinite(x)) {
      probes.push_back(std::nextafter(x, kInf));
      probes.push_back(std::nextafter(x, -kInf));
    }
  }
  uint32_t state = 12345;
  for (int k = 0; k < 20000; ++k) {
    state = state * 1664525u + 1013904223u;
    probes.push_back(from_bits(state));
  }
  return probes;
}

// Reference round-to-nearest-even encoder. `ladder` holds the positive values of codes
// 0..max_finite()+1 in increasing order, the last being the virtual value overflow rounds
// to; x is placed between two rungs and compared with their exact midpoint.
uint8_t reference_encode(const Fp8Spec& f, const std::vector<float>& ladder, float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7F;  // only is_nan() of the result is compared
  const float a = std::fabs(x);
  const auto top = static_cast<int>(ladder.size()) - 1;
  const auto hi = static_cast<int>(std::upper_bound(ladder.begin(), ladder.end(), a) -
                                   ladder.begin());  // ladder[0] is 0, so hi >= 1
  int pick;
  if (a == ladder[hi - 1]) {
    pick = hi - 1;
  } else if (hi > top) {
    pick = top;
  } else {
    const float mid = (ladder[hi - 1] + ladder[hi]) / 2;  // exact: one more significant bit
    pick = a < mid ? hi - 1 : a > mid ? hi : (hi % 2 == 0 ? hi : hi - 1);
  }
  return sign | (pick == top ? f.overflow_code() : static_cast<uint8_t>(pick));
}

void check_against_reference(const Fp8Spec& f) {
  std::vector<float> ladder;
  for (int code = 0; code <= f.max_finite() + 1; ++code) ladder.push_back(f.formula(code));
  for (const float x : probe_floats()) expect_same_code(f, x, reference_encode(f, ladder, x));
}

TEST(Fp8Spec, FormulaMatchesHandDerivedValues) {
  // Spot checks of the test's own reference against the formats' documented constants.
  EXPECT_EQ(kE4M3FN.formula(0x7E), 448.0f);
  EXPECT_EQ(kE4M3FN.formula(0x38), 1.0f);
  EXPECT_EQ(kE4M3FN.formula(0x01), 0.001953125f);  // 2^-9
  EXPECT_EQ(kE4M3FN.formula(0x08), 0.015625f);     // 2^-6
  EXPECT_EQ(kE4M3FN.max_finite(), 0x7E);
  EXPECT_EQ(kE5M2.formula(0x7B), 57344.0f);
  EXPECT_EQ(kE5M2.formula(0x3C), 1.0f);
  EXPECT_EQ(kE5M2.formula(0x01), 1.52587890625e-05f);  // 2^-16
  EXPECT_EQ(kE5M2.max_finite(), 0x7B);
}

TEST(Float8E4M3FN, AllCodesDecode) { check_all_codes_decode(kE4M3FN); }

TEST(Float8E4M3FN, AllCodesRoundTrip) { check_all_codes_round_trip(kE4M3FN); }

TEST(Float8E4M3FN, NanCodes) {
  EXPECT_TRUE(std::isnan(e4m3fn_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3fn_to_float(0xFF)));
  EXPECT_FALSE(std::signbit(e4m3fn_to_float(0x7F)));
  EXPECT_TRUE(std::signbit(e4m3fn_to_float(0xFF)));
  // The rest of the top binade is finite in the "fn" format.
  EXPECT_EQ(e4m3fn_to_float(0x78), 256.0f);
  EXPECT_EQ(e4m3fn_to_float(0xFE), -448.0f);
}

TEST(Float8E4M3FN, MidpointsTieToEven) { check_midpoints(kE4M3FN); }

TEST(Float8E4M3FN, MatchesReferenceEncoder) { check_against_reference(kE4M3FN); }

TEST(Float8E4M3FN, SubnormalBoundary) {
  // 2^-6 is the smallest normal (0x08); 7 * 2^-9 the largest subnormal (0x07).
  EXPECT_EQ(float_to_e4m3fn(0.015625f), 0x08);
  EXPECT_EQ(float_to_e4m3fn(0.013671875f), 0x07);
  // 7.5 * 2^-9 ties between 0x07 (odd) and 0x08: even wins.
  EXPECT_EQ(float_to_e4m3fn(0.0146484375f), 0x08);
  // 0.5 * 2^-9 ties to 0, and its sign survives; anything above rounds up to 2^-9.
  EXPECT_EQ(float_to_e4m3fn(0.0009765625f), 0x00);
  EXPECT_EQ(float_to_e4m3fn(-0.0009765625f), 0x80);
  EXPECT_EQ(float_to_e4m3fn(std::nextafter(0.0009765625f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3fn(1.5f * 0.001953125f), 0x02);
  EXPECT_EQ(float_to_e4m3fn(1e-30f), 0x00);
  EXPECT_EQ(float_to_e4m3fn(-1e-30f), 0x80);
  EXPECT_EQ(float_to_e4m3fn(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(float_to_e4m3fn(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3fn(-0.0f), 0x80);
}

TEST(Float8E4M3FN, OverflowBecomesNan) {
  EXPECT_EQ(float_to_e4m3fn(448.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3fn(-448.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3fn(464.0f), 0x7E);  // midpoint to 480 ties to even 448
  EXPECT_EQ(float_to_e4m3fn(-464.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3fn(std::nextafter(464.0f, kInf)), 0x7F);
  EXPECT_EQ(float_to_e4m3fn(std::nextafter(-464.0f, -kInf)), 0xFF);
  EXPECT_EQ(float_to_e4m3fn(480.0f), 0x7F);
  EXPECT_EQ(float_to_e4m3fn(1e6f), 0x7F);
  EXPECT_EQ(float_to_e4m3fn(std::numeric_limits<float>::max()), 0x7F);
  EXPECT_EQ(float_to_e4m3fn(-std::numeric_limits<float>::max()), 0xFF);
}

TEST(Float8E4M3FN, InfAndNanBecomeNan) {
  EXPECT_EQ(float_to_e4m3fn(kInf), 0x7F);
  EXPECT_EQ(float_to_e4m3fn(-kInf), 0xFF);
  EXPECT_EQ(float_to_e4m3fn(kNan), 0x7F);
  EXPECT_EQ(float_to_e4m3fn(-kNan), 0xFF);
  EXPECT_EQ(float_to_e4m3fn(from_bits(0x7F800001)), 0x7F);  // payload only in low bits
}

TEST(Float8E5M2, AllCodesDecode) { check_all_codes_decode(kE5M2); }

TEST(Float8E5M2, AllCodesRoundTrip) { check_all_codes_round_trip(kE5M2); }

TEST(Float8E5M2, SpecialCodes) {
  EXPECT_EQ(e5m2_to_float(0x7C), kInf);
  EXPECT_EQ(e5m2_to_float(0xFC), -kInf);
  for (const int code : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) {
    EXPECT_TRUE(std::isnan(e5m2_to_float(static_cast<uint8_t>(code)))) << code;
    EXPECT_EQ(std::signbit(e5m2_to_float(static_cast<uint8_t>(code))), code >= 0x80) << code;
  }
}

TEST(Float8E5M2, MidpointsTieToEven) { check_midpoints(kE5M2); }

TEST(Float8E5M2, MatchesReferenceEncoder) { check_against_reference(kE5M2); }

TEST(Float8E5M2, SubnormalBoundary) {
  const float unit = 1.52587890625e-05f;     // 2^-16, the smallest subnormal
  EXPECT_EQ(float_to_e5m2(4 * unit), 0x04);  // 2^-14, the smallest normal
  EXPECT_EQ(float_to_e5m2(3 * unit), 0x03);
  EXPECT_EQ(float_to_e5m2(3.5f * unit), 0x04);  // ties to even
  EXPECT_EQ(float_to_e5m2(2.5f * unit), 0x02);
  EXPECT_EQ(float_to_e5m2(0.5f * unit), 0x00);
  EXPECT_EQ(float_to_e5m2(-0.5f * unit), 0x80);
  EXPECT_EQ(float_to_e5m2(std::nextafter(0.5f * unit, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e5m2(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(float_to_e5m2(-0.0f), 0x80);
}

TEST(Float8E5M2, OverflowBecomesInf) {
  EXPECT_EQ(float_to_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(float_to_e5m2(std::nextafter(61440.0f, 0.0f)), 0x7B);
  EXPECT_EQ(float_to_e5m2(61440.0f), 0x7C);  // midpoint to 65536 ties to even = up
  EXPECT_EQ(float_to_e5m2(-61440.0f), 0xFC);
  EXPECT_EQ(float_to_e5m2(65536.0f), 0x7C);
  EXPECT_EQ(float_to_e5m2(std::numeric_limits<float>::max()), 0x7C);
  EXPECT_EQ(float_to_e5m2(kInf), 0x7C);
  EXPECT_EQ(float_to_e5m2(-kInf), 0xFC);
}

TEST(Float8E5M2, NanStaysNanWithSign) {
  for (const float x : {kNan, -kNan, from_bits(0x7F800001), from_bits(0xFF800001)}) {
    const uint8_t code = float_to_e5m2(x);
    EXPECT_TRUE(kE5M2.is_nan(code)) << int{code};
    EXPECT_EQ(code >= 0x80, std::signbit(x)) << int{code};
  }
}

TEST(BFloat16, AllPatternsRoundTrip) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float x = bf16_to_float(bits);
    const float expected = from_bits(b << 16);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(x)) << b;
      const uint16_t back = float_to_bf16(x);
      ASSERT_TRUE(std::isnan(from_bits(uint32_t{back} << 16))) << b;
      ASSERT_EQ(back & 0x8000, bits & 0x8000) << b;
    } else {
      ASSERT_EQ(to_bits(x), to_bits(expected)) << b;
      ASSERT_EQ(float_to_bf16(x), bits) << b;
    }
  }
}

// Between each pair of adjacent bfloat16 values of one sign, the exact midpoint ties to
// the even pattern and its float neighbours go to the nearer one. The pair above the
// largest finite value is (max, inf), whose "midpoint" is the midpoint to 2^128.
TEST(BFloat16, MidpointsTieToEven) {
  for (uint32_t b = 0; b < 0x7F80; ++b) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const double lo = from_bits((sign | b) << 16);
      const double hi = b + 1 == 0x7F80 ? std::ldexp(sign != 0 ? -1.0 : 1.0, 128)
                                        : double{from_bits((sign | (b + 1)) << 16)};
      const auto mid = static_cast<float>((lo + hi) / 2);  // exact in float
      const uint32_t even = b % 2 == 0 ? sign | b : sign | (b + 1);
      ASSERT_EQ(float_to_bf16(mid), even) << b;
      ASSERT_EQ(float_to_bf16(std::nextafter(mid, static_cast<float>(lo))), sign | b) << b;
      ASSERT_EQ(float_to_bf16(std::nextafter(mid, static_cast<float>(hi))), sign | (b + 1)) << b;
    }
  }
}

TEST(BFloat16, TiesToEvenNearOne) {
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // -> 1
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // -> 1 + 2^-6
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(float_to_bf16(-1.0f - std::ldexp(1.0f, -8)), 0xBF80);
}

TEST(BFloat16, OverflowToInf) {
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7F7FFF)), 0x7F7F);  // just below the midpoint
  EXPECT_EQ(float_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(float_to_bf16(-kInf), 0xFF80);
}

TEST(BFloat16, SubnormalsAndZero) {
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(from_bits(0x00008000)), 0x0000);  // tie to even 0
  EXPECT_EQ(float_to_bf16(from_bits(0x80008000)), 0x8000);
  EXPECT_EQ(float_to_bf16(from_bits(0x00008001)), 0x0001);
  EXPECT_EQ(float_to_bf16(from_bits(0x00018000)), 0x0002);  // tie to even 2
  EXPECT_EQ(float_to_bf16(from_bits(0x007FFFFF)), 0x0080);  // rounds up to the min normal
  EXPECT_TRUE(std::signbit(bf16_to_float(0x8000)));
}

TEST(BFloat16, NanKeepsSign) {
  // Payloads confined to the low 16 bits must not truncate to infinity.
  for (const uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t b = float_to_bf16(from_bits(bits));
    EXPECT_TRUE(std::isnan(bf16_to_float(b))) << std::hex << bits;
    EXPECT_EQ(b & 0x8000, (bits >> 16) & 0x8000) << std::hex << bits;
  }
}

TEST(RoundTo, EachFloatType) {
  EXPECT_EQ(round_to(DType::kFloat32, 0.1f), 0.1f);
  EXPECT_EQ(round_to(DType::kFloat32, -kInf), -kInf);
  EXPECT_TRUE(std::isnan(round_to(DType::kFloat32, kNan)));

  EXPECT_EQ(round_to(DType::kBFloat16, 1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(round_to(DType::kBFloat16, 3.0f), 3.0f);
  EXPECT_EQ(round_to(DType::kBFloat16, 0.1f), 0.10009765625f);  // 0x3DCD

  EXPECT_EQ(round_to(DType::kFloat8E4M3FN, 0.3f), 0.3125f);
  EXPECT_EQ(round_to(DType::kFloat8E4M3FN, -17.0f), -16.0f);  // tie, 16 has even mantissa
  EXPECT_EQ(round_to(DType::kFloat8E4M3FN, 464.0f), 448.0f);
  EXPECT_TRUE(std::isnan(round_to(DType::kFloat8E4M3FN, 500.0f)));
  EXPECT_TRUE(std::isnan(round_to(DType::kFloat8E4M3FN, kInf)));

  EXPECT_EQ(round_to(DType::kFloat8E5M2, 0.3f), 0.3125f);
  EXPECT_EQ(round_to(DType::kFloat8E5M2, 1.125f), 1.0f);  // tie to even
  EXPECT_EQ(round_to(DType::kFloat8E5M2, 1.375f), 1.5f);  // tie to even
  EXPECT_EQ(round_to(DType::kFloat8E5M2, 70000.0f), kInf);
  EXPECT_TRUE(std::isnan(round_to(DType::kFloat8E5M2, -kNan)));
}

TEST(RoundTo, RejectsOtherTypes) {
  for (const DType t :
       {DType::kInt32, DType::kInt8, DType::kFloat16, DType::kFloat64, DType::kBool}) {
    EXPECT_THROW(round_to(t, 1.0f), std::logic_error) << dtype_name(t);
  }
}

TEST(LoadStoreFloat, SmallBuffers) {
  // One byte of leading padding makes every element misaligned.
  std::array<unsigned char, 1 + 3 * 4> buf{};
  void* data = buf.data() + 1;

  store_float(DType::kFloat32, data, 2, -2.5f);
  EXPECT_EQ(load_float(DType::kFloat32, data, 2), -2.5f);
  uint32_t f32;
  std::memcpy(&f32, buf.data() + 1 + 8, 4);
  EXPECT_EQ(f32, 0xC0200000u);

  buf.fill(0);
  store_float(DType::kBFloat16, data, 1, 1.0f + std::ldexp(1.0f, -8));
  store_float(DType::kBFloat16, data, 0, -3.0f);
  EXPECT_EQ(buf[3], 0x80);  // little-endian 0x3F80
  EXPECT_EQ(buf[4], 0x3F);
  EXPECT_EQ(buf[1], 0x40);  // little-endian 0xC040
  EXPECT_EQ(buf[2], 0xC0);
  EXPECT_EQ(load_float(DType::kBFloat16, data, 1), 1.0f);
  EXPECT_EQ(load_float(DType::kBFloat16, data, 0), -3.0f);

  buf.fill(0);
  store_float(DType::kFloat8E4M3FN, data, 0, 1.0f);
  store_float(DType::kFloat8E4M3FN, data, 1, -448.0f);
  store_float(DType::kFloat8E4M3FN, data, 2, 1000.0f);
  EXPECT_EQ(buf[1], 0x38);
  EXPECT_EQ(buf[2], 0xFE);
  EXPECT_EQ(buf[3], 0x7F);
  EXPECT_EQ(load_float(DType::kFloat8E4M3FN, data, 1), -448.0f);
  EXPECT_TRUE(std::isnan(load_float(DType::kFloat8E4M3FN, data, 2)));

  buf.fill(0);
  store_float(DType::kFloat8E5M2, data, 0, 1.0f);
  store_float(DType::kFloat8E5M2, data, 1, -kInf);
  EXPECT_EQ(buf[1], 0x3C);
  EXPECT_EQ(buf[2], 0xFC);
  EXPECT_EQ(load_float(DType::kFloat8E5M2, data, 0), 1.0f);
  EXPECT_EQ(load_float(DType::kFloat8E5M2, data, 1), -kInf);
}

TEST(LoadStoreFloat, RejectsOtherTypes) {
  std::array<unsigned char, 8> buf{};
  EXPECT_THROW(load_float(DType::kInt32, buf.data(), 0), std::logic_error);
  EXPECT_THROW(store_float(DType::kFloat64, buf.data(), 0, 1.0f), std::logic_error);
  EXPECT_THROW(store_float(DType::kFloat16, buf.data(), 0, 1.0f), std::logic_error);
}

struct DTypeRow {
  DType type;
  const char* name;
  int size;
  bool is_integer;
  bool is_float;
  const char* repr;
};

constexpr std::array<DTypeRow, 15> kRows = {{
    {DType::kFloat32, "float32", 4, false, true, "dtype('float32')"},
    {DType::kBFloat16, "bfloat16", 2, false, true, "dtype(bfloat16)"},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 1, false, true, "dtype(float8_e4m3fn)"},
    {DType::kFloat8E5M2, "float8_e5m2", 1, false, true, "dtype(float8_e5m2)"},
    {DType::kInt32, "int32", 4, true, false, "dtype('int32')"},
    {DType::kInt64, "int64", 8, true, false, "dtype('int64')"},
    {DType::kInt16, "int16", 2, true, false, "dtype('int16')"},
    {DType::kInt8, "int8", 1, true, false, "dtype('int8')"},
    {DType::kUInt8, "uint8", 1, true, false, "dtype('uint8')"},
    {DType::kUInt16, "uint16", 2, true, false, "dtype('uint16')"},
    {DType::kUInt32, "uint32", 4, true, false, "dtype('uint32')"},
    {DType::kUInt64, "uint64", 8, true, false, "dtype('uint64')"},
    {DType::kFloat16, "float16", 2, false, true, "dtype('float16')"},
    {DType::kFloat64, "float64", 8, false, true, "dtype('float64')"},
    {DType::kBool, "bool", 1, false, false, "dtype('bool')"},
}};

TEST(DTypeInfo, EveryTypeCovered) {
  EXPECT_EQ(static_cast<size_t>(DType::kBool) + 1, kRows.size());
}

TEST(DTypeInfo, NamesRoundTrip) {
  for (const DTypeRow& row : kRows) {
    EXPECT_EQ(dtype_name(row.type), row.name);
    EXPECT_EQ(dtype_from_name(row.name), row.type) << row.name;
  }
  EXPECT_EQ(dtype_from_name("nope"), std::nullopt);
  EXPECT_EQ(dtype_from_name(""), std::nullopt);
  EXPECT_EQ(dtype_from_name("Float32"), std::nullopt);
}

TEST(DTypeInfo, SizesAndKinds) {
  for (const DTypeRow& row : kRows) {
    EXPECT_EQ(dtype_size(row.type), row.size) << row.name;
    EXPECT_EQ(dtype_bits(row.type), 8 * row.size) << row.name;
    EXPECT_EQ(dtype_is_integer(row.type), row.is_integer) << row.name;
    EXPECT_EQ(dtype_is_float(row.type), row.is_float) << row.name;
  }
}

TEST(DTypeInfo, Repr) {
  for (const DTypeRow& row : kRows) EXPECT_EQ(dtype_repr(row.type), row.repr);
}


// Double rounding through float can land on the wrong side of a tie; these values sit just
// off a midpoint by less than float can hold.
TEST(RoundDoubleTo, RoundsOnceNotTwice) {
  const double above = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);  // bf16 midpoint + tiny
  EXPECT_EQ(round_double_to(DType::kBFloat16, above), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(round_double_to(DType::kBFloat16, -above), -(1.0f + std::ldexp(1.0f, -7)));
  const double below = 1.0 + std::ldexp(1.0, -8) - std::ldexp(1.0, -30);
  EXPECT_EQ(round_double_to(DType::kBFloat16, below), 1.0f);
  EXPECT_EQ(round_double_to(DType::kBFloat16, 1.0 + std::ldexp(1.0, -8)), 1.0f);  // tie: even
  // e4m3fn near 1 has spacing 2^-3: midpoint 1 + 2^-4.
  EXPECT_EQ(round_double_to(DType::kFloat8E4M3FN, 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40)),
            1.125f);
  EXPECT_EQ(round_double_to(DType::kFloat8E5M2, 1.0 + std::ldexp(1.0, -3) + std::ldexp(1.0, -40)),
            1.25f);
  EXPECT_EQ(round_double_to(DType::kFloat32, 1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -40)),
            1.0f + std::ldexp(1.0f, -23));
}

TEST(RoundDoubleTo, ExtremesAndSpecials) {
  EXPECT_TRUE(std::isnan(round_double_to(DType::kBFloat16, std::nan(""))));
  EXPECT_EQ(round_double_to(DType::kBFloat16, 1e300), INFINITY);
  EXPECT_EQ(round_double_to(DType::kFloat32, -1e300), -INFINITY);
  EXPECT_TRUE(std::isnan(round_double_to(DType::kFloat8E4M3FN, 1e300)));  // no inf in e4m3fn
  EXPECT_EQ(round_double_to(DType::kBFloat16, 1e-300), 0.0f);
  EXPECT_TRUE(std::signbit(round_double_to(DType::kBFloat16, -1e-300)));
  // Exact values pass through unchanged.
  EXPECT_EQ(round_double_to(DType::kFloat8E4M3FN, 448.0), 448.0f);
  EXPECT_EQ(round_double_to(DType::kBFloat16, 0.5), 0.5f);
}

TEST(Float16, DecodesIeeeHalf) {
  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_to_float(0x4248), 3.140625f);        // 1.5703125 * 2
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);         // max finite
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_float(0x7C00), INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
}

}  // namespace
}  // namespace rpa
