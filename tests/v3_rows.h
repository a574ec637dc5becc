// Rows of one tpu-inference v3 call laid out for the accumulation-bound tests
// (v3_power_test, v3_family_test): one sequence of q_len rows (1: a decode call; more: the
// mixed pass, causal) over kv_len keys on consecutive pages of 16, 2 q heads over 1 kv head,
// with standard-normal data or with the logits and values of an adversarial shape.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "tests/v3_builder.h"

namespace rpa::test {

// The logits and values of each key (per q head alike; V per column c).
enum class RowShape : uint8_t {
  kNormal,     // q, K, V standard normal (q scaled by q_std), sm_scale 1/sqrt(head_dim)
  kEqual,      // every logit q_std / 3 (not a bfloat16 value: p = exp(s - m) is not 1);
               // v_tc = b_c in 1/3, 0.1, 1.0000001, 0.7: equal terms whose sums never cancel
  kGeometric,  // logits falling linearly by 16 over the keys; v_tc = 0.99 / 1.02 alternating
  kDominant,   // one key (t = kv_len / 3) 12 above the others (0); its v 1, the others b_c
  kRamp,       // logits normal; v_tc = ((t + 131 c) mod kv_len + 1) / (kv_len + 1)
};

inline const char* row_shape_name(RowShape s) {
  switch (s) {
    case RowShape::kNormal: return "normal";
    case RowShape::kEqual: return "equal";
    case RowShape::kGeometric: return "geometric";
    case RowShape::kDominant: return "dominant";
    case RowShape::kRamp: return "ramp";
  }
  return "?";
}

struct RowSpec {
  Dialect dialect = Dialect::kTpuInferenceV3;
  DType q = DType::kBFloat16, kv = DType::kBFloat16;
  int64_t kv_len = 128;
  int64_t q_len = 1;
  std::optional<int64_t> window;
  RowShape shape = RowShape::kNormal;
  uint32_t seed = 1;
  double q_std = 1.0;
};

inline std::string row_name(const RowSpec& s) {
  return std::string(dialect_name(s.dialect)) + " " + std::string(dtype_name(s.q)) + "/" +
         std::string(dtype_name(s.kv)) + " " + row_shape_name(s.shape) + " kv_len " +
         std::to_string(s.kv_len) + " q_len " + std::to_string(s.q_len) +
         (s.window ? " window " + std::to_string(*s.window) : "");
}

struct BuiltRows {
  V3Builder b;
  V3Inputs in;
  V3Params p;
};

// The call: kernel.py with no block sizes named (tests name them), hd64 with 64-page KV
// blocks of q_len rows.
inline BuiltRows build_rows(const RowSpec& s) {
  BuiltRows r;
  V3Builder& b = r.b;
  b.dialect = s.dialect;
  b.q = s.q;
  b.kv = s.kv;
  b.hq = 2;
  b.hkv = 1;
  b.d = s.dialect == Dialect::kTpuInferenceV3Hd64 ? 64 : 128;
  b.page_size = 16;
  b.pps = (s.kv_len + 15) / 16;
  b.pages = b.pps + 1;
  b.max_seqs = 1;
  b.tokens = s.q_len;
  b.seqs = {{static_cast<int32_t>(s.q_len), static_cast<int32_t>(s.kv_len)}};
  b.fill = 0.0f;
  r.in = b.build();
  const int32_t decode = s.q_len == 1 ? 1 : 0;
  r.in.distribution.set_int(0, decode);
  r.in.distribution.set_int(1, decode);
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal;
  const double base[] = {1.0 / 3.0, 0.1, 1.0000001, 0.7};
  const int64_t D = b.d, new0 = s.kv_len - s.q_len;
  // Key t's K (lane 0 carries the logit under q = e_0, sm_scale 1) and V.
  const auto key = [&](int64_t t, int64_t c) -> float {
    switch (s.shape) {
      case RowShape::kNormal:
      case RowShape::kRamp: return normal(rng);
      case RowShape::kEqual: return c == 0 ? static_cast<float>(s.q_std / 3.0) : 0.0f;
      case RowShape::kGeometric:
        return c == 0 ? static_cast<float>(-16.0 * static_cast<double>(t) / static_cast<double>(s.kv_len)) : 0.0f;
      case RowShape::kDominant: return c == 0 && t == s.kv_len / 3 ? 12.0f : 0.0f;
    }
    return 0.0f;
  };
  const auto value = [&](int64_t t, int64_t c) -> float {
    switch (s.shape) {
      case RowShape::kNormal: return normal(rng);
      case RowShape::kRamp:
        return static_cast<float>(static_cast<double>((t + 131 * c) % s.kv_len + 1) /
                                  static_cast<double>(s.kv_len + 1));
      case RowShape::kEqual: return static_cast<float>(base[c % 4]);
      case RowShape::kGeometric: return (t + c) % 2 == 0 ? 0.99f : 1.02f;
      case RowShape::kDominant: return t == s.kv_len / 3 ? 1.0f : static_cast<float>(base[c % 4]);
    }
    return 0.0f;
  };
  for (int64_t t = 0; t < s.kv_len; ++t) {
    for (int64_t c = 0; c < D; ++c) {
      const float k = key(t, c), v = value(t, c);
      if (t < new0) {
        r.in.kv_cache.set_float(at(b, 1 + t / 16, t % 16, 0, false, c), k);
        r.in.kv_cache.set_float(at(b, 1 + t / 16, t % 16, 0, true, c), v);
      } else {
        r.in.keys.set_float((t - new0) * D + c, k);
        r.in.values.set_float((t - new0) * D + c, v);
      }
    }
  }
  const bool normal_q = s.shape == RowShape::kNormal || s.shape == RowShape::kRamp;
  for (int64_t i = 0; i < r.in.queries.numel(); ++i) {
    const float q = normal_q ? static_cast<float>(s.q_std) * normal(rng) : (i % D == 0 ? 1.0f : 0.0f);
    r.in.queries.set_float(i, q);
  }
  r.p.sm_scale = normal_q ? 1.0 / std::sqrt(static_cast<double>(D)) : 1.0;
  r.p.sliding_window = s.window;
  if (s.dialect == Dialect::kTpuInferenceV3Hd64) {
    r.p.num_kv_pages_per_block = 64;
    r.p.num_queries_per_block = s.q_len;
  }
  return r;
}

}  // namespace rpa::test
