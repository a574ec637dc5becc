// The v3 dense reference (reference/v3_reference.h) and its comparison (oracle/v3_compare.h):
// the fused cache update in both packed layouts, each feature on a hand-computed case, GQA,
// padding never read, and the comparison's verdicts. Expected numbers are hand derivations
// (the formula beside each; evaluated with Python's math module), never the code under test.
#include "reference/v3_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/dialect.h"
#include "core/dtype.h"
#include "oracle/v3_compare.h"

namespace rpa {
namespace {

// The packed cache's element index of (page, slot, kv head, K/V, d), written from the
// contract's table (v3-contract.md section 3e), independently of core/v3_cache_layout.h:
// kernel.py [pages, ps, align(2 Hkv, P) / P, P, align(D, 128)], combined head c = 2h (+1 for
// V) at row c / P, lane c % P; hd64 [pages, ps, align(Hkv, P) / P, P, 128], head h at row
// h / P, lane h % P, [K | V] along the last dimension.
struct Layout {
  Dialect d;
  int64_t hkv, dim, ps, packing;
  int64_t rows() const {
    const int64_t heads = d == Dialect::kTpuInferenceV3Hd64 ? hkv : 2 * hkv;
    return (heads + packing - 1) / packing;
  }
  int64_t last() const { return d == Dialect::kTpuInferenceV3Hd64 ? 128 : (dim + 127) / 128 * 128; }
  int64_t record() const { return rows() * packing * last(); }
  int64_t at(int64_t page, int64_t slot, int64_t h, bool v, int64_t c) const {
    const int64_t base = (page * ps + slot) * record();
    if (d == Dialect::kTpuInferenceV3Hd64) return base + h * 128 + (v ? 64 : 0) + c;
    return base + (2 * h + (v ? 1 : 0)) * last() + c;
  }
};

int64_t packing_of(DType kv) { return kv == DType::kFloat32 ? 1 : kv == DType::kBFloat16 ? 2 : 4; }

// A small valid call: sequences (q_len, kv_len) on consecutive pages from page 1, the cache
// NaN everywhere but the tokens before each sequence's new ones, unused page_indices entries
// out of range, queries/keys/values from `fill`.
struct Small {
  Dialect d = Dialect::kTpuInferenceV3;
  DType q = DType::kFloat32, kv = DType::kFloat32;
  int64_t hq = 1, hkv = 1, dim = 1, ps = 2;
  std::vector<std::pair<int64_t, int64_t>> seqs{{2, 2}};
  double garbage = std::numeric_limits<double>::quiet_NaN();

