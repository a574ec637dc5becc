#include "oracle/jax_tolerance.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "schedule/jax_program.h"

namespace rpa {

// F. The float32 accumulation term: a bound that holds for every implementation whose
//    softmax numerator N_c = sum_t w_t v_tc and denominator L = sum_t w_t (w_t = exp(s_t -
//    m), o_c = N_c / L) are float32 sums of float32 products in any order and any blocking:
//    token by token, pairwise, reversed, compensated, per KV block then across blocks with
//    the online softmax's rescale, flash-decoding chunks merged in any order, a TPU's MXU
//    accumulating in float32. Per row, with p_t the exact weights, n the number of p_t > 0,
//    u = 2^-24 (round to nearest), and, per column c, X_c = sum_t p_t |v_tc|, Y_c = sum_t
//    p_t |v_tc - o_c|, V_c = max_t |v_tc| (ReferenceResult's abs_weighted, deviation,
//    column_max):
//
//    (a) Sums. Any way of summing leaves x_t is a binary tree whose inner nodes each round
//        once, by at most u |node value| <= u sum_{leaves below} |x_t| (to first order), so
//        the error is at most u sum_t |x_t| depth_t. Over all trees with n leaves the sum is
//        largest for a chain with the largest |x_t| deepest: depths n-1, n-1, n-2, ..., 1,
//        so sum_t p_t depth_t <= C := sum_k p_(k) a_k (row_chain; C = (n+1)/2 - 1/n for
//        equal weights, ~n for one dominant weight). A numerator leaf is the rounded product
//        w_t v_tc (one more rounding); the MXU with P passes sums P partial products per
//        term (P - 1 more, magnitudes within (1 + 2^-7) |w_t v_tc|: dot_precision.cc).
//    (b) Rescales. An online softmax multiplies its partial sums by alpha = exp(m_old -
//        m_new) when its running max grows, and flash-decoding multiplies each chunk's sums
//        when it merges them: one more rounding for every term already summed, each time.
//        Every kernel in scope (JAX's Pallas kernel, tpu-inference's, this project's) does
//        so only between blocks of whole pages, so a term meets at most R = ceil(kv_len /
//        page_size) - 1 of them (row_blocks - 1). In units of the final max these scaled
//        partial sums are still at most sum_{leaves below} |x_t| (alpha <= 1).
//    So |dN_c| / L <= u [V_c C + X_c (R + 1 + P')] (P' = P - 1 where the MXU splits float32
//    V, else 0; the first term (1 + 2^-7) times larger then) and |dL| / L <= u (C + R), and
//    with the final division, |o'_c - o_c| <= (|dN_c| + |o_c| |dL|) / (L - |dL|) + u |o'_c|
//    <= Phi u [kappa (V_c C + X_c (R + 1 + P')) + X_c (C + R + 1)] using |o_c| <= X_c, where
//    Phi = 1 / (1 - 2 D u) with D = n + R + P' + 1 the deepest chain absorbs the
//    higher-order terms ((1 + u)^D - 1 <= D u / (1 - D u)).
//    (c) Weights. The computed w_t differ from the exact ones by relative errors eta_t that
//        the numerator and the denominator share, and o'_c - o_c = sum_t p_t eta_t (v_tc -
//        o_c) / (1 + sum_t p_t eta_t) exactly, so |o'_c - o_c| <= sum_t p_t |eta_t| |v_tc -
//        o_c| / (1 - max |eta|). Sources: exp itself (kExpError, once per token and once per
//        rescale factor alpha, which scales all earlier tokens alike: at most (R + 1)
//        kExpError); the rounding of s_t - m (u |s_t - m| <= u (B_t + B_max) with B_t >= |s_t|
//        the reference's logit scale: u times the spread of item K3); the roundings of the
//        alpha arguments m_old - m_new, whose magnitudes add up to at most m_last - m_first
//        <= 2 B_max (u 2 B_max on every earlier token). So the weights add
//        Phi_w [(R + 1) kExpError Y_c + u spread_c + 2 u B_max Y_c], Phi_w = 1 / (1 - 2 eta),
//        eta = (R + 1) kExpError + 4 u B_max. The reference semantics keeps no spread: there
//        B_t + B_max <= 2 B' (B' = max_logit_abs_sum + |soft_cap|, every B_t's bound).
//    Not covered: an exp less accurate than kExpError, flushed subnormals (item 4 / K5),
//    errors in the logits themselves (item 5 / K3). A row that cannot be bounded (Phi or
//    Phi_w infinite: D u >= 1/2) gets 2M, what any two averages of its values can differ by.
std::vector<double> float32_terms(const Inputs& in, const Params& p, const ReferenceResult& r,
                                  DotPasses passes) {
  const auto numel = static_cast<size_t>(in.q.numel());
  const int64_t d = in.q.dim(2);
  if (r.abs_weighted.size() != numel || r.deviation.size() != numel ||
      r.column_max.size() != numel || r.row_chain.size() != numel / static_cast<size_t>(d) ||
      r.row_terms.size() != r.row_chain.size() || r.row_blocks.size() != r.row_chain.size()) {
    throw std::logic_error("float32_terms: the reference result's sums do not match q");
  }
  const bool kernel = r.semantics == Semantics::kKernel;
  if (kernel && r.spread.size() != numel) {
    throw std::logic_error("float32_terms: the kernel semantics' spread does not match q");
  }
  const DType v_dtype = p.v_scale ? in.q.dtype() : in.kv_pages.dtype();
  const bool split = kernel && v_dtype == DType::kFloat32 && passes != DotPasses::kOne;
  const double extra = split ? dot_pass_count(passes) - 1 : 0.0;
  const double kappa = split ? 1.0 + std::ldexp(1.0, -7) : 1.0;
  const double u = std::ldexp(1.0, -24);
  const double cap = p.soft_cap ? std::fabs(*p.soft_cap) : 0.0;
  const double b_all = r.max_logit_abs_sum + cap;
  const double limit = 2.0 * r.max_abs_v_eff;
  std::vector<double> terms(numel, 0.0);
  for (size_t row = 0; row < r.row_chain.size(); ++row) {
    const double n = r.row_terms[row];
    if (n == 0.0) continue;
    const double chain = r.row_chain[row];
    const double rescales = std::max(r.row_blocks[row] - 1.0, 0.0);
    const double depth = n + rescales + extra + 1.0;
    const double b_max = kernel ? r.row_logit_max[row] : b_all;
    const double eta = (rescales + 1.0) * kExpError + 4.0 * u * b_max;
    const double phi = 1.0 - 2.0 * depth * u > 0.0 ? 1.0 / (1.0 - 2.0 * depth * u) : INFINITY;
    const double phi_w = 1.0 - 2.0 * eta > 0.0 ? 1.0 / (1.0 - 2.0 * eta) : INFINITY;
    for (size_t e = row * static_cast<size_t>(d); e < (row + 1) * static_cast<size_t>(d); ++e) {
      const double x = r.abs_weighted[e], y = r.deviation[e];
      const double sums =
          phi * u * (kappa * (r.column_max[e] * chain + x * (rescales + 1.0 + extra)) +
                     x * (chain + rescales + 1.0));
      const double subtraction = kernel ? u * r.spread[e] : 2.0 * u * b_all * y;
      const double weights =
          phi_w * ((rescales + 1.0) * kExpError * y + subtraction + 2.0 * u * b_max * y);
      const double bound = sums + weights;
      terms[e] = std::isfinite(bound) ? std::min(bound, limit) : limit;
    }
  }
  return terms;
}

// 5. Large logits: a float32 dot product of length D is off by up to about 2^-24 *
//    sum_d |q_d k_d| (times |sm_scale|), measured 1.3e-4 at a bound of 2432 against JAX's
//    own float32 reference. Softmax turns logit errors of at most e into output errors of
//    at most 2 e M (dp_t = p_t (ds_t - sum_u p_u ds_u)), so atol grows by
//    2 * 2^-24 * bound * M. For |s| ~ 50 that is 6e-6 M; logits in the hundreds (JAX's
//    cross-check found one near-tied row at |s| ~ 400 off by 2.7e-5 M) need it.
Tolerance tolerance_for_case(const Inputs& in, const Params& p, const ReferenceResult& r,
                             DotPasses passes) {
  if (r.semantics == Semantics::kKernel) return kernel_tolerance(in, p, r, passes);
  const DType v_dtype = p.v_scale ? in.q.dtype() : in.kv_pages.dtype();
  Tolerance tol = tolerance_for(in.q.dtype(), v_dtype, r.max_abs_v_eff, r.max_kv_len);
  tol.atol += 2.0 * std::ldexp(1.0, -24) * r.max_logit_abs_sum * r.max_abs_v_eff;
  tol.element_atol = std::make_shared<const std::vector<double>>(float32_terms(in, p, r, passes));
  return tol;
}

// The kernel semantics: o = sum_t p_t V_eff_t with p = softmax(s) unrounded and one
// rounding to q's dtype (what JAX's Pallas kernel computes: float32 p, float32 accumulation
// over V_eff's exact values). The dense reference computes it in double. A correct kernel
// computes the same in float32 on a CPU or a TPU; what it may do differently:
//
// K1. Float32 arithmetic after the logits: exp, the sums of the numerator and the
//     denominator in any order and blocking, the online softmax's rescaling, the division:
//     item F above, per element (float32_terms).
// K2. A TPU's MXU may evaluate a matmul with float32 operands in bfloat16 passes (`passes`:
//     six, the float32 contract precision, by default; dot_precision.cc has the bound per
//     product for six, three and one). p is float32 in every kernel, so p.V may lose
//     e_pv = mxu(float32, V_eff is float32) of each |p_t v_tc|: e_pv X_c (X_c = sum_t p_t
//     |v_tc|, at most M). In q.K it adds e = mxu(q is float32, K_eff is float32) of each
//     |q_d k_d| to the logit (next).
// K3. Logit errors. Logit t of a row may be off by E_t = e_qk B_t, B_t = |sm_scale|
//     sum_d |q_d k_td| + |soft_cap| (the reference's scale; tanh passes an error through
//     with slope <= 1 and adds a few ulps of |soft_cap|), e_qk = 2^-21 (kLeastLogitError:
//     float32 accumulation of the dot and the scaling, a budget of 8 ulps of the absolute
//     sum; measured, not a worst case: the worst case grows with head_dim, the typical error
//     with its square root, and the properties at head_dim up to 256, the long property
//     budget and the Pallas cross-check stay within it) + the MXU's e from K2 (so e_qk <=
//     most_logit_error(passes), which the reference must have been computed with). Under a
//     soft cap the logit moves by at most 2 |soft_cap| whatever the dot's error, and by
//     tanh's slope sech^2 where the logit before the cap is far from 0: the reference
//     shrinks B_t's first term accordingly (jax_reference.h), valid for any e_qk in that
//     range. Then p'_t = p_t e^{d_t} / sum_u p_u e^{d_u} with |d_u| <= E_u <= E_max, so
//     |p'_t / p_t - 1| <= e^{E_t + E_max} - 1 <= (E_t + E_max) g(E_max), g(x) = (e^{2x} - 1)
//     / (2x) >= 1 (convexity; g -> 1 for small x). Since sum_t (p'_t - p_t) = 0,
//     |o'_c - o_c| = |sum_t (p'_t - p_t)(v_tc - o_c)| <= e_qk g(e_qk B_max) sum_t p_t
//     (B_t + B_max) |v_tc - o_c| = e_qk g(e_qk B_max) spread[e] (ReferenceResult), and
//     never more than 2M (both are averages of the same values). Per element: a row whose
//     weight sits on one token, or whose values agree, gets ~0 however large its logits;
//     a flat row of large logits gets ~e_qk 2 B_max max|v - o|. It replaces the reference
//     semantics' 2 * 2^-24 * max B * M, which takes the worst row for every row.
// K4. One rounding to q's dtype, of a float32 value (the kernel) or of the double one (the
//     reference): one ulp of q's dtype, rtol 2^(1-prec_q) for a q narrower than float32, or
//     its smallest subnormal where the result is subnormal.
// K5. Flushed float32 subnormals (TPUs, the tiled kernel): (kv_len + 1) * 2^-126.
// Not covered, by design: rounding p or p.V to a narrower dtype (the reference semantics'
// item 2 / 3, whose kv_len * 2^-9 float8 term made `rpa check` accept any output at long
// context). So atol = (kv_len + 1) 2^-126 + [q narrow] min_subnormal_q, rtol = [q narrow]
// 2^(1-prec_q), element_atol[e] = min(F_e + e_pv X_c + e_qk g(e_qk B_max) spread[e], 2M).
double kernel_logit_error(const Inputs& in, const Params& p, DotPasses passes) {
  const DType q_dtype = in.q.dtype();
  const DType k_dtype = p.k_scale ? q_dtype : in.kv_pages.dtype();
  return kLeastLogitError +
         mxu_product_error(passes, q_dtype == DType::kFloat32, k_dtype == DType::kFloat32);
}

Tolerance kernel_tolerance(const Inputs& in, const Params& p, const ReferenceResult& r,
                           DotPasses passes) {
  if (r.semantics != Semantics::kKernel) {
    throw std::logic_error("kernel_tolerance: the reference result is not in the kernel semantics");
  }
  if (static_cast<int64_t>(r.spread.size()) != in.q.numel() ||
      static_cast<int64_t>(r.row_logit_max.size()) != in.q.dim(0) * in.q.dim(1)) {
    throw std::logic_error("kernel_tolerance: the reference result's spread does not match q");
  }
  const double e_qk = kernel_logit_error(in, p, passes);
  if (e_qk > r.most_logit_error) {
    throw std::logic_error(
        "kernel_tolerance: the reference result was computed for smaller logit errors than "
        "these dot passes make (dense_reference's most_logit_error)");
  }
  const DType q_dtype = in.q.dtype();
  const DType v_dtype = p.v_scale ? q_dtype : in.kv_pages.dtype();
  const double m = r.max_abs_v_eff;
  const double e_pv = mxu_product_error(passes, true, v_dtype == DType::kFloat32);
  Tolerance tol;
  tol.value_scale = m;
  tol.atol = static_cast<double>(r.max_kv_len + 1) * std::ldexp(1.0, -126);
  if (q_dtype != DType::kFloat32) {
    tol.rtol = std::ldexp(1.0, 1 - precision_bits(q_dtype));
    tol.atol += min_subnormal(q_dtype);
  }
  auto extra = std::make_shared<std::vector<double>>(float32_terms(in, p, r, passes));
  const std::vector<double> logit = kernel_logit_terms(in, p, r, passes);
  for (size_t e = 0; e < extra->size(); ++e) {
    const double bound = (*extra)[e] + e_pv * r.abs_weighted[e] + logit[e];
    // Past 2M, the values' own range bounds it.
    (*extra)[e] = std::isfinite(bound) ? std::min(bound, 2.0 * m) : 2.0 * m;
  }
  tol.element_atol = std::move(extra);
  return tol;
}

std::vector<double> kernel_logit_terms(const Inputs& in, const Params& p, const ReferenceResult& r,
                                       DotPasses passes) {
  const double e_qk = kernel_logit_error(in, p, passes);
  const auto d = static_cast<size_t>(in.q.dim(2));
  std::vector<double> terms(r.spread.size(), 0.0);
  for (size_t e = 0; e < r.spread.size(); ++e) {
    const double w = r.spread[e];
    if (w == 0.0) continue;
    const double x = e_qk * r.row_logit_max[e / d];
    const double g = x == 0.0 ? 1.0 : std::expm1(2.0 * x) / (2.0 * x);
    terms[e] = e_qk * g * w;  // NaN cannot happen (w > 0); infinite where g overflows
  }
  return terms;
}

namespace {

// The scale of what the literal schedule's steps read: M = max |V_eff| and B = max over
// the logits a step stores of |sm_scale| * sum_d |q_d K_eff_d|, over the slots each step's
// buffer holds below its sequence's kv_len (the zero-filled rest never counts), whichever
// block the prefetch chain put there.
class StepScale : public PallasProgramVisitor {
 public:
  StepScale(const Inputs& in, const Params& p, const KernelPlan& plan)
      : in_(in), p_(p), view_(kv_view(in)), plan_(plan) {}
  double max_v = 0.0, max_logit = 0.0;

