#include "oracle/v3_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/attention_math.h"
#include "core/python_repr.h"
#include "core/v3_cache_layout.h"
#include "oracle/compare.h"
#include "oracle/dot_precision.h"
#include "oracle/tolerance.h"
#include "schedule/v3_program.h"

namespace rpa {
namespace {

double unit(DType t) { return std::ldexp(1.0, -precision_bits(t)); }

bool same_special(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::isinf(a) && a == b;
}


// The cache bit for bit and rows [0, rows) of out against want within `allowed`, but for the
// (row, head) pairs `skip` marks (row * Hq + head; none when null).
V3Comparison compare_arrays(Dialect d, const V3Inputs& in, const Tensor& want_out,
                            const Tensor& want_cache, const std::vector<double>& allowed,
                            int64_t rows, const Tensor& out, const Tensor& kv_cache_out,
                            const std::vector<unsigned char>* skip = nullptr) {
  if (out.shape() != want_out.shape() || kv_cache_out.shape() != want_cache.shape() ||
      kv_cache_out.dtype() != want_cache.dtype()) {
    throw std::invalid_argument("v3_compare: out or kv_cache_out has the wrong shape or dtype");
  }
  V3Comparison c;
  // The cache, bit for bit.
  const DType kv_dtype = want_cache.dtype();
  const auto size = static_cast<size_t>(dtype_size(kv_dtype));
  const V3CacheLayout layout(d, kv_dtype, in.keys.dim(1), in.queries.dim(2));
  const int64_t page_size = want_cache.dim(1), stride = layout.token_stride();
  // One memcmp of the whole cache first: equal is the usual case, and an element-wise memcmp
  // under ASan costs a call and a region check per element.
  const int64_t cache_elems = want_cache.numel();
  const bool cache_same = cache_elems == 0 ||
                          std::memcmp(kv_cache_out.data(), want_cache.data(),
                                      static_cast<size_t>(cache_elems) * size) == 0;
  for (int64_t e = 0; !cache_same && e < cache_elems; ++e) {
    if (std::memcmp(kv_cache_out.data() + static_cast<size_t>(e) * size,
                    want_cache.data() + static_cast<size_t>(e) * size, size) == 0) {
      continue;
    }
    ++c.cache_differences;
    if (c.cache_first) continue;
    const int64_t token = e / stride, off = e % stride;
    V3CacheMismatch m{e, token / page_size,        token % page_size,     0, false,
                      0, kv_cache_out.float_at(e), want_cache.float_at(e)};
    if (d == Dialect::kTpuInferenceV3Hd64) {
      m.kv_head = off / 128;
      m.value = off % 128 >= 64;
      m.lane = off % 64;
    } else {
      const int64_t combined = off / layout.padded_head_dim();
      m.kv_head = combined / 2;
      m.value = combined % 2 == 1;
      m.lane = off % layout.padded_head_dim();
    }
    c.cache_first = m;
  }
  c.cache_equal = c.cache_differences == 0;
  // The rows.
  const int64_t heads = in.queries.dim(1), dim = in.queries.dim(2);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t h = 0; h < heads; ++h) {
      if (skip && (*skip)[static_cast<size_t>(row * heads + h)]) {
        ++c.past_float32;
        continue;
      }
      for (int64_t col = 0; col < dim; ++col) {
        const int64_t e = (row * heads + h) * dim + col;
        const double a = out.float_at(e), b = want_out.float_at(e);
        const double tol = allowed[static_cast<size_t>(e)];
        ++c.compared;
        c.max_allowed = std::max(c.max_allowed, tol);
        if (same_special(a, b)) continue;
        const double err = std::fabs(a - b);
        if (std::isfinite(err)) {
          if (err > c.max_abs_err || (err == c.max_abs_err && tol < c.tolerance_at_max)) {
            c.max_abs_err = err;
            c.tolerance_at_max = tol;
          }
          c.max_share = std::max(c.max_share, tol > 0.0 ? err / tol : (err > 0.0 ? INFINITY : 0.0));
          if (err <= tol) continue;
        }
        ++c.mismatches;
        if (!c.first) c.first = V3OutMismatch{row, h, col, a, b, tol};
      }
    }
  }
  return c;
}

