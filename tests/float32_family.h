// An adversarial instrument for the kernel semantics' float32 budget (issue 20): a family of
// float32 implementations of DESIGN.md section 2's definition that differ ONLY in how they
// sum the softmax's numerator sum_t w_t v_t and denominator sum_t w_t (order, blocking,
// compensation, flash-decoding chunks, and the tiled kernel's two schedules), and input
// builders whose values make those sums drift as far as float32 lets them (equal terms,
// values straddling binades, ramps, alternating signs, one dominant key, geometric weights).
// A tolerance for the kernel semantics must accept every member on every such case.
//
// Every member computes as the kernel semantics says: K_eff / V_eff as the reference does
// (with a scale, the float32 product cast to q's dtype), logits as a float32 sequential dot
// of float32 products, then * sm_scale in float32, soft cap in float32 (std::tanh(float)),
// the mask value (as float32) ADDED, exp in float32 (std::exp(float)), p never rounded, and
// the output rounded once, from float32 to q's dtype. Every float operation is written out
// one at a time (no reassociation; the targets compile with -ffp-contract=off, never
// -ffast-math), so each member's order of summation is exactly the one its name says.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/tensor.h"

namespace rpa::testing {

// One way of computing the output: o [T, Hq, D] in q's dtype, rows of no sequence 0.
// Precondition: strict validation accepts (in, params); a sequence with q_len > 0 has
// kv_len > 0.
struct Float32Member {
  std::string name;
  std::function<Tensor(const Inputs&, const Params&)> run;
};

// Every member, in this order:
// - sequential: two passes (m = max_t s_t, then w_t = exp(s_t - m)), numerator and
//   denominator summed token by token, first to last; o = num / den;
// - reversed: the same, last token to first;
// - pairwise: the same weights, sums as a recursive halving tree (leaves single tokens);
// - kahan: the same weights, Kahan-compensated sums (each product w_t v_tc rounded first);
// - online_b1, online_b7, online_bS (S = the page size), online_b16S, online_b1024: an online
//   softmax over blocks of that many tokens, m, l and acc carried across blocks
//   (m_new = max(m, block max), alpha = exp(m - m_new), l = alpha l + sum_block w,
//   acc = alpha acc + sum_block w v, sequential sums within a block); o = acc / l;
// - flash2, flash3, flash4: the KV range cut into 2, 3, 4 chunks of whole blocks of S tokens
//   (as equal as whole blocks allow; empty chunks dropped), each an online softmax over its
//   blocks of S tokens, the chunk states merged as a pairwise tree with the rescale
//   (m = max(ma, mb), l = e^(ma - m) la + e^(mb - m) lb, acc likewise);
// - tiled_literal: tiled_attention with KernelOptions::literal_schedule;
// - tiled_default: tiled_attention with the default options.
const std::vector<Float32Member>& float32_family();

// The adversarial value patterns. Unless said otherwise the keys of a row are all equal, so
// every weight is exactly equal (w_t = 1 in every member): only the summation of V differs.
// Per column c a base value b_c cycles through 1/3, 0.1, 1.0000001, 0.7.
enum class DriftShape : uint8_t {
  kEqual,              // v_tc = b_c: n equal terms, the running sum's rounding never cancels
  kStraddleAlternate,  // v_tc alternates 0.99 / 1.02 (+ c-dependent 1e-4 steps): binade 1 straddled
  kStraddleRamp,       // v_tc ramps from 0.75 to 1.25 across the tokens: crosses 1
  kRamp,               // v_tc = (((t + 131 c) mod n) + 1) / (n + 1)
  kAlternatingSigns,   // v_tc = (-1)^t a_(t/2) (1 + 0.001 ((7t + c) mod 11)), a = 1, 0.1, 3, ...:
                       // a near-0 answer
  kDominant,           // one key (t = n / 3) 12 logit units above the rest; its v is 1, others b_c
  kGeometric,          // logits fall linearly by 16 over the range: geometric weights;
                       // v_tc = b_c (0.99 or 1.02 alternating)
};
inline constexpr DriftShape kAllDriftShapes[] = {
    DriftShape::kEqual,      DriftShape::kStraddleAlternate, DriftShape::kStraddleRamp,
    DriftShape::kRamp,       DriftShape::kAlternatingSigns,  DriftShape::kDominant,
    DriftShape::kGeometric};
std::string_view drift_shape_name(DriftShape s);
// GoogleTest prints a DriftShape parameter by name.
void PrintTo(DriftShape s, std::ostream* os);

struct DriftSpec {
  DriftShape shape = DriftShape::kEqual;
  int64_t kv_len = 1024;
  int64_t head_dim = 1;
  int64_t q_len = 1;  // decode rows; q_len > 1 masks the last tokens of the earlier rows
  int64_t page_size = 16;
  int64_t num_q_heads = 1;  // query head h has its own q (a different draw)
  int64_t num_kv_heads = 1;
  // q's and kv_pages' dtypes: strict validation takes (float32, float32) and
  // (bfloat16, bfloat16). kv_bf16_values rounds every K and V value to bfloat16 (kept in
  // kv_dtype): bfloat16 K / V under a float32 q.
  DType q_dtype = DType::kFloat32;
  DType kv_dtype = DType::kFloat32;
  bool kv_bf16_values = false;
  std::optional<double> soft_cap = std::nullopt;  // e.g. 20.0
  uint64_t seed = 1;
};

struct DriftCase {
  Inputs inputs;
  Params params;  // sm_scale = 1 / sqrt(head_dim), soft_cap from the spec, nothing else set
};

// One sequence of spec.kv_len tokens on consecutive pages and spec.q_len rows.
DriftCase drift_case(const DriftSpec& spec);

// "equal kv_len 1024 D 128 cap 20 q float32 kv float32[bf16 values]".
std::string describe(const DriftSpec& spec);

}  // namespace rpa::testing