  void dma(int buf, const KvBlockId& id) override { held_[buf] = id; }
  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t store_lo,
            int64_t store_hi, int /*pending*/) override {
    if (store_lo >= store_hi) return;
    const KvBlockId& id = held_[buf];
    const int64_t S = view_.page_size(), d = view_.head_dim(), hc = view_.num_kv_heads() * 2;
    const int64_t bkv = plan_.blocks.kv_pages_per_block, P = in_.kv_pages.dim(0);
    const int64_t valid = std::min(bkv * S, view_.kv_len(seq) - kv_blk * bkv * S);
    const int64_t hkv_blk = plan_.heads.combined_kv_heads / 2;
    const int64_t group = view_.q_heads_per_kv();
    const DType qt = in_.q.dtype(), kt = in_.kv_pages.dtype();
    std::vector<double> k(static_cast<size_t>(d));
    for (int64_t j = 0; j < valid; ++j) {
      const int64_t column = dma_page_column(in_, bkv, id, j / S);
      int64_t page = in_.page_indices.int_at(id.seq * view_.pages_per_seq() + column);
      if (page < 0) page += P;
      for (int64_t h = 0; h < hkv_blk; ++h) {
        const int64_t kv_head = id.heads_blk * hkv_blk + h;
        const int64_t at = ((page * S + j % S) * hc + 2 * kv_head) * d;
        for (int64_t c = 0; c < d; ++c) {
          const float v = kv_eff(qt, kt, p_.v_scale, false,
                                 load_as_float32(kt, in_.kv_pages.data(), at + d + c));
          if (std::isfinite(v)) max_v = std::max(max_v, std::fabs(static_cast<double>(v)));
          k[static_cast<size_t>(c)] = std::fabs(static_cast<double>(
              kv_eff(qt, kt, p_.k_scale, true, load_as_float32(kt, in_.kv_pages.data(), at + c))));
        }
        const int64_t q_head0 = hb * plan_.heads.q_heads + h * group;
        for (int64_t r = qb * plan_.blocks.queries_per_block + store_lo;
             r < qb * plan_.blocks.queries_per_block + store_hi; ++r) {
          for (int64_t g = 0; g < group; ++g) {
            const int64_t qat = view_.q_offset(r, q_head0 + g);
            double sum = 0.0;
            for (int64_t c = 0; c < d; ++c) {
              sum += std::fabs(static_cast<double>(load_float(qt, in_.q.data(), qat + c))) *
                     k[static_cast<size_t>(c)];
            }
            if (std::isfinite(sum)) max_logit = std::max(max_logit, sum);
          }
        }
      }
    }
  }
  void cell_end(int64_t, int64_t) override {}

