// What any legal run of a tpu-inference v3 program may compute (issue 47): the literal v3
// schedule (schedule/v3_program.h) carries, beside each value it computes, an enclosure
// [lo, hi] of the values every run of the same program computes there, whatever the order
// of its float32 additions and whichever exp and tanh within kExpError (8 float32 ulps)
// it uses. oracle/v3_compare.h turns the output's enclosure into the schedule tolerance,
// a bound; the derivation is docs/oracle.md's "The literal v3 schedule's bound".
//
// Per query row (and kv head), per compute block, as kernel.py and kernel_hd64.py compute:
// - logits: the exact q.K (double; products of two floats are exact) widened by any float32
//   order's error gamma_k sum_d |q_d k_d| (gamma_k = k u / (1 - k u), u = 2^-24, k the nonzero
//   products, each rounded too), a TPU's six-pass MXU error per product where both operands
//   are float32,
//   and flushed subnormal products and partial sums (2^-126 each); then each float32 multiply
//   by a scale and the soft cap's division, tanh and multiply, each a rounding (monotone:
//   the enclosure's ends round to its new ends), tanh within kExpError;
// - m: the block's row max, rounded to the accumulation dtype A. Where A is narrower than
//   float32 its enclosure is one or two A values (more is rare: then an interval), and the
//   row keeps one state per value m can hold, whose l and acc are tracked apart: a shared m
//   scales l and acc alike, and only its rounding points differ between the states;
// - p = exp(s - m) in float32 (kExpError), alpha = exp(m_prev - m) (kernel.py: both rounded
//   to A), l = alpha l + rowsum(round_A(p)) (kernel.py: in A; the row sum as XLA's windows
//   of 32 in A, or in float32 in any order rounded once, the hull of both), acc = alpha acc +
//   round_A(p.V v_scale) with p.V any float32 order (gamma_n over the block's keys of nonzero
//   weight, the MXU's error, flushed products); every rounding to A or float32 of an
//   enclosure is its ends rounded, by both routes where the program may round twice (float32
//   then A) or once, and a multiply-add may also be fused (rounded once);
// - out = acc / l (kernel.py: rounded to A; hd64: float32 q: acc / l, bfloat16 q: acc *
//   (1 / bf16(l)) rounded to q's dtype), the hull over the row's states.
// Every subnormal result may be flushed to 0 (an end in (0, 2^-126) widens to [0, 2^-126]).
// Exact elsewhere, as XLA specifies: the masks, q / q_scale and its clip, the casts of q
// and V, float32 and A elementwise operations other than exp and tanh (correctly rounded).
// Not covered: a TPU's approximate reciprocal (hd64), float32 dots in fewer than six bfloat16
// passes, a jnp.sum in A that rounds its partial sums in another order than XLA's windows.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/dtype.h"

namespace rpa {

// A closed interval of reals; lo > hi never happens; NaN ends: nothing is known.
struct Range {
  double lo = 0.0;
  double hi = 0.0;
};

// Multipliers on the sources of difference (1 in use; the tests that show each is needed
// shrink one: a correct second run is then rejected), and the MXU's relative error per
// product of float32 operands (oracle/dot_precision.h; 0: float32 products).
struct V3EnclosureTerms {
  double logit = 1.0;    // q.K's float32 order (and its MXU error)
  double exp = 1.0;      // exp's and tanh's kExpError
  double value = 1.0;    // p.V's float32 order (and its MXU error)
  double row_sum = 1.0;  // the float32 row sum's order (hd64; kernel.py's float32-once route)
  double mxu_qk = 0.0;
  double mxu_pv = 0.0;
};

// The output's enclosure, filled by v3_literal_attention (V3ProgramOptions::enclosure):
// lo[e] <= out[e] <= hi[e] for every run, in out's layout [T, Hq, D]; NaN where the program's
// values are not finite (nothing is bounded there).
struct V3Enclosure {
  V3EnclosureTerms terms;
  std::vector<double> lo, hi;
  double max_abs_v = 0.0;  // max |V v_scale| over the keys the program weighs (nonzero p)
};

// One compute block of one row, as the program holds it (float32 values).
struct V3EnclosureBlock {
  const float* q_lo = nullptr;  // q after quantization, per lane (an enclosure: q may be a
  const float* q_hi = nullptr;  // stored output an earlier pass left in the aliased array)
  int64_t qk_lanes = 0;
  const float* k = nullptr;  // k[t * k_stride + lane]
  int64_t k_stride = 0;
  const float* v = nullptr;  // v[t * v_stride + lane], lanes [0, acc_lanes)
  int64_t v_stride = 0;
  int64_t n = 0;                 // slots
  const float* scales = nullptr;  // the float32 multiplies of the dot, in order
  int nscales = 0;
  std::optional<float> cap;
  const unsigned char* keep = nullptr;  // per slot; 0: the program gives mask_value
  float mask_value = 0.0f;
  std::optional<float> v_scale;
};

// The row's state: l, m and acc as enclosures, one state per value m may hold.
class V3RowEnclosure {
 public:
  // a: the accumulation dtype (kernel.py's out_dtype; hd64 float32); lanes: acc's width.
  // hd64 leaves the row max and alpha unrounded and adds in float32.
  void start(DType a, bool hd64, int64_t lanes, float m0, float l0);
  // Nothing known (scratch the program never initialized).
  void forget();
  void step(const V3EnclosureBlock& b, const V3EnclosureTerms& t, double* max_abs_v);
  // kernel.py's out = acc / l rounded to A; hd64's as above (q_dtype: q's).
  Range out(int64_t lane, DType q_dtype) const;

 private:
  struct State {
    Range m, l;
    std::vector<Range> acc;
  };
  std::vector<State> states_;
  DType a_ = DType::kFloat32;
  bool hd64_ = false;
  bool known_ = false;
  int64_t lanes_ = 0;
};

}  // namespace rpa