  Layout layout() const { return {d, hkv, dim, ps, packing_of(kv)}; }
  int64_t pps() const {
    int64_t most = 1;
    for (auto [ql, kl] : seqs) most = std::max(most, (kl + ps - 1) / ps);
    return most + 1;
  }
  int64_t page(int64_t i, int64_t t) const { return 1 + i * pps() + t / ps; }
  V3Inputs build() const {
    const auto n = static_cast<int64_t>(seqs.size());
    const int64_t num = n + 1, pages = 1 + n * pps() + 1;
    int64_t tokens = 1;
    for (auto [ql, kl] : seqs) tokens += ql;
    V3Inputs in;
    in.queries = Tensor(q, {tokens, hq, dim});
    in.keys = Tensor(kv, {tokens, hkv, dim});
    in.values = Tensor(kv, {tokens, hkv, dim});
    const Layout l = layout();
    in.kv_cache = Tensor(kv, {pages, ps, l.rows(), l.packing, l.last()});
    for (int64_t e = 0; e < in.kv_cache.numel(); ++e) in.kv_cache.set_float(e, garbage);
    std::vector<int32_t> lens(static_cast<size_t>(num), 0), cu(static_cast<size_t>(num + 1), 0);
    std::vector<int32_t> pi(static_cast<size_t>(num * pps()), 1 << 30);
    for (int64_t i = 0; i < n; ++i) {
      auto [ql, kl] = seqs[static_cast<size_t>(i)];
      lens[static_cast<size_t>(i)] = static_cast<int32_t>(kl);
      cu[static_cast<size_t>(i + 1)] = cu[static_cast<size_t>(i)] + static_cast<int32_t>(ql);
      for (int64_t j = 0; j < (kl + ps - 1) / ps; ++j) {
        pi[static_cast<size_t>(i * pps() + j)] = static_cast<int32_t>(page(i, j * ps));
      }
    }
    cu[static_cast<size_t>(num)] = cu[static_cast<size_t>(n)];
    in.kv_lens = Tensor::from_int32({num}, lens);
    in.cu_q_lens = Tensor::from_int32({num + 1}, cu);
    in.page_indices = Tensor::from_int32({num * pps()}, pi);
    const std::vector<int32_t> dist{0, 0, static_cast<int32_t>(n)};
    in.distribution = Tensor::from_int32({3}, dist);
    return in;
  }
  // Old token t of sequence i (t < kv_len - q_len): K and V of kv head h, column c.
  void set_old(V3Inputs& in, int64_t i, int64_t t, int64_t h, int64_t c, double k, double v) const {
    const Layout l = layout();
    const int64_t pg = page(i, t);
    for (int64_t cc = 0; cc < l.last(); ++cc) {
      // The rest of the record as merge_kv writes it: zeros.
      if (d != Dialect::kTpuInferenceV3Hd64 || cc < 64) {
        if (cc >= dim) {
          in.kv_cache.set_float(l.at(pg, t % ps, h, false, cc), 0.0);
          in.kv_cache.set_float(l.at(pg, t % ps, h, true, cc), 0.0);
        }
      }
    }
    in.kv_cache.set_float(l.at(pg, t % ps, h, false, c), k);
    in.kv_cache.set_float(l.at(pg, t % ps, h, true, c), v);
  }
};

double out_at(const V3ReferenceResult& r, int64_t row, int64_t head, int64_t c) {
  return r.out.float_at((row * r.out.dim(1) + head) * r.out.dim(2) + c);
}

// The common hand case: 1 sequence, q_len = kv_len = 2, head_dim 1, q = (1, 1), K = (1, 3),
// V = (1, 5), both tokens new. Row 1 sees logits 1 and 3: 1 + 4 sigmoid(2).
Small two_tokens(DType q = DType::kFloat32, DType kv = DType::kFloat32) {
  Small s;
  s.q = q;
  s.kv = kv;
  return s;
}
V3Inputs two_token_inputs(const Small& s, double q0 = 1, double q1 = 1) {
  V3Inputs in = s.build();
  in.queries.set_float(0, q0);
  in.queries.set_float(1, q1);
  in.keys.set_float(0, 1);
  in.keys.set_float(1, 3);
  in.values.set_float(0, 1);
  in.values.set_float(1, 5);
  return in;
}

TEST(V3Reference, CausalVersusNot) {
  const Small s = two_tokens();
  const V3Inputs in = two_token_inputs(s);
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    V3Params p;
    const V3ReferenceResult causal = v3_reference(s.d, in, p, sem);
    EXPECT_EQ(out_at(causal, 0, 0, 0), 1.0);  // row 0 (position 0) sees token 0 only
    EXPECT_NEAR(out_at(causal, 1, 0, 0), 4.523188311911529, 1e-6);  // 1 + 4 sigmoid(2)
    p.use_causal_mask = false;
    const V3ReferenceResult open = v3_reference(s.d, in, p, sem);
    EXPECT_NEAR(out_at(open, 0, 0, 0), 4.523188311911529, 1e-6);
    EXPECT_NEAR(out_at(open, 1, 0, 0), 4.523188311911529, 1e-6);
  }
}

TEST(V3Reference, SlidingWindowBoundary) {
  const Small s = two_tokens();
  const V3Inputs in = two_token_inputs(s);
  V3Params p;
  p.sliding_window = 1;  // position 1 sees t iff 1 - 1 < t: token 1 only
  EXPECT_EQ(out_at(v3_reference(s.d, in, p), 1, 0, 0), 5.0);
  p.sliding_window = 2;  // 1 - 2 < 0: both
  EXPECT_NEAR(out_at(v3_reference(s.d, in, p), 1, 0, 0), 4.523188311911529, 1e-6);
  // Without the causal mask the reference drops the window, the kernel keeps its lower edge.
  p.sliding_window = 1;
  p.use_causal_mask = false;
  EXPECT_NEAR(out_at(v3_reference(s.d, in, p, Semantics::kReference), 1, 0, 0), 4.523188311911529,
              1e-6);
  EXPECT_EQ(out_at(v3_reference(s.d, in, p, Semantics::kKernel), 1, 0, 0), 5.0);
}

TEST(V3Reference, SoftCap) {
  const Small s = two_tokens();
  const V3Inputs in = two_token_inputs(s);
  V3Params p;
  p.soft_cap = 2.0;  // logits 2 tanh(1/2), 2 tanh(3/2): 1 + 4 sigmoid(1.8102965 - 0.9242343)
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    EXPECT_NEAR(out_at(v3_reference(s.d, in, p, sem), 1, 0, 0), 3.8323075177935095, 1e-6);
  }
}

