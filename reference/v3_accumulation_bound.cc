#include "reference/v3_accumulation_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace rpa {
namespace {

constexpr double kU32 = 0x1p-24;
// exp in float32 (XLA's, a TPU's): within 8 float32 ulps (oracle/tolerance.h's kExpError).
constexpr double kExp = 0x1p-21;

double unit_roundoff(DType a) { return std::ldexp(1.0, -dtype_precision_bits(a)); }

// One rounded addition s + x of exact values whose computed forms are off by es and ex: the
// sum's bound, counting the rounding of the computed sum (at most u times |s + x| + es + ex).
// Adding an exact zero, or to one, is exact.
double add_error(double s, double es, double x, double ex, double u) {
  if ((x == 0.0 && ex == 0.0) || (s == 0.0 && es == 0.0)) return es + ex;
  return es + ex + u * (std::fabs(s + x) + es + ex);
}

// One window of XLA's reduction, summed in order from 0: (sum, error bound).
std::pair<double, double> window_sum(const std::vector<double>& x, const std::vector<double>& e,
                                     int64_t from, int64_t to, double u) {
  double s = 0.0, es = 0.0;
  for (int64_t j = from; j < to; ++j) {
    es = add_error(s, es, x[static_cast<size_t>(j)], e[static_cast<size_t>(j)], u);
    s += x[static_cast<size_t>(j)];
  }
  return {s, es};
}

}  // namespace

double xla_row_sum_error(std::vector<double> x, std::vector<double> e, double u, int64_t n) {
  if (n < 0) n = static_cast<int64_t>(x.size());
  // Each level keeps the windows that hold a stored element (a window of exact zeros sums to
  // 0 with no error, as add_error has it), and the level's length n.
  while (true) {
    const auto stored = static_cast<int64_t>(x.size());
    if (n <= 32) return window_sum(x, e, 0, stored, u).second;
    const int64_t windows = (n + 31) / 32, lo = (windows * 32 - n) / 2;
    const int64_t kept = stored == 0 ? 0 : (stored - 1 + lo) / 32 + 1;
    std::vector<double> sums(static_cast<size_t>(kept)), errs(sums.size());
    for (int64_t w = 0; w < kept; ++w) {
      const auto [s, es] = window_sum(x, e, std::max<int64_t>(w * 32 - lo, 0),
                                      std::min(w * 32 - lo + 32, stored), u);
      sums[static_cast<size_t>(w)] = s;
      errs[static_cast<size_t>(w)] = es;
    }
    x = std::move(sums);
    e = std::move(errs);
    n = windows;
  }
}