 private:
  const Inputs& in_;
  const Params& p_;
  const PagedKvView view_;
  const KernelPlan& plan_;
  KvBlockId held_[2];
};

}  // namespace

// The literal schedule against the Pallas kernel (DESIGN.md sections 5 and 14). Both run
// the same program: the same KV blocks in the same order in each buffer half, the same
// masks, casts and float32 update formulas (m, l, alpha, beta, the accumulator). What can
// still differ:
// a. the order of float32 summation inside q.K (head_dim terms), s.V and the row sum l
//    (bkv * S terms each): XLA's CPU dot groups the terms differently from Eigen;
// b. exp and tanh: XLA's and Eigen's / libm's implementations are a few float32 ulps apart;
// c. for a q narrower than float32, the final cast, where a float32 value a few ulps away
//    rounds to the neighbouring ulp of q's dtype: one ulp, at most 2^(1-prec) of the value.
// (b) and the s.V / l part of (a) are relative errors of a few float32 ulps in each weight,
// and so in each output: 2^-19 (32 ulps) of M = max |V_eff| and of the value. The q.K part
// of (a) is a few ulps of L = B + |soft_cap| (B the largest |sm_scale| sum_d |q_d K_d| a
// step computes; tanh's own error is ulps of the cap), which softmax turns into twice that
// times M (tolerance_for_case, item 5). It is the reference tolerance's item 5 at 4x the
// size, 2^-21 L M, since here both sides round the sum in float32, in different orders:
// measured up to 5.6 * 2^-24 L M against the Pallas kernel (a case with logits in the
// thousands). M and B are taken over exactly what the literal schedule's steps read
// (StepScale), so garbage in unread slots does not loosen them. The fixed part, 2^-19 M, is
// measured, not derived like the reference's float32 term (item F): it assumes the two
// orders inside one KV block stay within 32 float32 ulps, which held on every case the jax
// label tried (0.7 of it at most); the logit part is 4x the reference semantics'.
Tolerance schedule_tolerance(const Inputs& in, const Params& p, const KernelPlan& plan) {
  StepScale scale(in, p, plan);
  walk_pallas_program(in,
                      PallasGrid{.num_heads_blks = plan.num_heads_blks,
                                 .num_q_blks = plan.num_q_blks,
                                 .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                                 .queries_per_block = plan.blocks.queries_per_block},
                      scale, std::numeric_limits<int64_t>::max());
  const double logits =
      std::fabs(p.sm_scale) * scale.max_logit + (p.soft_cap ? std::fabs(*p.soft_cap) : 0.0);
  Tolerance tol;
  tol.value_scale = scale.max_v;
  tol.atol = (std::ldexp(1.0, -19) + std::ldexp(1.0, -21) * logits) * scale.max_v;
  tol.rtol = std::ldexp(1.0, -19);
  if (in.q.dtype() != DType::kFloat32) {
    tol.rtol += std::ldexp(1.0, 1 - precision_bits(in.q.dtype()));
  }
  return tol;
}

}  // namespace rpa
