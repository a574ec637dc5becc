// The comparison of a tpu-inference v3 result (out, kv_cache_out) with the v3 dense
// reference (reference/v3_reference.h): the cache bit for bit, the defined output rows
// within a tolerance derived from the rounding points of each semantics.
//
// Notation (per output element e = (row, head, column c); v3_reference.h computes the sums):
// u_x = 2^-prec(x) (float32 2^-24, bfloat16 2^-8, e4m3 2^-4, e5m2 2^-3), X = sum_t p_t |v_t|,
// S = logit_spread[e] = sum_t p_t (a_t + a_bar) |v_t - o| (a_t: v3_logit_error), kv = the
// row's kv_len, M_row = max |v_t| of the row's keys, W = |want|.
//
// Logits. A logit that moves by d_t moves p_t by a factor e^(d_t - sum p_u d_u) (to first
// order), so o moves by at most sum_t p_t (|d_t| + a_bar) |v_t - o| = S when |d_t| <= a_t.
//
// Kernel semantics (the exact definition) against a v3 kernel: the program's accumulation
// bound (reference/v3_accumulation_bound.h; docs/oracle.md, "tpu-inference v3: the
// program's accumulation bound"), V3ReferenceResult::program_bound, computed in the
// reference pass from the row's own partial sums in the program's order and blocking (the
// call's block sizes, else generations 5-7's defaults), plus the output's final roundings
// 2 u_q W (hd64 with bfloat16 q: acc * reciprocal(l, approx) is acc / bf16(l) in interpret
// mode, 4 u_q W; a TPU's approximate reciprocal is not covered), min_subnormal(q) and
// (kv + 1) 2^-126 + kv 2^-126 M_row (flushed float32 subnormals: products and sums, and
// weights below 2^-126 times V), at most 2 M_row.
// Where l, m and acc are float32 in any schedule (rpa's tiled kernel:
// V3ToleranceOptions::float32_accumulators; an hd64 call without its block sizes) the
// any-order float32 bound instead: S + X [(n + 2N) u + 3N u + 2N u + (n + 2) u + 2 (N + 1)
// kExpError] / (1 - (n + 2N) u), n = kv tokens summed in one run, N = ceil(kv / page_size)
// steps (each chunk merge of a flash-decoding split one more rescale), u = 2^-24.
// Not covered: a TPU evaluating float32 dots in fewer than six bfloat16 passes; a
// mask_value that does not dominate (kernel.py also gives the slots of the last compute
// block past kv_len mask_value, with V zeroed: they enter l where exp(mask_value - m) is not
// 0, which the definition's softmax over t < kv_len excludes; measured with mask_value -3).
//
// Reference semantics (the ref step for step) against tpu-inference's ref run by XLA: both
// round at the same points, so they differ only where float32 work before a rounding point
// differs in order or implementation and the rounded values land apart. v3_reference follows
// that through each rounding point (reference_bound), with two facts: rounding is monotone,
// so two inputs within r of x round alike unless x - r and x + r round apart (then they are
// at most their difference plus one ulp apart); and a rounding of equal inputs is equal (XLA
// computes each bfloat16 elementwise op in float32, correctly rounded, then rounds: the
// reference does the same; XLA's CPU dot on float8 operands rounds its float32 sum to
// float16 before float8, and so does the reference). The float32 sources, each a bound: the dot
// before the cast to out_dtype (D + 3) 2^-24 sum |q k|; exp and tanh 2^-21 relative (kExpError);
// the softmax's float32 sum (kv + 2) 2^-24 of it; a float32 softmax (out_dtype float32, hd64) (kv +
// 4) 2^-24
// + 2 kExpError relative per weight; p.V's float32 sum (kv + 2) 2^-24 X. Where the scores may
// land apart, every later rounding adds one ulp: per score v3_logit_error's ulps, per weight
// exp and the quotient, per row the sum. Per token the weight's bound r_t (relative) goes
// through the cast of p to the KV dtype (0 or p_t r_t + one ulp at p_t), then per element
// sum_t that |V_tc| plus p.V's order goes through the cast of p.V to the KV dtype, to
// out_dtype, the v_scale multiply (times |v_scale|, plus an ulp where it may land apart;
// float32: 3 u_32 W for float32(v_scale), the product and this reference's own rounding).
// So allowed = reference_bound + min_subnormal(q) + (kv + 1) 2^-126 + kv 2^-126 M_row (float32
// products, sums and weights below 2^-126 that XLA's CPU einsum flushes to 0), at most 2 M_row:
// 0 for an element the float32 differences cannot reach, which is most of them with bfloat16
// scores.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "core/tensor.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "kernel/v3_kernel.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"