void v3_accumulation_bound(const V3AccumulationRow& row, V3Blocking b, DType acc,
                           const V3BoundTerms& k, double* bound) {
  const std::vector<double>& s = *row.logit;
  const std::vector<bool>& masked = *row.masked;
  const std::vector<double>& w = *row.weight;
  const auto len = static_cast<int64_t>(s.size());
  const int64_t D = row.head_dim;
  if (b.fetch <= 0 || b.compute <= 0) {
    std::fill(bound, bound + D, std::numeric_limits<double>::infinity());
    return;
  }
  const bool narrow = acc != DType::kFloat32;
  const double ua = unit_roundoff(acc);
  const double vs = row.v_scale;
  const auto at = [&](int64_t t, int64_t c) { return row.v[static_cast<size_t>(t * D + c)] * vs; };
  // The block of token t: (fetch block, compute block within it), and its slot.
  const int64_t per_fetch = (b.fetch + b.compute - 1) / b.compute;
  const auto block_of = [&](int64_t t) { return (t / b.fetch) * per_fetch + (t % b.fetch) / b.compute; };

  // Running state, in units of the exact denominator: prefix sums L, A_c and their bounds.
  const bool sink = std::isfinite(row.sink_logit);
  double m = sink ? row.sink_logit : -std::numeric_limits<double>::infinity();
  // The least m the program may hold: its block maxima may round below this row's exact ones
  // by their logit errors.
  double m_low = m;
  double L = sink ? row.sink_weight : 0.0, eL = 0.0;
  std::vector<double> A(static_cast<size_t>(D), 0.0), eA(A.size(), 0.0), W(A.size(), 0.0);
  double shift = 0.0, e_max = 0.0;  // the rescales' d_b, summed; the largest e_t
  // (hd64 starts l at exactly 1 = exp(sink - sink): the sink's weight moves only with the
  // rescales, counted there.)
  // Per column: the block's p.V and its positive and negative parts (any partial sum of p.V's
  // products, in any order, lies between -neg and pos).
  std::vector<double> leaves, leaf_err, pv(A.size()), pos(A.size()), neg(A.size());
  int64_t t = 0;
  while (t < len) {
    if (masked[static_cast<size_t>(t)]) {
      ++t;
      continue;
    }
    const int64_t blk = block_of(t);
    int64_t end = t;
    while (end < len && block_of(end) == blk) ++end;
    // The block's unmasked keys: max logit, and the largest logit error among them.
    double rmax = -std::numeric_limits<double>::infinity(), rerr = 0.0;
    int64_t keys = 0;
    for (int64_t u = t; u < end; ++u) {
      if (masked[static_cast<size_t>(u)]) continue;
      ++keys;
      rmax = std::max(rmax, s[static_cast<size_t>(u)]);
      rerr = std::max(rerr, k.logit * (*row.logit_error)[static_cast<size_t>(u)]);
    }
    const double rounded = narrow ? double{round_double_to(acc, rmax)} : rmax;
    const double m_new = std::max(m, rounded);
    const bool first = L == 0.0;  // l and acc are exactly 0: alpha 0, sums exact
    // alpha is surely 1 when even the largest logit this block may hold cannot raise the
    // least m the program may hold.
    const double highest = narrow ? double{round_double_to(acc, rmax + rerr)} : rmax + rerr;
    const double lowest = narrow ? double{round_double_to(acc, rmax - rerr)} : rmax - rerr;
    const bool kept = !first && highest <= m_low;
    if (!first && !kept) {
      const double dm = std::max(m_new, highest) - m_low;
      const double d_b = k.rescale * (std::expm1(ua * dm) + k.exp * (kExp + kU32 * dm) + (narrow ? ua : 0.0));
      shift += d_b;
      for (int64_t c = 0; c < D; ++c) {
        W[static_cast<size_t>(c)] += d_b * std::fabs(A[static_cast<size_t>(c)] - row.out[c] * L);
      }
    }
    m = m_new;
    m_low = std::max(m_low, lowest);
    // The row sum of round_A(p) over the block's slots (masked ones 0), in XLA's order.
    // Slots (u % fetch) % compute of keys u < len: below min(compute, len); the block's other
    // slots are exact zeros (xla_row_sum_error's n), never stored (a compute block near 2^31,
    // strict's int32 edge, would not fit in memory).
    leaves.assign(static_cast<size_t>(std::min(b.compute, len)), 0.0);
    leaf_err.assign(leaves.size(), 0.0);
    double R = 0.0;
    std::fill(pv.begin(), pv.end(), 0.0);
    std::fill(pos.begin(), pos.end(), 0.0);
    std::fill(neg.begin(), neg.end(), 0.0);
    for (int64_t u = t; u < end; ++u) {
      if (masked[static_cast<size_t>(u)]) continue;
      const auto ui = static_cast<size_t>(u);
      const double p = w[ui];
      const auto slot = static_cast<size_t>((u % b.fetch) % b.compute);
      leaves[slot] = p;
      leaf_err[slot] = narrow ? k.row_sum * ua * p : 0.0;
      R += p;
      const double e_t = std::expm1(k.logit * (*row.logit_error)[ui] +
                                    k.exp * (kExp + kU32 * std::fabs(s[ui] - m)));
      e_max = std::max(e_max, e_t);
      // Branch-free, so that it vectorizes over c: adding +0.0 to the other part changes no
      // bit (both parts are sums of non-negative terms from +0.0).
      for (int64_t c = 0; c < D; ++c) {
        const double v = at(u, c);
        const double part = p * std::fabs(v);
        pv[static_cast<size_t>(c)] += p * v;
        pos[static_cast<size_t>(c)] += v > 0.0 ? part : 0.0;
        neg[static_cast<size_t>(c)] += v > 0.0 ? 0.0 : part;
        W[static_cast<size_t>(c)] += p * e_t * std::fabs(v - row.out[c]);
      }
    }
    const double eR = k.row_sum * xla_row_sum_error(leaves, leaf_err, ua, b.compute);
    // l = round_A(round_A(alpha l) + rowsum).
    if (first) {
      eL = eR;
    } else {
      if (!kept) eL += k.l_round * ua * (L + eL);
      eL = eL + eR + k.l_round * ua * (L + R + eL + eR);
    }
    L += R;
    // acc = round_A(round_A(alpha acc) + round_A(p.V v_scale)).
    for (int64_t c = 0; c < D; ++c) {
      const auto ci = static_cast<size_t>(c);
      // p.V in float32, any order: each product rounded (u32 of its size), keys - 1
      // additions of partial sums no larger than max(pos, neg), the v_scale multiply.
      const double most = std::max(pos[ci], neg[ci]);
      double e_pv = k.pv_dot * kU32 *
                    (pos[ci] + neg[ci] + static_cast<double>(std::max<int64_t>(keys - 1, 0)) * most +
                     std::fabs(pv[ci]));
      if (narrow) e_pv += k.acc_round * ua * (std::fabs(pv[ci]) + e_pv);
      if (A[ci] == 0.0 && eA[ci] == 0.0) {
        eA[ci] = e_pv;
      } else {
        if (!kept) eA[ci] += k.acc_round * ua * (std::fabs(A[ci]) + eA[ci]);
        eA[ci] = eA[ci] + e_pv + k.acc_round * ua * (std::fabs(A[ci] + pv[ci]) + eA[ci] + e_pv);
      }
      A[ci] += pv[ci];
    }
    t = end;
  }
  const double denom = 1.0 - eL - e_max - shift;
  for (int64_t c = 0; c < D; ++c) {
    const auto ci = static_cast<size_t>(c);
    const double o = std::fabs(row.out[c]);
    const double e = denom > 0.0 ? (eA[ci] + o * eL + W[ci]) / denom
                                 : std::numeric_limits<double>::infinity();
    bound[c] = std::max(bound[c], e);
  }
}

}  // namespace rpa