// The check's power (V3Comparison): over the elements whose allowance is not NaN (NaN: a
// row no sequence defines), with row ri's value scale scale_of(ri) (ri = row * Hq + head).
template <class Scale>
void state_power(V3Comparison& c, const std::vector<double>& allowed, const Tensor& want_out,
                 DType q_dtype, Scale scale_of) {
  c.power_stated = true;
  const int64_t dim = want_out.dim(2);
  double least = INFINITY, most = -1.0;
  for (size_t e = 0; e < allowed.size(); ++e) {
    if (std::isnan(allowed[e])) continue;
    const double want = want_out.float_at(static_cast<int64_t>(e));
    if (!std::isfinite(want)) continue;
    if (allowed[e] < std::fabs(want)) c.rejects_zero = true;
    const double scale = scale_of(e / static_cast<size_t>(dim));
    if (!(scale > 0.0)) continue;
    const double w = detectable_key_weight(allowed[e], want, scale, q_dtype);
    least = std::min(least, w);
    most = std::max(most, w);
  }
  if (most >= 0.0) {
    c.min_detectable_key_weight = least;
    c.key_weight_every_row = most;
  }
}

}  // namespace

namespace {

// Per output element, the distance from want to the farther end of the enclosure of every
// legal run of the program (V3ToleranceOptions::program_enclosure), the largest over the
// generations' programs; empty where the literal schedule does not run the call.
std::vector<double> program_enclosure_allowance(Dialect d, const V3Inputs& in, const V3Params& p,
                                                const Tensor& want, int tpu_version) {
  std::vector<int> generations = {tpu_version};
  if (tpu_version < 0) generations = {5, 6, 7};
  if (d == Dialect::kTpuInferenceV3Hd64) generations = {std::max(tpu_version, 6)};  // one program
  std::vector<double> allowed(static_cast<size_t>(want.numel()), 0.0);
  for (int g : generations) {
    V3LiteralRun run;
    try {
      run = v3_literal_run(d, in, p, {.tpu_version = g});
    } catch (const V3ProgramError&) {
      return {};
    } catch (const std::invalid_argument&) {
      return {};
    }
    for (int64_t e = 0; e < want.numel(); ++e) {
      const auto i = static_cast<size_t>(e);
      const double w = want.float_at(e), lo = run.enclosure.lo[i], hi = run.enclosure.hi[i];
      const double a = std::isfinite(w) && !std::isnan(lo) && !std::isnan(hi)
                           ? std::max({hi - w, w - lo, 0.0})
                           : INFINITY;
      allowed[i] = std::max(allowed[i], a);
    }
  }
  return allowed;
}

}  // namespace

