#include "reference/v3_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/v3_attention_math.h"
#include "core/float32_scalar.h"
#include "core/jax_params.h"
#include "core/v3_cache_layout.h"
#include "schedule/v3_block_sizes.h"

namespace rpa {
namespace {

constexpr double kU32 = 0x1p-24;
// exp and tanh in float32 (XLA's, the kernel's): within 8 float32 ulps, kExpError of
// oracle/tolerance.h (tests/exp_accuracy_test.cc measures those this project uses).
constexpr double kExpRelError = 0x1p-21;

// Round to nearest even in IEEE half: XLA's CPU dot on float8 operands returns its float32
// sum through float16 (measured: fp8(f16(sum)) matched all of 6000 random einsums, fp8(sum)
// missed 49).
double round_half(double x) {
  if (!std::isfinite(x)) return x;
  const double ax = std::fabs(x);
  if (ax >= 65520.0) return std::copysign(INFINITY, x);
  const double q = std::ldexp(1.0, std::max(std::ilogb(ax), -14) - 10);
  return std::copysign(std::nearbyint(ax / q) * q, x);
}
bool is_fp8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }
// p.V's result in the KV dtype as XLA's CPU dot rounds it.
double pv_round(DType kv, double x) {
  if (kv == DType::kFloat32) return x;
  return round_double_to(kv, is_fp8(kv) ? round_half(x) : x);
}

// Whether two values within `radius` of x may round to different values of t (rounding is
// monotone: they cannot when x - radius and x + radius round alike).
bool may_round_apart(DType t, double x, double radius) {
  if (!(radius > 0.0)) return false;
  return round_double_to(t, x - radius) != round_double_to(t, x + radius);
}

// One elementwise operation of XLA on a narrow dtype: computed in float32, rounded to t (a
// float32 t keeps the double, which is "float32 or better").
double narrow(DType t, double x) {
  return t == DType::kFloat32 ? x : double{round_double_to(t, x)};
}
double narrow_f(DType t, float x) {
  return t == DType::kFloat32 ? double{x} : double{round_to(t, x)};
}
// a * scalar in dtype t, the Python float converted to t first (a weak type).
double scaled(DType t, double a, double scalar) {
  if (t == DType::kFloat32) return a * scalar;
  return round_to(t, static_cast<float>(a) * round_double_to(t, scalar));
}
double divided(DType t, double a, double scalar) {
  if (t == DType::kFloat32) return a / scalar;
  return round_to(t, static_cast<float>(a) / round_double_to(t, scalar));
}

struct Sizes {
  int64_t num_tokens, hq, hkv, d, pages, page_size, pps;
};

Sizes sizes_of(const V3Inputs& in) {
  const int64_t n = in.kv_lens.dim(0);
  return {in.queries.dim(0),         in.queries.dim(1),  in.keys.dim(1),
          in.queries.dim(2),         in.kv_cache.dim(0), in.kv_cache.dim(1),
          in.page_indices.dim(0) / n};
}

// The fused update: the whole record of each new token, as merge_kv builds it.
void apply_update(const V3Inputs& in, const Sizes& z, const V3CacheLayout& layout, Tensor& cache) {
  const DType kv = cache.dtype();
  const int64_t num_seqs = in.distribution.int_at(2);
  std::byte* data = cache.data();
  for (int64_t i = 0; i < num_seqs; ++i) {
    const int64_t q0 = in.cu_q_lens.int_at(i), q_len = in.cu_q_lens.int_at(i + 1) - q0;
    const int64_t kv_len = in.kv_lens.int_at(i);
    for (int64_t r = 0; r < q_len; ++r) {
      const int64_t pos = kv_len - q_len + r;
      const int64_t page = in.page_indices.int_at(i * z.pps + pos / z.page_size);
      const int64_t base = layout.token_offset(page, pos % z.page_size, z.page_size);
      for (int64_t e = 0; e < layout.token_stride(); ++e) store_float(kv, data, base + e, 0.0f);
      for (int64_t h = 0; h < z.hkv; ++h) {
        const int64_t src = ((q0 + r) * z.hkv + h) * z.d;
        // Bit for bit: the new tokens already hold the KV dtype.
        const auto size = static_cast<size_t>(dtype_size(kv));
        for (int64_t c = 0; c < z.d; ++c) {
          std::memcpy(data + (base + layout.k_offset(h) + c) * dtype_size(kv),
                      in.keys.data() + (src + c) * dtype_size(kv), size);
          std::memcpy(data + (base + layout.v_offset(h) + c) * dtype_size(kv),
                      in.values.data() + (src + c) * dtype_size(kv), size);
        }
      }
    }
  }
}

// The KV blockings sequence i may run with (kernel semantics' program bound): hd64's one,
// kernel.py's pass tuple or each generation's defaults. Empty: unknown (hd64 without
// num_kv_pages_per_block).
std::vector<V3Blocking> blockings_of(Dialect d, const V3Inputs& in, const V3Params& p, int64_t seq,
                                     int tpu_version) {
  std::vector<V3Blocking> out;
  const auto add = [&out](int64_t fetch, int64_t compute) {
    const V3Blocking b{fetch, compute};
    for (const V3Blocking& x : out) {
      if (x.fetch == b.fetch && x.compute == b.compute) return;
    }
    out.push_back(b);
  };
  if (d == Dialect::kTpuInferenceV3Hd64) {
    if (p.num_kv_pages_per_block) {
      const int64_t n = *p.num_kv_pages_per_block * in.kv_cache.dim(1);
      add(n, n);
    }
    return out;
  }
  const V3Pass pass = v3_pass_of(in, seq);
  if (const auto given = v3_block_sizes(in, p, pass, tpu_version)) {
    add((*given)[1], (*given)[3]);
    return out;
  }
  for (int v : {5, 6, 7}) {
    const auto b = v3_block_sizes(in, p, pass, v);
    add((*b)[1], (*b)[3]);
  }
  return out;
}

// The largest factor a float32 kernel multiplies q.K by on the way to its logit, over the
// programs' orders (row_past_float32): 1 (the dot itself), sm_scale, sm_scale * k_scale, the
// whole product, and kernel.py's folded float32 scale.
double logit_chain(const V3Params& p) {
  const double sm = std::fabs(double{float32_scalar(p.sm_scale)});
  const double k = std::fabs(double{float32_scalar(p.k_scale.value_or(1.0))});
  const double q = std::fabs(double{float32_scalar(p.q_scale.value_or(1.0))});
  const double folded = std::fabs(double{float32_scalar(p.sm_scale * p.k_scale.value_or(1.0) *
                                                        p.q_scale.value_or(1.0))});
  return std::max({1.0, sm, sm * k, sm * k * q, folded});
}

}  // namespace

