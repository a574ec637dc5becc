// jnp.sum(x, axis=-1, dtype=A) over one row as XLA's CPU backend evaluates it, which TPU
// interpret mode runs a Pallas kernel's body on (measured bit for bit against jax 0.11.2 for
// row lengths 1 to 5000): up to 32 terms are added in order, each partial sum rounded to A;
// a longer row is padded with zeros on both sides (the lower side taking the smaller half)
// to windows of 32 (XLA's tree reduction rewriter), each window summed so, and the window
// sums reduced the same way. For bfloat16 this is not the float32 sum rounded once, nor the
// row added in order: [1, 39 x 2^-9] sums to 1.0390625 (in order: 1.0; once: 1.078125).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace rpa {

// x's elements are values of A (jnp.sum converts the row to A first).
inline float xla_row_sum(std::vector<float> x, DType a) {
  const auto add = [a](float s, float v) { return a == DType::kFloat32 ? s + v : round_to(a, s + v); };
  while (true) {
    const auto n = static_cast<int64_t>(x.size());
    if (n <= 32) {
      float r = 0.0f;
      for (float v : x) r = add(r, v);
      return r;
    }
    const int64_t windows = (n + 31) / 32, lo = (windows * 32 - n) / 2;
    std::vector<float> sums(static_cast<size_t>(windows));
    for (int64_t w = 0; w < windows; ++w) {
      float r = 0.0f;
      for (int64_t j = std::max<int64_t>(w * 32 - lo, 0); j < std::min(w * 32 - lo + 32, n); ++j) {
        r = add(r, x[static_cast<size_t>(j)]);
      }
      sums[static_cast<size_t>(w)] = r;
    }
    x = std::move(sums);
  }
}

}  // namespace rpa