namespace rpa {

// The first cache element whose bits differ, named in the packed layout's terms.
struct V3CacheMismatch {
  int64_t element;  // flat index into the cache
  int64_t page;
  int64_t slot;
  int64_t kv_head;  // >= Hkv: a padding head
  bool value;       // false: K, true: V
  int64_t lane;     // position in the head's row; >= head_dim: padding
  double got;
  double want;
};

struct V3OutMismatch {
  int64_t row;
  int64_t head;
  int64_t col;
  double got;
  double want;
  double allowed;
};

struct V3Comparison {
  bool cache_equal = true;
  int64_t cache_differences = 0;  // elements whose bits differ
  std::optional<V3CacheMismatch> cache_first;
  int64_t compared = 0;    // output elements on defined rows
  // (row, head) pairs of defined rows left out because a float32 kernel may leave float32's
  // range there (V3ReferenceResult::row_past_float32; v3_compare only).
  int64_t past_float32 = 0;
  int64_t mismatches = 0;  // outside the tolerance (or a NaN / infinity on one side only)
  double max_abs_err = 0.0;
  double tolerance_at_max = 0.0;       // the allowed difference where max_abs_err occurs
  double max_share = 0.0;              // max |got - want| / allowed (> 1: a mismatch)
  double max_allowed = 0.0;            // the largest allowance used
  std::optional<V3OutMismatch> first;  // row-major
  // The check's power (v3_compare only; as Comparison states it for the jax dialect, with
  // detectable_key_weight per element and the row's max |v| as the value scale): the least
  // weight of a dropped key sure to be rejected in the element the check watches closest, and
  // in every element; infinite when nothing is guaranteed. rejects_zero: some compared element
  // has an allowance below |want|, so an all-zero output fails.
  double min_detectable_key_weight = INFINITY;
  double key_weight_every_row = INFINITY;
  bool rejects_zero = false;
  bool power_stated = false;  // v3_compare set the three above (v3_compare_literal does not)
  bool agree() const { return cache_equal && mismatches == 0; }
};

// Which implementation the kernel semantics' tolerance bounds.
struct V3ToleranceOptions {
  // false: a v3 kernel's program (the accumulation bound of the reference pass). true: an
  // implementation that holds l, m and acc in float32 in any schedule (rpa's tiled kernel):
  // since its KV blocks, chunks and summation order are its own, the bound takes the worst
  // any schedule of whole pages may have (above). Reference semantics: no effect.
  bool float32_accumulators = false;
  // A multiplier on the output's final roundings (2 u_q |want|; hd64 with bfloat16 q 4): 1 in
  // use; the tests that show the term is needed shrink it.
  double final_rounding = 1.0;
  // Kernel semantics, a v3 kernel's program: also run the literal v3 schedule with its
  // enclosure (schedule/v3_enclosure.h) on the call, and allow per element no more than the
  // distance from want to the farther end of what any legal run of the program computes
  // there (the largest over tpu_version's program, -1: generations 5, 6 and 7, as the
  // reference's accumulation bound takes them), where that is less than the accumulation
  // bound: it follows the program's determined bfloat16 roundings of l and m instead of
  // charging each its worst (issue 47). Costs the literal schedule's run with its enclosure,
  // three for kernel.py calls without their block sizes. For the program's own runs only:
  // another correct implementation (rpa's tiled kernel: float32 accumulators, its own
  // blocking) may lie outside it, so `rpa check` and `rpa.check`, which cannot tell, leave it
  // unset (wired in for a case's own out, the package's tests rejected the tiled kernel).
  bool program_enclosure = false;
  int tpu_version = -1;
};

// rpa's tiled kernel holds l, m and acc in float32: the tolerance its own arithmetic earns
// (the v3 kernel's bfloat16 accumulators would allow ~2^16 times more for bfloat16 queries).
// Its checks everywhere (properties, fuzz targets, raw calls, bench) use this one.
inline constexpr V3ToleranceOptions kRpaTolerance{.float32_accumulators = true};

// The allowed |got - want| per output element (q's layout; 0 on rows no sequence defines),
// as derived above for r's semantics (|want| taken from r.out).
std::vector<double> v3_tolerance(Dialect d, const V3Inputs& in, const V3Params& p,
                                 const V3ReferenceResult& r, const V3ToleranceOptions& o = {});

// out: [T, Hq, D] in q's dtype; kv_cache_out: the cache's shape and dtype. Rows at or past
// cu_q_lens[distribution[2]] are not compared. NaN equals NaN, an infinity itself.
V3Comparison v3_compare(Dialect d, const V3Inputs& in, const V3Params& p,
                        const V3ReferenceResult& r, const Tensor& out, const Tensor& kv_cache_out,
                        const V3ToleranceOptions& o = {});

// The literal v3 schedule (schedule/v3_program.h; DESIGN.md section 6) run with the
// enclosure of every legal run of the same program (schedule/v3_enclosure.h): what another
// run may compute that adds its float32 dots and sums in another order and blocking (a TPU's
// MXU and its reductions), or uses another exp or tanh within 8 float32 ulps, and where that
// moves a rounding to the accumulation dtype, lands there too.
struct V3LiteralRun {
  V3KernelResult result;
  V3Enclosure enclosure;
  // Output elements whose literal value lies outside the enclosure: an rpa defect, 0 always
  // (the tests and properties assert it).
  int64_t outside = 0;
};
// options.enclosure is set here; the MXU's error per product (oracle/dot_precision.h, six
// passes) goes into the terms for the dots whose operands are both float32.
V3LiteralRun v3_literal_run(Dialect d, const V3Inputs& in, const V3Params& p,
                            const V3ProgramOptions& options,
                            const V3EnclosureTerms& terms = {});

// The schedule tolerance, a bound: per output element the distance from the literal's value
// to the farther end of its enclosure; infinite where the enclosure knows nothing (values
// that are not finite), so that only the non-finite values' own match decides there.
std::vector<double> v3_schedule_tolerance(const V3LiteralRun& literal);

// out / kv_cache_out against the literal schedule's result under v3_schedule_tolerance, on
// every row [0, T); the cache bit for bit. The power is stated in units of the largest |V
// v_scale| the program weighs (V3Enclosure::max_abs_v).
V3Comparison v3_compare_literal(Dialect d, const V3Inputs& in, const V3LiteralRun& literal,
                                const Tensor& out, const Tensor& kv_cache_out);

// One line, e.g. "cache: page 3, slot 1, kv head 0, V, lane 5: got 0.5, want 0.25 (2 elements
// differ); out: row 4, head 1, column 0: got 1.5, want 1.25, allowed difference 0.01".
std::string describe_v3_comparison(const V3Comparison& c);

}  // namespace rpa
