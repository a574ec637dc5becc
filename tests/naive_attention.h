// A second, deliberately plain statement of DESIGN.md section 2 for tests: scalar loops
// in double with every index computed by hand (no Eigen, no PagedKvView), so that it
// shares nothing with the dense reference but the dtype conversions.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "reference/semantics.h"

namespace rpa::testing {

// o[T * Hq * D] as doubles holding values of q's dtype; rows of no sequence are 0. The
// reference semantics rounds p and p.V to V_eff's dtype; the kernel semantics only the result.
inline std::vector<double> naive_attention(const Inputs& in, const Params& p,
                                           Semantics semantics = Semantics::kKernel) {
  const int64_t T = in.q.dim(0), Hq = in.q.dim(1), D = in.q.dim(2);
  const int64_t S = in.kv_pages.dim(1), Hc = in.kv_pages.dim(2);
  const int64_t group = Hq / (Hc / 2);
  const int64_t pps = in.page_indices.dim(1);
  const DType qd = in.q.dtype(), kd = in.kv_pages.dtype();
  const DType vd = p.v_scale ? qd : kd;
  const bool round_v = semantics == Semantics::kReference && vd != DType::kFloat32;
  auto eff = [&](double x, const std::optional<double>& scale) -> double {
    if (!scale) return x;
    return round_to(qd, static_cast<float>(x) * static_cast<float>(*scale));
  };
  std::vector<double> o(static_cast<size_t>(T * Hq * D), 0.0);
  for (int64_t i = 0; i < in.num_seqs.int_at(0); ++i) {
    const int64_t q0 = in.cu_q_lens.int_at(i);
    const int64_t ql = in.cu_q_lens.int_at(i + 1) - q0;
    const int64_t kl = in.kv_lens.int_at(i);
    auto kv_at = [&](int64_t t, int64_t combined_head, int64_t d) {
      const int64_t page = in.page_indices.int_at(i * pps + t / S);
      return in.kv_pages.float_at(((page * S + t % S) * Hc + combined_head) * D + d);
    };
    for (int64_t r = 0; r < ql; ++r) {
      const int64_t qpos = kl - ql + r;
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> s(static_cast<size_t>(kl));
        for (int64_t t = 0; t < kl; ++t) {
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            dot += in.q.float_at(((q0 + r) * Hq + h) * D + d) * eff(kv_at(t, 2 * kvh, d), p.k_scale);
          }
          double x = dot * p.sm_scale;
          if (p.soft_cap) x = *p.soft_cap * std::tanh(x / *p.soft_cap);
          const bool masked = qpos < t || (p.sliding_window && qpos - *p.sliding_window >= t);
          s[static_cast<size_t>(t)] = x + (masked ? double{static_cast<float>(p.effective_mask_value())} : 0.0);
        }
        double m = -INFINITY;
        for (double x : s) m = (std::isnan(x) || std::isnan(m)) ? NAN : std::max(m, x);
        double sum = 0.0;
        for (double& x : s) sum += (x = std::exp(x - m));
        for (double& x : s) {
          x /= sum;
          if (round_v) x = round_double_to(vd, x);
        }
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t t = 0; t < kl; ++t) acc += s[static_cast<size_t>(t)] * eff(kv_at(t, 2 * kvh + 1, d), p.v_scale);
          if (round_v) acc = round_double_to(vd, acc);
          o[static_cast<size_t>(((q0 + r) * Hq + h) * D + d)] = round_double_to(qd, acc);
        }
      }
    }
  }
  return o;
}

}  // namespace rpa::testing