std::vector<double> v3_tolerance(Dialect d, const V3Inputs& in, const V3Params& p,
                                 const V3ReferenceResult& r, const V3ToleranceOptions& o) {
  const bool hd64 = d == Dialect::kTpuInferenceV3Hd64;
  const DType q_dtype = in.queries.dtype();
  const int64_t page_size = in.kv_cache.dim(1), dim = in.queries.dim(2);
  const double u32 = std::ldexp(1.0, -24), uq = unit(q_dtype);
  std::vector<double> allowed(static_cast<size_t>(in.queries.numel()), 0.0);
  // A v3 kernel's program: its accumulation bound from the reference pass.
  const bool program_path = r.semantics == Semantics::kKernel && !o.float32_accumulators &&
                            !r.program_bound.empty();
  const std::vector<double> enclosed = program_path && o.program_enclosure
                                           ? program_enclosure_allowance(d, in, p, r.out, o.tpu_version)
                                           : std::vector<double>{};
  for (size_t ri = 0; ri < r.row_seq.size(); ++ri) {
    const int64_t seq = r.row_seq[ri];
    if (seq < 0) continue;
    const auto kv = static_cast<double>(r.row_kv_len[ri]);
    const double limit = 2.0 * r.row_max_v[ri];
    double rel = 0.0, wrel = 0.0, floor = dtype_min_subnormal(q_dtype);
    // The program's accumulation, bounded in the reference pass (v3_accumulation_bound.h).
    const bool program = program_path;
    if (r.semantics == Semantics::kKernel && !program) {
      // float32 accumulators in any schedule of whole pages (rpa's tiled kernel; hd64
      // without its block sizes): n = kv tokens summed in one run, N = ceil(kv / page_size)
      // steps.
      const double steps = std::ceil(kv / static_cast<double>(page_size));
      const double eps_l = (kv + 2.0 * steps) * u32;
      rel = ((kv + 7.0 * steps) * u32 + (kv + 2.0) * u32 + 2.0 * (steps + 1.0) * kExpError) /
            (1.0 - eps_l);
      if (!(eps_l < 1.0)) rel = INFINITY;
    }
    if (r.semantics == Semantics::kKernel) {
      wrel = o.final_rounding * (hd64 && q_dtype != DType::kFloat32 ? 4.0 : 2.0) * uq;
    }
    // Both semantics: float32 products and partial sums below 2^-126 that a CPU (XLA's
    // einsum, rpa's kernel under FTZ) or a TPU flushes to 0, one per key and one for the sum.
    // The package's hd64 test with sinks and windows has such products (a p.v of 2.2e-39).
    // And the weights themselves: a float32 exp(s - m), or a rescale exp(m_prev - m), below
    // 2^-126 is flushed to 0 too, and V may be large: each key's weight that ends below
    // 2^-126 (l >= 1) may be lost, so 2^-126 M_row per key (fuzz_raw_inputs found an hd64
    // row whose one weight, 9.4e-39 beside a sink of 1.2e-38, times V 10 * v_scale 0.25 was
    // 2.4e-38 in the definition and 0 in the kernel).
    floor += (kv + 1.0) * std::ldexp(1.0, -126) + kv * std::ldexp(r.row_max_v[ri], -126);
    for (int64_t c = 0; c < dim; ++c) {
      const auto e = ri * static_cast<size_t>(dim) + static_cast<size_t>(c);
      const double want = std::fabs(r.out.float_at(static_cast<int64_t>(e)));
      const double final_rounding = (std::isfinite(want) ? want : 0.0) * wrel;
      const double bound = program ? r.program_bound[e] + final_rounding + floor
                           : r.semantics == Semantics::kKernel
                               ? r.logit_spread[e] + r.abs_weighted[e] * rel + final_rounding + floor
                               : r.reference_bound[e] + floor;
      allowed[e] = std::isfinite(bound) ? std::min(bound, limit + floor) : limit + floor;
      if (program && !enclosed.empty()) allowed[e] = std::min(allowed[e], enclosed[e] + floor);
    }
  }
  return allowed;
}


V3Comparison v3_compare(Dialect d, const V3Inputs& in, const V3Params& p,
                        const V3ReferenceResult& r, const Tensor& out, const Tensor& kv_cache_out,
                        const V3ToleranceOptions& o) {
  const std::vector<double> allowed = v3_tolerance(d, in, p, r, o);
  V3Comparison c = compare_arrays(d, in, r.out, r.kv_cache, allowed,
                                  in.cu_q_lens.int_at(in.distribution.int_at(2)), out, kv_cache_out,
                                  r.row_past_float32.empty() ? nullptr : &r.row_past_float32);
  // The power, over the elements of rows a sequence defines and the comparison compares.
  const std::vector<double>& row_max_v = r.row_max_v;
  std::vector<double> defined(allowed);
  for (size_t ri = 0; ri < r.row_seq.size(); ++ri) {
    if (r.row_seq[ri] >= 0 && !(ri < r.row_past_float32.size() && r.row_past_float32[ri])) continue;
    const auto dim = static_cast<size_t>(in.queries.dim(2));
    std::fill(defined.begin() + static_cast<std::ptrdiff_t>(ri * dim),
              defined.begin() + static_cast<std::ptrdiff_t>((ri + 1) * dim), NAN);
  }
  state_power(c, defined, r.out, in.queries.dtype(), [&](size_t ri) { return row_max_v[ri]; });
  return c;
}

