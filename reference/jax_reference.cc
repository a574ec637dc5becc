#include "reference/jax_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "core/float32_scalar.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"

namespace rpa {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Rows [t] = tokens 0..kv_len-1 of one kv head of sequence s, columns = head_dim.
struct HeadKv {
  Matrix k;
  Matrix v;
};

HeadKv gather(const Inputs& in, const PagedKvView& view, const Params& p, int64_t s,
              int64_t kv_head) {
  const int64_t kv_len = view.kv_len(s);
  const int64_t d = view.head_dim();
  const DType kv_dtype = in.kv_pages.dtype();
  const DType q_dtype = in.q.dtype();
  HeadKv kv{Matrix(kv_len, d), Matrix(kv_len, d)};
  for (int64_t t = 0; t < kv_len; ++t) {
    const int64_t k0 = view.k_offset(s, t, kv_head);
    const int64_t v0 = view.v_offset(s, t, kv_head);
    for (int64_t c = 0; c < d; ++c) {
      // K_eff / V_eff (core/dtype.h): with a scale, cast to q's dtype of the float32 product.
      kv.k(t, c) = kv_eff(q_dtype, kv_dtype, p.k_scale, true, load_flushed(kv_dtype, in.kv_pages.data(), k0 + c));
      kv.v(t, c) = kv_eff(q_dtype, kv_dtype, p.v_scale, false, load_flushed(kv_dtype, in.kv_pages.data(), v0 + c));
    }
  }
  return kv;
}

// row_chain (ReferenceResult) of one row's weights: sorted in decreasing order, the k-th
// (from 1) counted n + 1 - k times, the first n - 1 times, over the n weights > 0.
std::pair<double, int64_t> chain_of(const double* p, int64_t len, std::vector<double>& scratch) {
  scratch.clear();
  for (int64_t t = 0; t < len; ++t) {
    if (p[t] > 0.0) scratch.push_back(p[t]);
  }
  std::sort(scratch.begin(), scratch.end(), std::greater<>());
  const auto n = static_cast<int64_t>(scratch.size());
  double chain = 0.0;
  for (int64_t k = 1; k <= n; ++k) {
    chain += scratch[static_cast<size_t>(k - 1)] * static_cast<double>(k == 1 ? n - 1 : n + 1 - k);
  }
  return {chain, n};
}

double max_abs_finite(const Matrix& m) {
  double best = 0.0;
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double a = std::fabs(m.data()[i]);
    if (std::isfinite(a)) best = std::max(best, a);
  }
  return best;
}

}  // namespace