TEST(V3Reference, MaskValueReplacesTheLogit) {
  const Small s = two_tokens();
  const V3Inputs in = two_token_inputs(s);
  V3Params p;
  p.mask_value = 10.0;  // row 0's masked token 1 gets logit 10 (added it would be 13)
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    // 1 + 4 sigmoid(10 - 1); the additive 1 + 4 sigmoid(12) = 4.99997542 is 500 ulps away.
    EXPECT_NEAR(out_at(v3_reference(s.d, in, p, sem), 0, 0, 0), 4.999506421696054, 2e-6);
  }
}

TEST(V3Reference, QScaleClipsToTheKvRange) {
  // float8_e4m3fn KV (max 448): q = 1000 / q_scale 1 clips to 448; sm_scale 1/448 makes the
  // logits 1 and 2 (unclipped 2.23 and 4.46).
  const Small s = two_tokens(DType::kFloat32, DType::kFloat8E4M3FN);
  V3Inputs in = two_token_inputs(s, 1000, 1000);
  in.keys.set_float(1, 2);
  V3Params p;
  p.q_scale = 1.0;
  p.sm_scale = 1.0 / 448;
  // Kernel: 1 + 4 sigmoid(1) (unclipped 1 + 4 sigmoid(2.232) = 4.612).
  EXPECT_NEAR(out_at(v3_reference(s.d, in, p, Semantics::kKernel), 1, 0, 0), 3.9242343145200196,
              1e-6);
  // Reference: p = (0.2689, 0.7311) cast to e4m3 is (0.28125, 0.75); p.V = 4.03125 cast to
  // e4m3 (step 0.5 in [4, 8)) is 4.
  EXPECT_EQ(out_at(v3_reference(s.d, in, p, Semantics::kReference), 1, 0, 0), 4.0);
  // Just inside the range nothing clips: q = 448.
  in.queries.set_float(1, 448);
  EXPECT_NEAR(out_at(v3_reference(s.d, in, p, Semantics::kKernel), 1, 0, 0), 3.9242343145200196,
              1e-6);
}

TEST(V3Reference, KAndVScales) {
  const Small s = two_tokens();
  const V3Inputs in = two_token_inputs(s);
  V3Params p;
  p.k_scale = 2.0;  // logits 2, 6
  p.v_scale = 3.0;  // (1 + 4 sigmoid(4)) * 3
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    EXPECT_NEAR(out_at(v3_reference(s.d, in, p, sem), 1, 0, 0), 14.784165480454902, 1e-5);
  }
}

// The logit scale is the float32 the kernel multiplies the scores by: sm_scale * k_scale
// below float32's least normal (here a double subnormal, 3e-322; then 1e-40, a float32
// subnormal TPUs flush) is a scale of 0. Row 1 then weighs keys 1 and 3 equally: (1 + 5) / 2;
// a -inf query meets 0: NaN in both rows, as in the kernel (fuzz_raw_inputs found the
// definition scaling by 3e-322 and answering 0.5 where the kernel gave NaN).
TEST(V3Reference, LogitScaleIsTheKernelsFloat32) {
  const Small s = two_tokens();
  for (double k_scale : {3e-322, 1e-40}) {
    V3Params p;
    p.k_scale = k_scale;
    p.soft_cap = 50.0;
    EXPECT_EQ(out_at(v3_reference(s.d, two_token_inputs(s), p, Semantics::kKernel), 1, 0, 0), 3.0);
    const V3Inputs inf = two_token_inputs(s, -INFINITY, -INFINITY);
    const V3ReferenceResult r = v3_reference(s.d, inf, p, Semantics::kKernel);
    EXPECT_TRUE(std::isnan(out_at(r, 0, 0, 0)) && std::isnan(out_at(r, 1, 0, 0))) << k_scale;
  }
  // The least normal float32 scale stays: q = 2^126 gives row 1 logits 1 and 3 again.
  V3Params p;
  p.k_scale = std::ldexp(1.0, -126);
  const double q = std::ldexp(1.0, 126);
  EXPECT_NEAR(out_at(v3_reference(s.d, two_token_inputs(s, q, q), p, Semantics::kKernel), 1, 0, 0),
              4.5231883119115293, 1e-6);  // 1 + 4 sigmoid(2)
}

