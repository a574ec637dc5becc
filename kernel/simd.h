// One float32 vector of the build's widest unit (AVX-512, else AVX2 + FMA, else one float)
// and the loads that widen a KV element type to it in registers: bfloat16 by a shift,
// float8 through the half-precision converter. Every operation has one fixed order, so a
// sum built from these never depends on a pointer's alignment or on the thread that runs
// it. Scalar tails use kv_load_one, which gives the same values, and fma_one, which rounds
// as one lane of fma.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace rpa::simd {

// KV element types the vector loads know. Each loads as load_as_float32 does (exactly).
struct F32 {
  using Elem = float;
};
struct BF16 {
  using Elem = uint16_t;
};
struct E4M3 {  // float8_e4m3fn: no infinities; 0x7f / 0xff are NaN
  using Elem = uint8_t;
};
struct E5M2 {  // float8_e5m2: the upper byte of an IEEE half
  using Elem = uint8_t;
};

// Element i of a KV row as float32, one at a time.
template <class Kv>
inline float kv_load_one(const typename Kv::Elem* p, int64_t i) {
  if constexpr (std::is_same_v<Kv, F32>) {
    return p[i];
  } else if constexpr (std::is_same_v<Kv, BF16>) {
    const uint32_t word = uint32_t{p[i]} << 16;
    float x;
    std::memcpy(&x, &word, sizeof x);
    return x;
  } else {
    // float8: sign, exponent and mantissa placed into a float32 by hand (no subnormal
    // float32 is ever formed, so flush-to-zero modes cannot change the value).
    const uint32_t b = p[i];
    const uint32_t sign = (b & 0x80u) << 24;
    constexpr int kMant = std::is_same_v<Kv, E4M3> ? 3 : 2;
    constexpr int kBias = std::is_same_v<Kv, E4M3> ? 7 : 15;
    const uint32_t e = (b & 0x7fu) >> kMant;
    const uint32_t m = b & ((1u << kMant) - 1);
    float mag;
    if constexpr (std::is_same_v<Kv, E4M3>) {
      if ((b & 0x7fu) == 0x7fu) return std::numeric_limits<float>::quiet_NaN();
    } else {
      if (e == 31) {
        return m == 0 ? (sign ? -std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::infinity())
                      : std::numeric_limits<float>::quiet_NaN();
      }
    }
    if (e == 0) {  // subnormal: m * 2^(1 - bias - mant), exact in float32
      mag = static_cast<float>(m) * (1.0f / static_cast<float>(1u << (kBias - 1 + kMant)));
    } else {
      const uint32_t word = ((e + 127u - kBias) << 23) | (m << (23 - kMant));
      std::memcpy(&mag, &word, sizeof mag);
    }
    return sign ? -mag : mag;
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

inline constexpr int kLanes = 16;
inline constexpr const char* kName = "AVX-512";
using Vec = __m512;
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec set1(float x) { return _mm512_set1_ps(x); }
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
// One lane of fma, for scalar tails (std::fma is one instruction here).
inline float fma_one(float a, float b, float c) { return std::fma(a, b, c); }
inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
// A fixed tree: halves, then quarters, ... (the same order on every call).
inline float sum(Vec v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 e = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(e, _mm_movehdup_ps(e)));
}
template <class Kv>
inline Vec kv_load(const typename Kv::Elem* p) {
  if constexpr (std::is_same_v<Kv, F32>) {
    return _mm512_loadu_ps(p);
  } else if constexpr (std::is_same_v<Kv, BF16>) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if constexpr (std::is_same_v<Kv, E5M2>) {
      return _mm512_cvtph_ps(_mm256_slli_epi16(b, 8));  // exact: e5m2 is a truncated half
    } else {
      // e4m3fn as a half: sign to bit 15, exponent and mantissa to bits 7..13; the half's
      // bias is 8 more, so scale by 2^8 (exact). The half converter keeps subnormal halves.
      const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
      const __m256i mag = _mm256_and_si256(b, _mm256_set1_epi16(0x7f));
      const __m512 x = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_or_si256(sign, _mm256_slli_epi16(mag, 7))),
                                     _mm512_set1_ps(256.0f));
      const __mmask16 nan = _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f));
      return _mm512_mask_mov_ps(x, nan, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
    }
  }
}