namespace {

// Both semantics share everything up to the unrounded softmax weights: one pass computes
// any of them (dense_reference, dense_reference_both).
std::vector<ReferenceResult> reference_pass(const Inputs& in, const Params& p,
                                            const std::vector<Semantics>& semantics,
                                            double most_logit_error) {
  const PagedKvView view = kv_view(in);
  const DType q_dtype = in.q.dtype();
  // V_eff's dtype. In the reference semantics p and the output are rounded to it (JAX:
  // softmax(...).astype(v.dtype), and the einsum's result type); float32 rounds nothing the
  // double result would keep. The kernel semantics rounds only the output, to q's dtype.
  const DType v_dtype = p.v_scale ? q_dtype : in.kv_pages.dtype();
  const double mask_value = static_cast<float>(p.effective_mask_value());
  const double cap = p.soft_cap ? std::fabs(*p.soft_cap) : 0.0;
  const int64_t d = view.head_dim();
  const auto numel = static_cast<size_t>(in.q.numel());
  const auto num_rows = static_cast<size_t>(in.q.dim(0) * view.num_q_heads());
  bool any_kernel = false;
  std::vector<ReferenceResult> results(semantics.size());
  for (size_t i = 0; i < semantics.size(); ++i) {
    ReferenceResult& result = results[i];
    result.out = Tensor(q_dtype, in.q.shape());
    result.semantics = semantics[i];
    result.most_logit_error = most_logit_error;
    result.zero_sums(numel, num_rows);
    if (semantics[i] == Semantics::kKernel) {
      any_kernel = true;
      result.spread.assign(numel, 0.0);
      result.row_logit_max.assign(num_rows, 0.0);
    }
  }
  // Scratch, allocated once (allocations dominate the small cases of the sanitizer builds).
  std::vector<double> sorted, column_max;
  using Row = Eigen::Array<double, 1, Eigen::Dynamic>;
  Row weighted(d), deviation(d), spread(d);
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    const int64_t q_len = view.q_len(s);
    const int64_t kv_len = view.kv_len(s);
    if (q_len == 0) continue;
    for (ReferenceResult& result : results) result.max_kv_len = std::max(result.max_kv_len, kv_len);
    for (int64_t kv_head = 0; kv_head < view.num_kv_heads(); ++kv_head) {
      const HeadKv kv = gather(in, view, p, s, kv_head);
      const double max_v = max_abs_finite(kv.v);
      for (ReferenceResult& result : results) result.max_abs_v_eff = std::max(result.max_abs_v_eff, max_v);
      column_max.assign(static_cast<size_t>(d), 0.0);
      for (int64_t t = 0; t < kv_len; ++t) {
        const double* v = kv.v.row(t).data();
        for (int64_t c = 0; c < d; ++c) {
          const double a = std::fabs(v[c]);
          if (std::isfinite(a)) column_max[static_cast<size_t>(c)] = std::max(column_max[static_cast<size_t>(c)], a);
        }
      }
      const double blocks = static_cast<double>((kv_len + view.page_size() - 1) / view.page_size());
      for (int64_t g = 0; g < view.q_heads_per_kv(); ++g) {
        const int64_t q_head = kv_head * view.q_heads_per_kv() + g;
        Matrix q(q_len, d);
        for (int64_t r = 0; r < q_len; ++r) {
          const int64_t q0 = view.q_offset(view.q_start(s) + r, q_head);
          for (int64_t c = 0; c < d; ++c) q(r, c) = load_flushed(q_dtype, in.q.data(), q0 + c);
        }
        Matrix logits = (q * kv.k.transpose()) * static_cast<double>(float32_scalar(p.sm_scale));
        // The logit scale B_t of each (row, token): |sm_scale| sum_d |q_d K_eff_td|.
        Matrix scale = (q.cwiseAbs() * kv.k.cwiseAbs().transpose()) * std::fabs(p.sm_scale);
        if (scale.size() > 0) {
          const double bound = scale.maxCoeff<Eigen::PropagateNumbers>();
          if (std::isfinite(bound)) {
            for (ReferenceResult& result : results) {
              result.max_logit_abs_sum = std::max(result.max_logit_abs_sum, bound);
            }
          }
        }
        for (int64_t r = 0; r < q_len; ++r) {
          const int64_t q_pos = view.q_position(s, r);
          double* x = logits.row(r).data();
          double* b = scale.row(r).data();
          for (int64_t t = 0; t < kv_len; ++t) {
            if (any_kernel && p.soft_cap) {
              // For the spread: the dot's error is at most most_logit_error * B_t (the
              // uncapped B_t).
              const double far = std::max(0.0, std::fabs(x[t]) - most_logit_error * b[t]);
              const double slope = 1.0 / std::cosh(far / cap);
              b[t] = std::min(b[t], kCappedLogitScale * cap) * slope * slope;
            }
            // Soft cap before the mask; the mask value is added, not substituted.
            if (p.soft_cap) x[t] = *p.soft_cap * std::tanh(x[t] / *p.soft_cap);
            const bool masked =
                q_pos < t || (p.sliding_window && q_pos - *p.sliding_window >= t);
            if (masked) x[t] += mask_value;
          }
          const double m = logits.row(r).maxCoeff<Eigen::PropagateNaN>();
          // std::exp, not Eigen's vectorized exp: that returns subnormals around 5e-309
          // instead of 0 for masked logits, which are then slow to multiply (and not 0).
          double sum = 0.0;
          for (int64_t t = 0; t < kv_len; ++t) sum += (x[t] = std::exp(x[t] - m));
          for (int64_t t = 0; t < kv_len; ++t) x[t] /= sum;
        }
        for (ReferenceResult& result : results) {
          const bool kernel = result.semantics == Semantics::kKernel;
          const bool round_to_v = !kernel && v_dtype != DType::kFloat32;
          Matrix rounded;
          if (round_to_v) {
            rounded = logits.unaryExpr([&](double w) { return double{round_double_to(v_dtype, w)}; });
          }
          const Matrix& weights = round_to_v ? rounded : logits;
          const Matrix o = weights * kv.v;
          for (int64_t r = 0; r < q_len; ++r) {
            const int64_t o0 = view.q_offset(view.q_start(s) + r, q_head);
            const double* orow = o.row(r).data();
            for (int64_t c = 0; c < d; ++c) {
              double y = orow[c];
              if (round_to_v) y = round_double_to(v_dtype, y);
              store_float(q_dtype, result.out.data(), o0 + c, round_double_to(q_dtype, y));
            }
            // The float32 accumulation term's sums (ReferenceResult), over this row's weights.
            const double* w = weights.row(r).data();
            const double* b = scale.row(r).data();
            const int64_t row = view.q_start(s) + r;
            const auto at = static_cast<size_t>(row * view.num_q_heads() + q_head);
            const auto [chain, terms] = chain_of(w, kv_len, sorted);
            result.row_chain[at] = chain;
            result.row_terms[at] = static_cast<double>(terms);
            result.row_blocks[at] = blocks;
            // B_max, the largest B_t = scale + |soft_cap| with p_t > 0 (kernel semantics).
            double b_max = 0.0;
            if (kernel) {
              for (int64_t t = 0; t < kv_len; ++t) {
                if (w[t] > 0.0) b_max = std::max(b_max, b[t] + cap);
              }
              result.row_logit_max[at] = b_max;
            }
            // One pass over the keys with a weight (p_t = 0 adds nothing): abs_weighted,
            // deviation and, in the kernel semantics, the spread with a_t = p_t (B_t + B_max).
            // (Eigen arrays, which vectorize: the sums run over t in order either way.)
            weighted.setZero();
            deviation.setZero();
            spread.setZero();
            for (int64_t t = 0; t < kv_len; ++t) {
              if (w[t] == 0.0) continue;
              const auto v = kv.v.row(t).array();
              const auto dev = (v - o.row(r).array()).abs();
              weighted += w[t] * v.abs();
              deviation += w[t] * dev;
              if (kernel) spread += (w[t] * (b[t] + cap + b_max)) * dev;
            }
            for (int64_t c = 0; c < d; ++c) {
              const auto e = static_cast<size_t>(o0 + c);
              result.abs_weighted[e] = weighted(c);
              result.deviation[e] = deviation(c);
              if (kernel) result.spread[e] = spread(c);
              result.column_max[e] = column_max[static_cast<size_t>(c)];
            }
          }
        }
      }
    }
  }
  return results;
}

}  // namespace

ReferenceResult dense_reference(const Inputs& in, const Params& p, Semantics semantics,
                                double most_logit_error) {
  return std::move(reference_pass(in, p, {semantics}, most_logit_error)[0]);
}

std::pair<ReferenceResult, ReferenceResult> dense_reference_both(const Inputs& in, const Params& p,
                                                                 double most_logit_error) {
  std::vector<ReferenceResult> both =
      reference_pass(in, p, {Semantics::kKernel, Semantics::kReference}, most_logit_error);
  return {std::move(both[0]), std::move(both[1])};
}

}  // namespace rpa