// q, K and V are read as a TPU computes with them (load_flushed): a float32 subnormal is 0.
// fuzz_raw_inputs found an hd64 row whose q held a subnormal where its key held -inf: the
// kernel's 0 * -inf = NaN, the definition's -inf (and 0 beside a sink). Here row 1's q of
// 1e-40 meets key 0's -inf: NaN in both semantics, where 1e-40 * -inf would leave key 1 the
// whole weight (5), as the least normal float32 does. A subnormal V is 0 in the output.
TEST(V3Reference, SubnormalInputsAreZero) {
  const Small s = two_tokens();
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    V3Inputs in = two_token_inputs(s, 1, 1e-40);
    in.keys.set_float(0, -INFINITY);
    EXPECT_TRUE(std::isnan(out_at(v3_reference(s.d, in, {}, sem), 1, 0, 0)));
    in.queries.set_float(1, 0x1p-126);
    EXPECT_EQ(out_at(v3_reference(s.d, in, {}, sem), 1, 0, 0), 5.0);
    in.values.set_float(1, 1e-40);
    EXPECT_EQ(out_at(v3_reference(s.d, in, {}, sem), 1, 0, 0), 0.0);
  }
}

// hd64: head_dim 64, only column 0 nonzero, as two_tokens.
V3Inputs hd64_inputs(Small& s, double sink) {
  s.d = Dialect::kTpuInferenceV3Hd64;
  s.dim = 64;
  V3Inputs in = s.build();
  in.queries.set_float(0, 1);
  in.queries.set_float(64, 1);
  in.keys.set_float(0, 1);
  in.keys.set_float(64, 3);
  in.values.set_float(0, 1);
  in.values.set_float(64, 5);
  const std::vector<float> sinks{static_cast<float>(sink)};
  in.attention_sink = Tensor::from_floats(DType::kFloat32, {1}, sinks);
  return in;
}

TEST(V3Reference, AttentionSink) {
  Small s;
  const V3Inputs in = hd64_inputs(s, 2.0);
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    const V3ReferenceResult r = v3_reference(s.d, in, V3Params{}, sem);
    EXPECT_NEAR(out_at(r, 0, 0, 0), 0.2689414213699951, 1e-6);  // e / (e + e^2)
    EXPECT_NEAR(out_at(r, 1, 0, 0), 3.41623535204449, 1e-6);    // (e + 5e^3) / (e + e^3 + e^2)
  }
}

TEST(V3Reference, SinkMinusInfinityIsNoSink) {
  Small s;
  V3Inputs in = hd64_inputs(s, -INFINITY);
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    const V3ReferenceResult with = v3_reference(s.d, in, V3Params{}, sem);
    V3Inputs none = in;
    none.attention_sink.reset();
    const V3ReferenceResult without = v3_reference(s.d, none, V3Params{}, sem);
    EXPECT_EQ(with.out, without.out);
    EXPECT_NEAR(out_at(with, 1, 0, 0), 4.523188311911529, 1e-6);
  }
}

TEST(V3Reference, GqaHeadMapping) {
  // Hq 4, Hkv 2: q heads 0, 1 read kv head 0 (V = 1), heads 2, 3 kv head 1 (V = 7).
  Small s;
  s.hq = 4;
  s.hkv = 2;
  s.seqs = {{1, 1}};
  V3Inputs in = s.build();
  in.values.set_float(0, 1);
  in.values.set_float(1, 7);
  const V3ReferenceResult r = v3_reference(s.d, in, V3Params{});
  EXPECT_EQ(out_at(r, 0, 0, 0), 1.0);
  EXPECT_EQ(out_at(r, 0, 1, 0), 1.0);
  EXPECT_EQ(out_at(r, 0, 2, 0), 7.0);
  EXPECT_EQ(out_at(r, 0, 3, 0), 7.0);
}

