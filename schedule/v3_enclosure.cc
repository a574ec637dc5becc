#include "schedule/v3_enclosure.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace rpa {
namespace {

constexpr double kU = 0x1p-24;           // float32's unit roundoff
constexpr double kMinNormal = 0x1p-126;  // below it a result may be flushed to 0
constexpr double kExpErr = 0x1p-21;      // oracle/tolerance.h's kExpError
// This file's own double arithmetic: every end is widened by a few double ulps before it is
// rounded, which covers the rounding of the double sums and products that formed it.
constexpr double kDoubleSlack = 0x1p-49;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// More values m may hold than this: one state with an interval m.
constexpr size_t kMostStates = 4;

double gamma(double n) { return n * kU / (1.0 - n * kU); }

bool bad(Range r) { return std::isnan(r.lo) || std::isnan(r.hi); }
Range hull(Range a, Range b) {
  if (bad(a) || bad(b)) return {kNaN, kNaN};
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}
Range add(Range a, Range b) { return {a.lo + b.lo, a.hi + b.hi}; }
Range mul(Range a, Range b) {
  const double c[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  for (double x : c) {
    if (std::isnan(x)) return {kNaN, kNaN};
  }
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
Range scale(Range a, double f) { return f >= 0.0 ? Range{a.lo * f, a.hi * f} : Range{a.hi * f, a.lo * f}; }

// The ends widened for this file's double arithmetic, and where an end may be a subnormal
// result, widened to what a flush to 0 or a kept subnormal gives: (0, 2^-126) -> [0, 2^-126].
Range outward(Range r) {
  r.lo -= std::fabs(r.lo) * kDoubleSlack;
  r.hi += std::fabs(r.hi) * kDoubleSlack;
  if (r.lo > 0.0 && r.lo < kMinNormal) r.lo = 0.0;
  if (r.lo < 0.0 && r.lo > -kMinNormal) r.lo = -kMinNormal;
  if (r.hi > 0.0 && r.hi < kMinNormal) r.hi = kMinNormal;
  if (r.hi < 0.0 && r.hi > -kMinNormal) r.hi = 0.0;
  return r;
}

double rn32(double x) { return static_cast<double>(static_cast<float>(x)); }

// Every float32 value an operation whose exact result lies in r may return (correctly
// rounded, monotone: the ends round to the new ends).
Range to32(Range r) {
  if (bad(r)) return r;
  r = outward(r);
  return {rn32(r.lo), rn32(r.hi)};
}

// The same for a rounding to a: once from the exact value, or through float32 first (XLA
// evaluates an A operation in float32, then rounds): the hull of both routes.
Range to_a(DType a, Range r) {
  if (a == DType::kFloat32) return to32(r);
  if (bad(r)) return r;
  r = outward(r);
  const auto once = [a](double x) { return static_cast<double>(round_double_to(a, x)); };
  const auto twice = [a](double x) { return static_cast<double>(round_to(a, static_cast<float>(x))); };
  return {std::min(once(r.lo), twice(r.lo)), std::max(once(r.hi), twice(r.hi))};
}

// exp within kExpError (times `m`), a float32 result.
Range exp_range(Range r, double m) {
  if (bad(r)) return r;
  const double e = m * kExpErr;
  Range x{std::exp(r.lo) * (1.0 - e), std::exp(r.hi) * (1.0 + e)};
  x.lo = std::max(x.lo, 0.0);
  return outward(x);
}

// jnp.sum(x, dtype=A) over the row as XLA's windows of 32 in A (schedule/xla_row_sum.h),
// on enclosures.
Range xla_row_sum_range(std::vector<Range> x, DType a) {
  const auto add_a = [a](Range s, Range v) { return to_a(a, add(s, v)); };
  while (true) {
    const auto n = static_cast<int64_t>(x.size());
    if (n <= 32) {
      Range r;
      for (Range v : x) r = add_a(r, v);
      return r;
    }
    const int64_t windows = (n + 31) / 32, lo = (windows * 32 - n) / 2;
    std::vector<Range> sums(static_cast<size_t>(windows));
    for (int64_t w = 0; w < windows; ++w) {
      Range r;
      for (int64_t j = std::max<int64_t>(w * 32 - lo, 0); j < std::min(w * 32 - lo + 32, n); ++j) {
        r = add_a(r, x[static_cast<size_t>(j)]);
      }
      sums[static_cast<size_t>(w)] = r;
    }
    x = std::move(sums);
  }
}

// A sum of float32 values in any order and blocking, each partial sum rounded to float32
// (or flushed): the exact sum of the ends widened by gamma_k over the k nonzero terms.
Range float32_sum(const std::vector<Range>& x, double m) {
  Range s;
  double mag = 0.0, k = 0.0;
  for (Range v : x) {
    s = add(s, v);
    mag += std::max(std::fabs(v.lo), std::fabs(v.hi));
    if (v.lo != 0.0 || v.hi != 0.0) k += 1.0;
  }
  const double slack = m * (gamma(k) * mag + 2.0 * k * kMinNormal);
  return to32({s.lo - slack, s.hi + slack});
}

}  // namespace

void V3RowEnclosure::start(DType a, bool hd64, int64_t lanes, float m0, float l0) {
  a_ = a;
  hd64_ = hd64;
  lanes_ = lanes;
  known_ = true;
  states_.assign(1, State{{m0, m0}, {l0, l0}, std::vector<Range>(static_cast<size_t>(lanes))});
}

void V3RowEnclosure::forget() {
  known_ = false;
  states_.clear();
}

void V3RowEnclosure::step(const V3EnclosureBlock& b, const V3EnclosureTerms& t, double* max_abs_v) {
  if (!known_) return;
  const bool narrow = !hd64_ && a_ != DType::kFloat32;
  const auto round_acc = [&](Range r) { return hd64_ ? to32(r) : to_a(a_, r); };
  const int64_t n = b.n, D = b.qk_lanes;
  // 1. The logits.
  bool q_exact = true;
  for (int64_t d = 0; d < D; ++d) q_exact = q_exact && b.q_lo[d] == b.q_hi[d];
  std::vector<Range> s(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    if (b.keep[j] == 0) {
      s[static_cast<size_t>(j)] = {b.mask_value, b.mask_value};
      continue;
    }
    const float* k = b.k + j * b.k_stride;
    // (Exact zero products add nothing in any order: gamma counts the others.)
    double lo = 0.0, hi = 0.0, mag = 0.0, terms = 0.0;
    if (q_exact) {
      for (int64_t d = 0; d < D; ++d) {
        const double x = static_cast<double>(b.q_lo[d]) * k[d];
        lo += x;
        mag += std::fabs(x);
        terms += x != 0.0 ? 1.0 : 0.0;
      }
      hi = lo;
    } else {
      for (int64_t d = 0; d < D; ++d) {
        const double kd = k[d], a = b.q_lo[d] * kd, c = b.q_hi[d] * kd;
        lo += std::min(a, c);
        hi += std::max(a, c);
        mag += std::max(std::fabs(a), std::fabs(c));
        terms += a != 0.0 || c != 0.0 ? 1.0 : 0.0;
      }
    }
    if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(mag)) return forget();
    const double slack = t.logit * ((gamma(terms) + t.mxu_qk) * mag + 2.0 * terms * kMinNormal);
    Range r = to32({lo - slack, hi + slack});
    for (int i = 0; i < b.nscales; ++i) r = to32(scale(r, b.scales[i]));
    if (b.cap) {
      const double c = *b.cap;
      const Range x = to32(scale(r, 1.0 / c));  // correctly rounded r / c: monotone in r
      const double e = t.exp * kExpErr;
      Range th{std::tanh(x.lo), std::tanh(x.hi)};
      th = {std::max(th.lo - e * std::fabs(th.lo), -1.0), std::min(th.hi + e * std::fabs(th.hi), 1.0)};
      r = to32(scale(to32(th), c));
    }
    if (bad(r) || !std::isfinite(r.lo) || !std::isfinite(r.hi)) return forget();
    s[static_cast<size_t>(j)] = r;
  }
  // 2. The row max and the values the program's m may take from it.
  Range rmax{-kInf, -kInf};
  for (Range x : s) rmax = {std::max(rmax.lo, x.lo), std::max(rmax.hi, x.hi)};
  std::vector<Range> cands;
  if (narrow) {
    const Range r = to_a(a_, rmax);
    cands.push_back({r.lo, r.lo});
    if (r.hi != r.lo) {
      const double mid = round_double_to(a_, 0.5 * (r.lo + r.hi));
      if (mid == r.lo || mid == r.hi) {
        cands.push_back({r.hi, r.hi});  // adjacent A values: two states
      } else {
        cands.assign(1, r);  // several: one state over the interval
      }
    }
  } else {
    cands.push_back(rmax);
  }
  // 3. Each state under each value: alpha, p, l, acc.
  std::vector<State> next;
  std::vector<Range> p(static_cast<size_t>(n)), pa;
  std::vector<double> lo, hi, mag, cnt;
  for (const State& st : states_) {
    for (Range cand : cands) {
      State ns;
      ns.m = {std::max(st.m.lo, cand.lo), std::max(st.m.hi, cand.hi)};
      if (!std::isfinite(ns.m.lo) || !std::isfinite(ns.m.hi)) return forget();
      Range alpha;
      if (st.m.hi == -kInf) {
        alpha = {0.0, 0.0};  // exp(-inf - m) with m finite
      } else {
        // m_new >= m_prev in every run: the difference is never positive.
        Range diff = to32({st.m.lo - ns.m.hi, std::min(st.m.hi - ns.m.lo, 0.0)});
        if (narrow) diff = to_a(a_, diff);
        alpha = exp_range(diff, t.exp);
        if (narrow) alpha = to_a(a_, alpha);
      }
      for (int64_t j = 0; j < n; ++j) {
        const Range x = s[static_cast<size_t>(j)];
        p[static_cast<size_t>(j)] = exp_range(to32({x.lo - ns.m.hi, x.hi - ns.m.lo}), t.exp);
      }
      // The row sum.
      Range rowsum;
      if (narrow) {
        pa.resize(p.size());
        for (size_t j = 0; j < p.size(); ++j) pa[j] = to_a(a_, p[j]);
        rowsum = hull(xla_row_sum_range(pa, a_), to_a(a_, float32_sum(pa, t.row_sum)));
      } else {
        rowsum = float32_sum(p, t.row_sum);
      }
      // l = alpha l + rowsum: each operation rounded, or the multiply-add fused.
      const Range prod = mul(alpha, st.l);
      ns.l = hull(round_acc(add(round_acc(prod), rowsum)), round_acc(add(prod, rowsum)));
      // acc = alpha acc + round_A(p.V v_scale), per lane: p.V's ends and magnitudes first.
      const auto L = static_cast<size_t>(lanes_);
      lo.assign(L, 0.0);
      hi.assign(L, 0.0);
      mag.assign(L, 0.0);
      cnt.assign(L, 0.0);
      for (int64_t j = 0; j < n; ++j) {
        const Range w = p[static_cast<size_t>(j)];
        if (w.lo == 0.0 && w.hi == 0.0) {
          // 0 * V: 0, unless V is not finite (the program's NaN, kept).
          for (size_t c = 0; c < L; ++c) {
            if (!std::isfinite(b.v[j * b.v_stride + static_cast<int64_t>(c)])) lo[c] = kNaN;
          }
          continue;
        }
        for (size_t c = 0; c < L; ++c) {
          const double v = b.v[j * b.v_stride + static_cast<int64_t>(c)];
          const double a = w.lo * v, z = w.hi * v;
          lo[c] += std::min(a, z);
          hi[c] += std::max(a, z);
          mag[c] += std::fabs(z);
          cnt[c] += v != 0.0 ? 1.0 : 0.0;
        }
      }
      ns.acc.resize(L);
      for (size_t c = 0; c < L; ++c) {
        Range pv{kNaN, kNaN};
        if (std::isfinite(lo[c]) && std::isfinite(hi[c]) && std::isfinite(mag[c])) {
          const double slack = t.value * ((gamma(cnt[c]) + t.mxu_pv) * mag[c] + 2.0 * cnt[c] * kMinNormal);
          pv = to32({lo[c] - slack, hi[c] + slack});
          if (b.v_scale) pv = to32(scale(pv, *b.v_scale));
        }
        if (!hd64_) pv = round_acc(pv);
        const Range pa2 = mul(alpha, st.acc[c]);
        ns.acc[c] = hull(round_acc(add(round_acc(pa2), pv)), round_acc(add(pa2, pv)));
      }
      next.push_back(std::move(ns));
    }
  }
  // The values the program weighs: the power's scale.
  if (max_abs_v) {
    const double vs = b.v_scale ? std::fabs(static_cast<double>(*b.v_scale)) : 1.0;
    for (int64_t j = 0; j < n; ++j) {
      if (p[static_cast<size_t>(j)].hi == 0.0) continue;
      for (int64_t lane = 0; lane < lanes_; ++lane) {
        const double v = std::fabs(static_cast<double>(b.v[j * b.v_stride + lane])) * vs;
        if (std::isfinite(v)) *max_abs_v = std::max(*max_abs_v, v);
      }
    }
  }
  // 4. States with the same m merge; too many become one.
  std::vector<State> merged;
  for (State& ns : next) {
    auto same = std::find_if(merged.begin(), merged.end(), [&](const State& o) {
      return o.m.lo == o.m.hi && ns.m.lo == ns.m.hi && o.m.lo == ns.m.lo;
    });
    if (same == merged.end()) {
      merged.push_back(std::move(ns));
      continue;
    }
    same->l = hull(same->l, ns.l);
    for (size_t c = 0; c < ns.acc.size(); ++c) same->acc[c] = hull(same->acc[c], ns.acc[c]);
  }
  if (merged.size() > kMostStates) {
    State all = merged[0];
    for (size_t i = 1; i < merged.size(); ++i) {
      all.m = hull(all.m, merged[i].m);
      all.l = hull(all.l, merged[i].l);
      for (size_t c = 0; c < all.acc.size(); ++c) all.acc[c] = hull(all.acc[c], merged[i].acc[c]);
    }
    merged.assign(1, std::move(all));
  }
  states_ = std::move(merged);
}

Range V3RowEnclosure::out(int64_t lane, DType q_dtype) const {
  if (!known_ || states_.empty()) return {kNaN, kNaN};
  Range o{kInf, -kInf};
  for (const State& st : states_) {
    const Range acc = st.acc[static_cast<size_t>(lane)];
    if (bad(acc) || bad(st.l) || !(st.l.lo > 0.0) || !std::isfinite(st.l.hi)) return {kNaN, kNaN};
    Range x;
    if (hd64_ && q_dtype != DType::kFloat32) {
      // acc * (1 / bf16(l)) in float32, stored in q's dtype.
      const Range l16 = to_a(DType::kBFloat16, st.l);
      if (!(l16.lo > 0.0)) return {kNaN, kNaN};
      const Range r = to32({1.0 / l16.hi, 1.0 / l16.lo});
      x = to_a(q_dtype, to32(mul(acc, r)));
    } else {
      const Range q = mul(acc, {1.0 / st.l.hi, 1.0 / st.l.lo});
      x = hd64_ ? to_a(q_dtype, to32(q)) : to_a(a_, to32(q));
    }
    if (bad(x) || !std::isfinite(x.lo) || !std::isfinite(x.hi)) return {kNaN, kNaN};
    o = {std::min(o.lo, x.lo), std::max(o.hi, x.hi)};
  }
  return o;
}

}  // namespace rpa
