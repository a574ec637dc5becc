#include "oracle/dot_precision.h"

#include <cmath>
#include <optional>
#include <string_view>

#include "reference/semantics.h"


namespace rpa {

std::optional<DotPasses> parse_dot_passes(std::string_view text) {
  if (text == "6") return DotPasses::kSix;
  if (text == "3") return DotPasses::kThree;
  if (text == "1") return DotPasses::kOne;
  return std::nullopt;
}

int dot_pass_count(DotPasses passes) { return static_cast<int>(passes); }

// Each float32 x splits exactly into bfloat16s x = x1 + x2 + x3 with |x2| <= 2^-8 |x|,
// |x3| <= 2^-16 |x| (8 significand bits each). A bfloat16 (or float8) value is x1 alone.
// - Six passes (float32 contract precision, Precision.HIGHEST): a1 b1 + a1 b2 + a2 b1 +
//   a2 b2 + a1 b3 + a3 b1, dropping a2 b3 + a3 b2 + a3 b3 <= (2 * 2^-24 + 2^-32) |a b| <=
//   2^-22 |a b|; nothing is dropped with one exact operand (b2 = b3 = 0).
// - Three passes (Precision.HIGH, bf16_3x): a1 b1 + a1 b2 + a2 b1, dropping a2 b2 + a1 b3 +
//   a3 b1 <= (2^-16 + 2^-16 + 2^-16 + ...) |a b| <= 2^-14 |a b|; with b exact, a3 b1 <=
//   2^-16 |a b|.
// - One pass (XLA's DEFAULT on a TPU): a1 b1, each operand rounded to bfloat16 (half an ulp,
//   2^-9 relative, but the split above bounds the rest by 2^-8 |x|): |a b - a1 b1| <=
//   (2^-8 + 2^-8 + 2^-16) |a b| <= 2^-7 (1 + 2^-7) |a b|; 2^-8 |a b| with b exact. This is
//   where p itself is rounded to bfloat16 on its way into p.V.
// Products of exact bfloat16 values are exact in every mode (the MXU multiplies bfloat16s
// exactly and accumulates in float32).
double mxu_product_error(DotPasses passes, bool a_float32, bool b_float32) {
  const int wide = (a_float32 ? 1 : 0) + (b_float32 ? 1 : 0);
  if (wide == 0) return 0.0;
  switch (passes) {
    case DotPasses::kSix: return wide == 2 ? std::ldexp(1.0, -22) : 0.0;
    case DotPasses::kThree: return wide == 2 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -16);
    case DotPasses::kOne:
      return wide == 2 ? std::ldexp(1.0, -7) + std::ldexp(1.0, -14) : std::ldexp(1.0, -8);
  }
  return 0.0;
}

double most_logit_error(DotPasses passes) {
  return kLeastLogitError + mxu_product_error(passes, true, true);
}

}  // namespace rpa