TEST(V3Reference, RowsPastTheSequencesAreZero) {
  const Small s = two_tokens();
  V3Inputs in = two_token_inputs(s);
  in.queries.set_float(2, 9);  // the spare row
  const V3ReferenceResult r = v3_reference(s.d, in, V3Params{});
  EXPECT_EQ(out_at(r, 2, 0, 0), 0.0);
}

// The fused update writes each new token's whole record (K, V, zero padding) and nothing
// else; update_kv_cache=false writes nothing and ignores keys and values.
void check_update(Dialect d, DType kv, int64_t hkv, int64_t dim) {
  SCOPED_TRACE(std::string(dialect_name(d)) + " " + std::string(dtype_name(kv)) + " Hkv " +
               std::to_string(hkv));
  Small s;
  s.d = d;
  s.kv = kv;
  s.q = DType::kBFloat16;
  s.hq = hkv;
  s.hkv = hkv;
  s.dim = dim;
  s.ps = 4;
  s.seqs = {{3, 6}, {1, 4}};  // new positions 3..5 of sequence 0, 3 of sequence 1
  s.garbage = 0.5;
  V3Inputs in = s.build();
  for (int64_t e = 0; e < in.keys.numel(); ++e) {
    in.keys.set_float(e, 1.0 + static_cast<double>(e % 7));
    in.values.set_float(e, -2.0 - static_cast<double>(e % 5));
  }
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t t = 0;
         t < s.seqs[static_cast<size_t>(i)].second - s.seqs[static_cast<size_t>(i)].first; ++t) {
      for (int64_t h = 0; h < hkv; ++h) s.set_old(in, i, t, h, 0, 0.25, 0.25);
    }
  }
  const Layout l = s.layout();
  std::vector<double> want(static_cast<size_t>(in.kv_cache.numel()));
  for (int64_t e = 0; e < in.kv_cache.numel(); ++e)
    want[static_cast<size_t>(e)] = in.kv_cache.float_at(e);
  std::vector<bool> touched(want.size(), false);
  const int64_t row0[2] = {0, 3};
  const int64_t first[2] = {3, 3};
  const int64_t count[2] = {3, 1};
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t r = 0; r < count[i]; ++r) {
      const int64_t pos = first[i] + r, pg = s.page(i, pos);
      const int64_t base = (pg * s.ps + pos % s.ps) * l.record();
      for (int64_t e = base; e < base + l.record(); ++e) {
        want[static_cast<size_t>(e)] = 0.0;
        touched[static_cast<size_t>(e)] = true;
      }
      for (int64_t h = 0; h < hkv; ++h) {
        for (int64_t c = 0; c < dim; ++c) {
          const int64_t src = ((row0[i] + r) * hkv + h) * dim + c;
          want[static_cast<size_t>(l.at(pg, pos % s.ps, h, false, c))] = in.keys.float_at(src);
          want[static_cast<size_t>(l.at(pg, pos % s.ps, h, true, c))] = in.values.float_at(src);
        }
      }
    }
  }
  const V3ReferenceResult r = v3_reference(d, in, V3Params{});
  ASSERT_EQ(r.kv_cache.shape(), in.kv_cache.shape());
  int64_t differences = 0;
  for (int64_t e = 0; e < in.kv_cache.numel(); ++e) {
    if (r.kv_cache.float_at(e) != want[static_cast<size_t>(e)]) ++differences;
    if (!touched[static_cast<size_t>(e)]) {
      // Bit for bit elsewhere.
      const auto size = static_cast<size_t>(dtype_size(kv));
      ASSERT_EQ(std::memcmp(r.kv_cache.data() + static_cast<size_t>(e) * size,
                            in.kv_cache.data() + static_cast<size_t>(e) * size, size),
                0)
          << e;
    }
  }
  EXPECT_EQ(differences, 0);
  if (d == Dialect::kTpuInferenceV3) {
    V3Params off;
    off.update_kv_cache = false;
    // Fill the new positions too so the call reads a defined cache, then poison keys/values.
    V3Inputs shared = in;
    shared.kv_cache = r.kv_cache;
    const V3ReferenceResult before = v3_reference(d, shared, off);
    for (int64_t e = 0; e < shared.keys.numel(); ++e) {
      shared.keys.set_float(e, std::numeric_limits<double>::quiet_NaN());
      shared.values.set_float(e, 100.0);
    }
    const V3ReferenceResult after = v3_reference(d, shared, off);
    EXPECT_EQ(after.kv_cache, shared.kv_cache);
    EXPECT_EQ(after.out, before.out);
  }
}