double v3_logit_error(Dialect d, const V3Params& p, DType out_dtype, Semantics s, double dot_abs,
                      double score, double shifted, int64_t head_dim) {
  const double u32 = std::ldexp(1.0, -24);
  double e = static_cast<double>(head_dim + 3) * u32 * dot_abs;
  if (p.soft_cap) e += 3.0 * u32 * std::fabs(*p.soft_cap);
  if (s == Semantics::kKernel) return e;
  // kernel.py rounds the scores to out_dtype; hd64 keeps them in float32.
  const DType score_dtype = d == Dialect::kTpuInferenceV3Hd64 ? DType::kFloat32 : out_dtype;
  const double ulp = std::ldexp(1.0, 1 - dtype_precision_bits(score_dtype));
  int roundings = d == Dialect::kTpuInferenceV3Hd64 ? 0 : 1;  // the cast of the dot
  roundings += 1 + (p.k_scale ? 1 : 0) + (p.q_scale ? 1 : 0) + (p.soft_cap ? 3 : 0);
  return e + roundings * ulp * std::fabs(score) + ulp * std::fabs(shifted);
}

V3ReferenceResult v3_reference(Dialect d, const V3Inputs& in, const V3Params& p, Semantics s,
                               const V3ReferenceOptions& opt) {
  const bool hd64 = d == Dialect::kTpuInferenceV3Hd64;
  const bool kernel = s == Semantics::kKernel;
  const Sizes z = sizes_of(in);
  const DType q_dtype = in.queries.dtype();
  const DType kv_dtype = in.kv_cache.dtype();
  const V3CacheLayout layout(d, kv_dtype, z.hkv, z.d);

  V3ReferenceResult result;
  result.semantics = s;
  result.out_dtype = hd64 ? q_dtype : p.out_dtype.value_or(v3_default_out_dtype(q_dtype));
  const DType out_dtype = result.out_dtype;
  result.out = Tensor(q_dtype, in.queries.shape());
  result.kv_cache = in.kv_cache;
  if (hd64 || p.update_kv_cache) apply_update(in, z, layout, result.kv_cache);
  const auto numel = static_cast<size_t>(in.queries.numel());
  const auto rows = static_cast<size_t>(z.num_tokens * z.hq);
  result.abs_weighted.assign(numel, 0.0);
  result.logit_spread.assign(numel, 0.0);
  result.reference_bound.assign(numel, 0.0);
  result.row_max_v.assign(rows, 0.0);
  result.row_past_float32.assign(rows, 0);
  result.row_kv_len.assign(rows, 0);
  result.row_seq.assign(rows, -1);
  // The program bound: kernel semantics, on calls whose blocking is known.
  const DType acc_dtype = hd64 ? DType::kFloat32 : out_dtype;
  const bool bounded = kernel && (!hd64 || p.num_kv_pages_per_block.has_value());
  if (bounded) result.program_bound.assign(numel, 0.0);

  const AttentionMath math = attention_math(d, p, q_dtype);
  // The kernel masks the window outside its causal branch; the reference inside it.
  const bool window = p.sliding_window && (kernel || math.causal);
  // Scores: the reference's in out_dtype (kernel.py) or float32 (hd64), the kernel's exact.
  const DType score_dtype = kernel || hd64 ? DType::kFloat32 : out_dtype;
  const double mask_value = narrow(score_dtype, static_cast<float>(math.mask_value));
  // v_scale as the kernel multiplies p.V by it (float32_scalar); the reference semantics
  // scales by p.v_scale where the ref does, below.
  const double v_scale = float32_scalar(p.v_scale.value_or(1.0));
  // Float32's range (row_past_float32): the logit chain's factor, and whether the folded
  // scale is past it already.
  constexpr double kFloat32Max = std::numeric_limits<float>::max();
  const double chain = logit_chain(p);
  const bool scale_past_float32 = !(chain <= kFloat32Max);
  const double dot_rounding = 1.0 + static_cast<double>(z.d + 4) * kU32;
  const std::byte* cache = result.kv_cache.data();
  const int64_t group = z.hq / z.hkv;
  const int64_t num_seqs = in.distribution.int_at(2);

  // Scratch, allocated once. The loops below keep each sum's order (over c for a dot, over t
  // for a column), but run many sums side by side: the dots of all keys over K transposed,
  // the columns of p.V together, so they vectorize and the bits stay those of one sum at a
  // time.
  std::vector<double> kt, v, q, logit, dot_scale, a, w, exact, dots, abs_dots, apart;
  std::vector<double> col_o, col_xs, col_ref, col_spread;
  std::vector<bool> masked, exp_apart;
  for (int64_t i = 0; i < num_seqs; ++i) {
    const int64_t q0 = in.cu_q_lens.int_at(i), q_len = in.cu_q_lens.int_at(i + 1) - q0;
    const int64_t kv_len = in.kv_lens.int_at(i);
    result.max_kv_len = std::max(result.max_kv_len, kv_len);
    const auto len = static_cast<size_t>(kv_len);
    const std::vector<V3Blocking> blockings =
        bounded ? blockings_of(d, in, p, i, opt.tpu_version) : std::vector<V3Blocking>{};
    for (int64_t kh = 0; kh < z.hkv; ++kh) {
      // K and V of this kv head, read in place from the updated cache: K transposed
      // (kt[c * len + t]: the dots below run over all keys at once), V by rows.
      kt.assign(len * static_cast<size_t>(z.d), 0.0);
      v.assign(kt.size(), 0.0);
      double max_v = 0.0, max_raw_v = 0.0;
      for (int64_t t = 0; t < kv_len; ++t) {
        const int64_t page = in.page_indices.int_at(i * z.pps + t / z.page_size);
        const int64_t base = layout.token_offset(page, t % z.page_size, z.page_size);
        for (int64_t c = 0; c < z.d; ++c) {
          const auto at = static_cast<size_t>(t * z.d + c);
          kt[static_cast<size_t>(c) * len + static_cast<size_t>(t)] =
              load_flushed(kv_dtype, cache, base + layout.k_offset(kh) + c);
          v[at] = load_flushed(kv_dtype, cache, base + layout.v_offset(kh) + c);
          const double mag = std::fabs(v[at] * v_scale);
          if (std::isfinite(mag)) max_v = std::max(max_v, mag);
          if (std::isfinite(v[at])) max_raw_v = std::max(max_raw_v, std::fabs(v[at]));
        }
      }
      // p.V: at most (kv_len + 1) max |V| before the division by l (each weight at most 1 in
      // a float32 kernel), times v_scale where the kernel multiplies by it first.
      const bool pv_past_float32 = static_cast<double>(kv_len + 1) * max_raw_v *
                                       std::max(1.0, std::fabs(v_scale)) * (1.0 + 0x1p-20) >
                                   kFloat32Max;
      result.max_abs_v = std::max(result.max_abs_v, max_v);
      for (int64_t g = 0; g < group; ++g) {
        const int64_t qh = kh * group + g;
        const double sink = in.attention_sink ? in.attention_sink->float_at(qh) : -INFINITY;
        for (int64_t r = 0; r < q_len; ++r) {
          const int64_t row = q0 + r, q_pos = kv_len - q_len + r;
          const auto ri = static_cast<size_t>(row * z.hq + qh);
          result.row_max_v[ri] = max_v;
          result.row_kv_len[ri] = kv_len;
          result.row_seq[ri] = i;
          result.row_past_float32[ri] = scale_past_float32 || pv_past_float32 ? 1 : 0;
          // q, quantized to the KV dtype under q_scale as both the ref and the kernel do:
          // q / q_scale in q's dtype, clipped to the KV dtype's finite range, cast.
          q.assign(static_cast<size_t>(z.d), 0.0);
          const int64_t qbase = (row * z.hq + qh) * z.d;
          for (int64_t c = 0; c < z.d; ++c) {
            double x = load_flushed(q_dtype, in.queries.data(), qbase + c);
            if (p.q_scale) {
              const double lim = dtype_finite_max(kv_dtype);
              x = std::clamp(divided(q_dtype, x, *p.q_scale), -lim, lim);
              x = round_double_to(kv_dtype, x);
            }
            q[static_cast<size_t>(c)] = x;
          }
          // Logits; for the tolerance, each one's float32 dot scale and, in the reference
          // semantics, whether a float32 implementation could round it differently.
          logit.assign(len, 0.0);
          dot_scale.assign(len, 0.0);
          masked.assign(len, false);
          bool scores_determined = true;
          // q . K_t and sum_c |q_c K_tc| for every t, each summed over c in order.
          dots.assign(len, 0.0);
          abs_dots.assign(len, 0.0);
          for (int64_t c = 0; c < z.d; ++c) {
            const double qc = q[static_cast<size_t>(c)];
            const double* kc = kt.data() + static_cast<size_t>(c) * len;
            for (size_t t = 0; t < len; ++t) {
              const double prod = qc * kc[t];
              dots[t] += prod;
              abs_dots[t] += std::fabs(prod);
            }
          }
          for (int64_t t = 0; t < kv_len; ++t) {
            const auto ti = static_cast<size_t>(t);
            const double dot = dots[ti], abs_dot = abs_dots[ti];
            masked[ti] = (math.causal && q_pos < t) || (window && q_pos - *p.sliding_window >= t);
            double x;
            if (kernel) {
              x = dot * math.logit_scale;
              if (p.soft_cap) x = *p.soft_cap * std::tanh(x / *p.soft_cap);
            } else {
              // XLA's float32 dot is off by at most (D + 3) 2^-24 sum |q k| in any order.
              const double radius = static_cast<double>(z.d + 3) * kU32 * abs_dot;
              if (!masked[ti] && may_round_apart(score_dtype, dot, radius))
                scores_determined = false;
              x = narrow(score_dtype, dot);
              x = scaled(score_dtype, x, p.sm_scale);
              if (p.k_scale) x = scaled(score_dtype, x, *p.k_scale);
              if (p.q_scale) x = scaled(score_dtype, x, *p.q_scale);
              if (p.soft_cap) {
                const double th = std::tanh(divided(score_dtype, x, *p.soft_cap));
                if (!masked[ti] && may_round_apart(score_dtype, th, kExpRelError * std::fabs(th))) {
                  scores_determined = false;
                }
                x = scaled(score_dtype, narrow(score_dtype, th), *p.soft_cap);
              }
            }
            if (masked[ti]) x = mask_value;
            else if (abs_dot * dot_rounding * chain > kFloat32Max) result.row_past_float32[ri] = 1;
            logit[ti] = x;
            dot_scale[ti] = masked[ti] ? 0.0 : std::fabs(math.logit_scale) * abs_dot;
          }
          // Softmax over t < kv_len (and the sink), and a[t]: how far (in log-weight) a
          // correct implementation's weight t may be from this one's before any cast to the
          // KV dtype; row_rel: a relative error common to the row's weights.
          double m = sink, sink_weight = 0.0;
          for (double x : logit) m = std::max(m, x);
          w.assign(len, 0.0);
          a.assign(len, 0.0);
          double row_rel = 0.0;
          if (!kernel && score_dtype != DType::kFloat32) {
            // jax.nn.softmax on bfloat16: x - max, exp and the quotient each rounded to
            // bfloat16 (XLA computes them in float32); the sum in float32, then rounded.
            // With the scores determined, x - max is too; exp may round apart where the exact
            // value lies within exp's float32 error of a rounding boundary, the sum within
            // its float32 order's; the quotient where an input may differ. Each such rounding
            // is one bfloat16 ulp, 2^(1 - prec) relative.
            const double ulp = std::ldexp(1.0, 1 - dtype_precision_bits(score_dtype));
            exp_apart.assign(len, false);
            double sum = 0.0;
            for (size_t t = 0; t < len; ++t) {
              const double shifted =
                  narrow_f(score_dtype, static_cast<float>(logit[t]) - static_cast<float>(m));
              const double ex = std::exp(shifted);
              exp_apart[t] = may_round_apart(score_dtype, ex, kExpRelError * ex);
              w[t] = narrow_f(score_dtype, static_cast<float>(ex));
              sum += static_cast<float>(w[t]);
            }
            bool sum_apart =
                !scores_determined ||
                may_round_apart(score_dtype, sum, static_cast<double>(len + 2) * kU32 * sum);
            for (size_t t = 0; t < len; ++t) sum_apart = sum_apart || exp_apart[t];
            const float total = round_double_to(score_dtype, sum);
            for (size_t t = 0; t < len; ++t) {
              w[t] = round_to(score_dtype, static_cast<float>(w[t]) / total);
            }
            if (sum_apart) row_rel += ulp;
            for (size_t t = 0; t < len; ++t) {
              if (!scores_determined) {
                a[t] = v3_logit_error(d, p, out_dtype, s, dot_scale[t], masked[t] ? 0.0 : logit[t],
                                      logit[t] - m, z.d) +
                       2.0 * ulp;
              } else if (exp_apart[t] || sum_apart) {
                a[t] = (exp_apart[t] ? 2.0 : 1.0) * ulp;
              }
            }
          } else {
            double sum = std::isfinite(sink) ? std::exp(sink - m) : 0.0;
            for (size_t t = 0; t < len; ++t) sum += (w[t] = std::exp(logit[t] - m));
            for (size_t t = 0; t < len; ++t) w[t] /= sum;
            sink_weight = std::isfinite(sink) ? std::exp(sink - m) / sum : 0.0;
            for (size_t t = 0; t < len; ++t) {
              a[t] = masked[t] && kernel
                         ? 0.0
                         : v3_logit_error(d, p, out_dtype, s, dot_scale[t],
                                          masked[t] ? 0.0 : logit[t], logit[t] - m, z.d);
            }
            // The float32 softmax: exp, the sum in any order, the quotient.
            if (!kernel) row_rel += static_cast<double>(len + 4) * kU32 + 2.0 * kExpRelError;
          }
          double a_bar = 0.0;
          for (size_t t = 0; t < len; ++t) a_bar += w[t] * a[t];
          // The reference casts p to the KV dtype; per token, how far the cast weights may be
          // apart: 0 where both land on the same value, else the difference before plus one
          // ulp of the KV dtype.
          apart.assign(len, 0.0);
          if (!kernel) {
            for (size_t t = 0; t < len; ++t) {
              const double r_t = a[t] + a_bar + row_rel;
              const double before = w[t] * r_t;
              if (kv_dtype == DType::kFloat32 ||
                  dtype_precision_bits(kv_dtype) >= dtype_precision_bits(score_dtype)) {
                apart[t] = before;
              } else if (r_t > 0.0 && may_round_apart(kv_dtype, w[t], before)) {
                apart[t] = before + dtype_ulp(kv_dtype, w[t]);
              }
              w[t] = narrow(kv_dtype, w[t]);
            }
          }
          exact.assign(static_cast<size_t>(z.d), 0.0);
          // Per column c: o = sum_t w_t V_tc, xs = sum_t w_t |V_tc|, and (reference semantics)
          // e_ref = sum_t apart_t |V_tc|, each over t in order.
          const auto dd = static_cast<size_t>(z.d);
          col_o.assign(dd, 0.0);
          col_xs.assign(dd, 0.0);
          col_ref.assign(dd, 0.0);
          for (size_t t = 0; t < len; ++t) {
            const double wt = w[t], at = apart[t];
            const double* vrow = v.data() + t * dd;
            for (size_t c = 0; c < dd; ++c) {
              col_o[c] += wt * vrow[c];
              col_xs[c] += wt * std::fabs(vrow[c]);
            }
            if (!kernel) {
              for (size_t c = 0; c < dd; ++c) col_ref[c] += at * std::fabs(vrow[c]);
            }
          }
          // Kernel semantics: spread_c = sum_t w_t (a_t + a_bar) |V_tc v_scale - o_c v_scale|.
          col_spread.assign(dd, 0.0);
          if (kernel) {
            for (size_t t = 0; t < len; ++t) {
              const double coef = w[t] * (a[t] + a_bar);
              const double* vrow = v.data() + t * dd;
              for (size_t c = 0; c < dd; ++c) {
                col_spread[c] += coef * std::fabs(vrow[c] * v_scale - col_o[c] * v_scale);
              }
            }
          }
          for (int64_t c = 0; c < z.d; ++c) {
            const auto cc = static_cast<size_t>(c);
            const double o = col_o[cc], xs = col_xs[cc];
            double e_ref = col_ref[cc];
            double y;
            if (kernel) {
              y = round_double_to(q_dtype, o * v_scale);
            } else {
              // p.V in the KV dtype (its float32 order: (kv + 2) 2^-24 X), cast to out_dtype
              // (hd64: q's dtype), times v_scale there. A rounding whose input may differ by
              // e_ref either lands both on one value (0) or adds one ulp.
              const DType final_dtype = hd64 ? q_dtype : out_dtype;
              e_ref += static_cast<double>(len + 2) * kU32 * xs;
              const double pv = pv_round(kv_dtype, o);
              if (kv_dtype != DType::kFloat32) {
                const bool apart_pv =
                    pv_round(kv_dtype, o - e_ref) != pv_round(kv_dtype, o + e_ref);
                e_ref = apart_pv ? e_ref + dtype_ulp(kv_dtype, o) : 0.0;
              }
              y = narrow(final_dtype, pv);
              if (final_dtype != DType::kFloat32 &&
                  dtype_precision_bits(final_dtype) < dtype_precision_bits(kv_dtype) &&
                  e_ref > 0.0) {
                e_ref = may_round_apart(final_dtype, pv, e_ref) ? e_ref + dtype_ulp(final_dtype, pv)
                                                                : 0.0;
              }
              if (p.v_scale) {
                const double before = y;
                y = scaled(final_dtype, y, *p.v_scale);
                const double vs = final_dtype == DType::kFloat32
                                      ? *p.v_scale
                                      : double{round_double_to(final_dtype, *p.v_scale)};
                e_ref *= std::fabs(vs);
                if (e_ref > 0.0 && final_dtype != DType::kFloat32 &&
                    may_round_apart(final_dtype, before * vs, e_ref)) {
                  e_ref += dtype_ulp(final_dtype, before * vs);
                }
                // float32: XLA multiplies by float32(v_scale), rounded, and this rounds once.
                if (final_dtype == DType::kFloat32) e_ref += 3.0 * kU32 * std::fabs(y);
              }
              // A float32 q: this rounds the double once more.
              if (q_dtype == DType::kFloat32 && e_ref > 0.0) e_ref += kU32 * std::fabs(y);
              y = round_double_to(q_dtype, y);
            }
            store_float(q_dtype, result.out.data(), qbase + c, static_cast<float>(y));
            // Kernel semantics: the sums the kernel tolerance needs (v3_compare.h).
            exact[cc] = o * v_scale;
            const auto e = static_cast<size_t>(qbase + c);
            result.abs_weighted[e] = xs * std::fabs(v_scale);
            result.logit_spread[e] = kernel ? col_spread[cc] : 0.0;
            result.reference_bound[e] = kernel ? 0.0 : e_ref;
          }
          if (!blockings.empty()) {
            const V3AccumulationRow acc_row{&logit, &masked, &w, &a, v.data(), z.d, v_scale,
                                            sink, sink_weight, exact.data()};
            double* bound = &result.program_bound[static_cast<size_t>(qbase)];
            for (const V3Blocking& b : blockings) {
              v3_accumulation_bound(acc_row, b, acc_dtype, opt.terms, bound);
            }
          }
        }
      }
    }
  }
  return result;
}

}  // namespace rpa
