// Errors below the tolerance: the signed error of an output in units of its dtype's last
// place (ulp), and the test for a systematic bias (DESIGN.md section 6; rule derived in
// bias.cc). A kernel that truncates its final cast stays inside every tolerance, yet moves
// every output of every layer the same way: this sees it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace rpa {

// One statistic: the sum of the per-element errors x_i (in ulps), and the sum over units
// j (the (row, head) pairs) of the square of each unit's summed error, from which the
// standard error about zero follows.
struct BiasSum {
  double sum = 0.0;
  double unit_sq = 0.0;
};

struct BiasStats {
  int64_t elements = 0;  // elements counted: both sides finite, |want| a normal number
  int64_t exact = 0;     // ... of which got == want
  int64_t units = 0;     // (row, head) units with at least one counted element
  // Whether biased() can say yes: the output dtype is narrower than the float32 accumulator
  // (bfloat16), so its final cast rounds (derivation in bias.cc).
  bool judged = false;
  // x_i = (got - want) in steps of the dtype at the smaller of |got| and |want| (ulps),
  // clipped to +-kBiasClipUlps: a bias toward +inf or -inf.
  BiasSum signed_err;
  // x_i = sign(want) (got - want) in the same steps, negative toward zero: truncation.
  BiasSum magnitude_err;

  // Accumulates one (row, head) unit: call add() per element, then end_unit().
  void add(double got, double want, DType dtype);
  void end_unit();

  double mean_signed() const;
  double mean_magnitude() const;
  // The standard error of each mean about zero: sqrt(unit_sq) / elements.
  double se_signed() const;
  double se_magnitude() const;
  double exact_share() const;  // exact / elements (1 with no element counted)
  // The verdict: judged, and |mean| > kBiasSigmas standard errors and > kBiasMinUlps for
  // either statistic.
  bool biased() const;

 private:
  double per_element(double total) const;  // total / elements (0 with none)
  BiasSum unit_signed_, unit_magnitude_;
  bool unit_open_ = false;
};

inline constexpr double kBiasSigmas = 6.0;
inline constexpr double kBiasMinUlps = 0.1;
inline constexpr double kBiasClipUlps = 4.0;  // each element's error is clipped to +-4 ulps

// The spacing of dtype's values at |v| (a normal number of that dtype): 2^(e - p + 1) for
// 2^e <= |v| < 2^(e+1) and p significand bits.
double ulp_at(double v, DType dtype);

}  // namespace rpa