TEST(V3Reference, FusedUpdateWritesExactlyTheNewTokens) {
  for (Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    for (DType kv : {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
      for (int64_t hkv : {1, 2, 3, 5}) {
        check_update(d, kv, hkv, d == Dialect::kTpuInferenceV3Hd64 ? 64 : 3);
      }
    }
  }
}

TEST(V3Reference, NaNPaddingIsNeverRead) {
  // Sequence (2, 5) over pages of 2 slots: slot 1 of its third page and every page past it
  // are NaN, its unused page_indices entry 1 << 30; a second run with zeros there agrees.
  for (Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    for (DType kv : {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN}) {
      Small s;
      s.d = d;
      s.kv = kv;
      s.dim = d == Dialect::kTpuInferenceV3Hd64 ? 64 : 2;
      s.seqs = {{2, 5}};
      V3Inputs in = s.build();
      for (int64_t e = 0; e < in.queries.numel(); ++e) in.queries.set_float(e, 0.5);
      for (int64_t e = 0; e < in.keys.numel(); ++e) {
        in.keys.set_float(e, 0.25 * static_cast<double>(e % 3));
        in.values.set_float(e, 1.0 + static_cast<double>(e % 4));
      }
      for (int64_t t = 0; t < 3; ++t) {
        for (int64_t c = 0; c < s.dim; ++c)
          s.set_old(in, 0, t, 0, c, 0.5, 2.0 + static_cast<double>(t));
      }
      for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
        const V3ReferenceResult r = v3_reference(d, in, V3Params{}, sem);
        for (int64_t e = 0; e < 2 * s.dim; ++e) EXPECT_TRUE(std::isfinite(r.out.float_at(e)));
        Small zero = s;
        zero.garbage = 0.0;
        V3Inputs clean = zero.build();
        clean.queries = in.queries;
        clean.keys = in.keys;
        clean.values = in.values;
        for (int64_t t = 0; t < 3; ++t) {
          for (int64_t c = 0; c < s.dim; ++c)
            zero.set_old(clean, 0, t, 0, c, 0.5, 2.0 + static_cast<double>(t));
        }
        std::vector<int32_t> pi(static_cast<size_t>(clean.page_indices.numel()));
        for (size_t k = 0; k < pi.size(); ++k)
          pi[k] = static_cast<int32_t>(in.page_indices.int_at(static_cast<int64_t>(k)));
        for (size_t k = 3; k < static_cast<size_t>(s.pps()); ++k) pi[k] = 0;
        clean.page_indices = Tensor::from_int32(clean.page_indices.shape(), pi);
        EXPECT_EQ(v3_reference(d, clean, V3Params{}, sem).out, r.out);
      }
    }
  }
}

// v3_compare's verdicts on a bfloat16 case of two sequences.
struct CompareCase {
  Small s;
  V3Inputs in;
  V3Params p;
  CompareCase() {
    s.q = DType::kBFloat16;
    s.kv = DType::kBFloat16;
    s.hq = 2;
    s.hkv = 1;
    s.dim = 3;
    s.ps = 2;
    s.seqs = {{2, 3}, {1, 4}};
    s.garbage = 0.0;
    in = s.build();
    for (int64_t e = 0; e < in.queries.numel(); ++e)
      in.queries.set_float(e, 0.1 * static_cast<double>(e % 5));
    for (int64_t e = 0; e < in.keys.numel(); ++e) {
      in.keys.set_float(e, 0.3 * static_cast<double>(e % 4) - 0.4);
      in.values.set_float(e, 1.0 + static_cast<double>(e % 3));
    }
    s.set_old(in, 0, 0, 0, 1, 0.5, -1.0);
    for (int64_t t = 0; t < 3; ++t) s.set_old(in, 1, t, 0, 2, -0.5, 3.0);
  }
};