#if defined(__AVX512BF16__)
// AVX-512 BF16: acc + the products of 32 bfloat16 pairs, each lane adding its two
// products (exact in float32) in turn; denormal inputs count as 0, as under the kernel's
// flush-to-zero.
inline constexpr bool kBf16Dot = true;
inline Vec bf16_dot(Vec acc, const uint16_t* a, const uint16_t* b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(a), (__m512bh)_mm512_loadu_si512(b));
}
#else
inline constexpr bool kBf16Dot = false;
#endif

// v rounded to bfloat16 (to nearest, ties to even; a NaN stays a quiet NaN of its sign and
// high payload), as float_to_bf16 does, into kLanes elements at p.
inline void store_bf16(uint16_t* p, Vec v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i out = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(out));
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

inline constexpr int kLanes = 8;
inline constexpr const char* kName = "AVX2 + FMA";
inline constexpr bool kBf16Dot = false;
using Vec = __m256;
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec set1(float x) { return _mm256_set1_ps(x); }
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float fma_one(float a, float b, float c) { return std::fma(a, b, c); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
inline float sum(Vec v) {
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 e = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(e, _mm_movehdup_ps(e)));
}
template <class Kv>
inline Vec kv_load(const typename Kv::Elem* p) {
  if constexpr (std::is_same_v<Kv, F32>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<Kv, BF16>) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    if constexpr (std::is_same_v<Kv, E5M2>) {
      return _mm256_cvtph_ps(_mm_slli_epi16(b, 8));
    } else {  // as in the AVX-512 branch
      const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
      const __m128i mag = _mm_and_si128(b, _mm_set1_epi16(0x7f));
      const __m256 x = _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(sign, _mm_slli_epi16(mag, 7))),
                                     _mm256_set1_ps(256.0f));
      const __m256 nan = _mm256_castsi256_ps(
          _mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f))));
      return _mm256_blendv_ps(x, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()), nan);
    }
  }
}

// v rounded to bfloat16 as float_to_bf16 does (see the AVX-512 branch), into 8 elements.
inline void store_bf16(uint16_t* p, Vec v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i high = _mm256_srli_epi32(bits, 16);
  const __m256i lsb = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i out = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
  // 32-bit lanes to 16 bits (each fits): pack within 128-bit halves, then put them in order.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(out, out), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

#else

inline constexpr int kLanes = 1;
inline constexpr const char* kName = "scalar";
inline constexpr bool kBf16Dot = false;
using Vec = float;
inline Vec zero() { return 0.0f; }
inline Vec set1(float x) { return x; }
inline Vec load(const float* p) { return *p; }
inline void store(float* p, Vec v) { *p = v; }
// Not std::fma: without FMA hardware (the baseline build of fuzz/build.sh) that is a
// software routine, tens of times slower; every scalar sum keeps this one form (two
// roundings: the build has -ffp-contract=off).
inline Vec fma(Vec a, Vec b, Vec c) { return a * b + c; }
inline float fma_one(float a, float b, float c) { return fma(a, b, c); }
inline Vec mul(Vec a, Vec b) { return a * b; }
inline Vec div(Vec a, Vec b) { return a / b; }
inline float sum(Vec v) { return v; }
template <class Kv>
inline Vec kv_load(const typename Kv::Elem* p) {
  return kv_load_one<Kv>(p, 0);
}
inline void store_bf16(uint16_t* p, Vec v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  *p = v != v ? static_cast<uint16_t>((bits >> 16) | 0x40u)
              : static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

#endif

}  // namespace rpa::simd