V3LiteralRun v3_literal_run(Dialect d, const V3Inputs& in, const V3Params& p,
                            const V3ProgramOptions& options, const V3EnclosureTerms& terms) {
  const DType q_dtype = in.queries.dtype(), kv_dtype = in.kv_cache.dtype();
  // q meets K as the KV dtype where q_scale quantizes it; p is float32 against V (hd64: [K | V]).
  const bool q_f32 = (p.q_scale ? kv_dtype : q_dtype) == DType::kFloat32;
  const bool kv_f32 = kv_dtype == DType::kFloat32;
  V3LiteralRun run;
  run.enclosure.terms = terms;
  run.enclosure.terms.mxu_qk = mxu_product_error(DotPasses::kSix, q_f32, kv_f32);
  run.enclosure.terms.mxu_pv = mxu_product_error(DotPasses::kSix, true, kv_f32);
  V3ProgramOptions o = options;
  o.enclosure = &run.enclosure;
  run.result = v3_literal_attention(d, in, p, o);
  const Tensor& out = run.result.out;
  for (int64_t e = 0; e < out.numel(); ++e) {
    const double w = out.float_at(e), lo = run.enclosure.lo[static_cast<size_t>(e)],
                 hi = run.enclosure.hi[static_cast<size_t>(e)];
    if (std::isfinite(w) && !std::isnan(lo) && !std::isnan(hi) && (w < lo || w > hi)) ++run.outside;
  }
  return run;
}

std::vector<double> v3_schedule_tolerance(const V3LiteralRun& literal) {
  const Tensor& out = literal.result.out;
  std::vector<double> allowed(static_cast<size_t>(out.numel()), INFINITY);
  for (int64_t e = 0; e < out.numel(); ++e) {
    const auto i = static_cast<size_t>(e);
    const double w = out.float_at(e), lo = literal.enclosure.lo[i], hi = literal.enclosure.hi[i];
    if (!std::isfinite(w) || std::isnan(lo) || std::isnan(hi)) continue;
    allowed[i] = std::max({hi - w, w - lo, 0.0});
  }
  return allowed;
}

V3Comparison v3_compare_literal(Dialect d, const V3Inputs& in, const V3LiteralRun& literal,
                                const Tensor& out, const Tensor& kv_cache_out) {
  const std::vector<double> allowed = v3_schedule_tolerance(literal);
  V3Comparison c = compare_arrays(d, in, literal.result.out, literal.result.kv_cache, allowed,
                                  in.queries.dim(0), out, kv_cache_out);
  // The power over the rows the sequences define (the others hold the queries).
  const double m = literal.enclosure.max_abs_v;
  std::vector<double> defined(allowed);
  const int64_t rows = std::clamp<int64_t>(in.cu_q_lens.int_at(in.distribution.int_at(2)), 0, in.queries.dim(0));
  std::fill(defined.begin() + static_cast<std::ptrdiff_t>(rows * in.queries.dim(1) * in.queries.dim(2)),
            defined.end(), NAN);
  state_power(c, defined, literal.result.out, in.queries.dtype(), [m](size_t) { return m; });
  return c;
}

std::string describe_v3_comparison(const V3Comparison& c) {
  std::string s;
  if (c.cache_first) {
    const V3CacheMismatch& m = *c.cache_first;
    s += "cache: page " + py_int_repr(m.page) + ", slot " + py_int_repr(m.slot) + ", kv head " +
         py_int_repr(m.kv_head) + ", " + (m.value ? "V" : "K") + ", lane " + py_int_repr(m.lane) +
         ": got " + py_float_repr(m.got) + ", want " + py_float_repr(m.want) + " (" +
         py_int_repr(c.cache_differences) + " elements differ)";
  } else {
    s += "cache equal";
  }
  s += "; ";
  if (c.first) {
    const V3OutMismatch& m = *c.first;
    s += "out: row " + py_int_repr(m.row) + ", head " + py_int_repr(m.head) + ", column " +
         py_int_repr(m.col) + ": got " + py_float_repr(m.got) + ", want " + py_float_repr(m.want) +
         ", allowed difference " + py_float_repr(m.allowed) + " (" + py_int_repr(c.mismatches) +
         " of " + py_int_repr(c.compared) + " elements differ)";
  } else {
    s += "out: all " + py_int_repr(c.compared) + " elements agree (max error " +
         py_float_repr(c.max_abs_err) + ", " + py_float_repr(c.max_share) + " of its tolerance)";
  }
  if (c.past_float32 > 0) {
    s += "; ";
    s += py_int_repr(c.past_float32);
    s += " (row, head) pairs not compared: a float32 kernel's logits or p.V may leave float32's range there";
  }
  return s;
}

}  // namespace rpa