TEST(V3Compare, EqualPasses) {
  CompareCase c;
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    const V3ReferenceResult r = v3_reference(c.s.d, c.in, c.p, sem);
    const V3Comparison cmp = v3_compare(c.s.d, c.in, c.p, r, r.out, r.kv_cache);
    EXPECT_TRUE(cmp.agree()) << describe_v3_comparison(cmp);
    EXPECT_EQ(cmp.compared, 3 * 2 * 3);
    EXPECT_EQ(cmp.max_abs_err, 0.0);
  }
}

TEST(V3Compare, OneFlippedCacheBitFailsNamingTheSlot) {
  CompareCase c;
  const V3ReferenceResult r = v3_reference(c.s.d, c.in, c.p);
  Tensor cache = r.kv_cache;
  // Sequence 1, position 3 (the new token): page s.page(1, 3), slot 1, V, lane 2.
  const Layout l = c.s.layout();
  const int64_t e = l.at(c.s.page(1, 3), 1, 0, true, 2);
  cache.data()[static_cast<size_t>(e) * 2] ^= std::byte{1};  // lowest mantissa bit
  const V3Comparison cmp = v3_compare(c.s.d, c.in, c.p, r, r.out, cache);
  EXPECT_FALSE(cmp.agree());
  ASSERT_TRUE(cmp.cache_first);
  EXPECT_EQ(cmp.cache_differences, 1);
  EXPECT_EQ(cmp.cache_first->page, c.s.page(1, 3));
  EXPECT_EQ(cmp.cache_first->slot, 1);
  EXPECT_EQ(cmp.cache_first->kv_head, 0);
  EXPECT_TRUE(cmp.cache_first->value);
  EXPECT_EQ(cmp.cache_first->lane, 2);
  EXPECT_EQ(cmp.mismatches, 0);
}

TEST(V3Compare, OutOffByTwoTolerancesFails) {
  CompareCase c;
  for (Semantics sem : {Semantics::kKernel, Semantics::kReference}) {
    const V3ReferenceResult r = v3_reference(c.s.d, c.in, c.p, sem);
    const std::vector<double> tol = v3_tolerance(c.s.d, c.in, c.p, r);
    Tensor out = r.out;
    const int64_t e = (2 * 2 + 1) * 3 + 1;        // row 2 (sequence 1), head 1, column 1
    ASSERT_GT(tol[static_cast<size_t>(e)], 0.0);  // at least min_subnormal(q)
    // Two tolerances, or the next bfloat16 past them where the tolerance is below an ulp
    // (reference semantics: 0 where float32 differences cannot reach the element).
    const double want = r.out.float_at(e), allowed = tol[static_cast<size_t>(e)];
    double delta = 2.0 * allowed;
    out.set_float(e, want + delta);
    while (out.float_at(e) - want <= allowed) out.set_float(e, want + (delta *= 2.0));
    const V3Comparison cmp = v3_compare(c.s.d, c.in, c.p, r, out, r.kv_cache);
    EXPECT_FALSE(cmp.agree());
    ASSERT_TRUE(cmp.first);
    EXPECT_EQ(cmp.first->row, 2);
    EXPECT_EQ(cmp.first->head, 1);
    EXPECT_EQ(cmp.first->col, 1);
    EXPECT_GT(cmp.max_share, 1.0);
    // Half a tolerance passes.
    out.set_float(e, r.out.float_at(e) + 0.4 * tol[static_cast<size_t>(e)]);
    if (out.float_at(e) - r.out.float_at(e) <= tol[static_cast<size_t>(e)]) {
      EXPECT_EQ(v3_compare(c.s.d, c.in, c.p, r, out, r.kv_cache).mismatches, 0);
    }
  }
}

TEST(V3Compare, RowsPastTheSequencesAreNotCompared) {
  CompareCase c;
  const V3ReferenceResult r = v3_reference(c.s.d, c.in, c.p);
  Tensor out = r.out;
  out.set_float(out.numel() - 1, 1e9);  // the spare last row
  EXPECT_TRUE(v3_compare(c.s.d, c.in, c.p, r, out, r.kv_cache).agree());
}

}  // namespace
}  // namespace rpa
