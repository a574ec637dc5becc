// The float32 term of the tolerance (oracle/jax_tolerance.cc item F) assumes every implementation's
// exp is within kExpError (2^-21, eight float32 ulps) of the true value, relatively. Here for the
// two this project computes with: Eigen's vectorized float exp (the tiled kernel's softmax
// weights) and std::exp on floats (its rescale factors, and the tests' float32 family), over
// every argument a softmax weight can have, [-104, 0] (below, the result is 0 or subnormal:
// flushed, item K5), sampled every 2^-13 and at 2^20 random floats.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "oracle/tolerance.h"

namespace rpa {
namespace {

// Arguments: a grid over [-104, 0] and random floats in it.
std::vector<float> arguments() {
  std::vector<float> x;
  for (int64_t i = 0; i <= 104 * 8192; ++i) x.push_back(-static_cast<float>(i) / 8192.0f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> draw(-104.0f, 0.0f);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(draw(rng));
  return x;
}

// The largest |got / exp(x) - 1| over results that are normal float32 numbers.
template <typename F>
double worst_relative_error(const std::vector<float>& x, F&& exp_of) {
  const std::vector<float> got = exp_of(x);
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    if (want < 0x1p-126) continue;
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) / want - 1.0));
  }
  return worst;
}

TEST(ExpAccuracy, EigenFloatExpIsWithinTheAssumedError) {
  const std::vector<float> x = arguments();
  const double worst = worst_relative_error(x, [](const std::vector<float>& in) {
    const Eigen::ArrayXf a = Eigen::Map<const Eigen::ArrayXf>(in.data(), static_cast<Eigen::Index>(in.size()));
    const Eigen::ArrayXf e = a.exp();
    return std::vector<float>(e.data(), e.data() + e.size());
  });
  std::printf("Eigen float exp: worst relative error %.3g (%.2f float32 ulps of 2^-24)\n", worst,
              worst / 0x1p-24);
  EXPECT_LE(worst, kExpError);
  EXPECT_GT(worst, 0.0);  // it does round: the measurement is not vacuous
}

TEST(ExpAccuracy, StdExpOnFloatsIsWithinTheAssumedError) {
  const std::vector<float> x = arguments();
  const double worst = worst_relative_error(x, [](const std::vector<float>& in) {
    std::vector<float> out(in.size());
    for (size_t i = 0; i < in.size(); ++i) out[i] = std::exp(in[i]);
    return out;
  });
  std::printf("std::exp(float): worst relative error %.3g (%.2f float32 ulps of 2^-24)\n", worst,
              worst / 0x1p-24);
  EXPECT_LE(worst, kExpError);
  EXPECT_GT(worst, 0.0);
}

}  // namespace
}  // namespace rpa
