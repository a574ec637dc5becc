// The tpu-inference v3 rule tables (validation/v3_rule.h) and validation (validation/v3_validate.h):
// every rule at its boundary, both sides, both dialects where it applies. Native messages
// are literals observed from tpu-inference 0.32.0 (jax 0.11.2) by running its own
// dynamic_validate_inputs on JAX arrays (/tmp/h_validate_check.py); messages of crash rules
// and strict rules are rpa's own.
#include "validation/v3_validate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/v3_cache_layout.h"

namespace rpa {
namespace {

constexpr Dialect kV3 = Dialect::kTpuInferenceV3;
constexpr Dialect kHd64 = Dialect::kTpuInferenceV3Hd64;
constexpr Mode kNative = Mode::kJax;
constexpr Mode kStrict = Mode::kStrict;

Tensor ints(Shape shape, const std::vector<int64_t>& v, DType t = DType::kInt32) {
  Tensor x(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) x.set_int(static_cast<int64_t>(i), v[i]);
  return x;
}

// The base case of /tmp/h_validate_check.py: T 8, Hq 4, Hkv 2, D 128 (hd64: 64), 6 pages
// of 4 tokens, 2 sequence slots of 3 pages; seq 0 decode (q 1, kv 5, pages 0 1), seq 1
// mixed (q 3, kv 3, page 3). Valid in every mode.
struct Case {
  Dialect d = kV3;
  V3Inputs in;
  V3Params p;
};

struct Spec {
  Dialect d = kV3;
  DType q = DType::kBFloat16;
  DType kv = DType::kBFloat16;
  int64_t T = 8, Hq = 4, Hkv = 2, D = -1, pages = 6, ps = 4, N = 2, pps = 3;
  std::vector<int64_t> kv_lens{5, 3}, cu{0, 1, 4}, dist{1, 1, 2};
};

Case make(const Spec& s) {
  Case c;
  c.d = s.d;
  const int64_t D = s.D >= 0 ? s.D : (s.d == kHd64 ? 64 : 128);
  c.in.queries = Tensor(s.q, {s.T, s.Hq, D});
  c.in.keys = Tensor(s.kv, {s.T, s.Hkv, D});
  c.in.values = Tensor(s.kv, {s.T, s.Hkv, D});
  c.in.kv_cache = Tensor(s.kv, V3CacheLayout(s.d, s.kv, s.Hkv, D).cache_shape(s.pages, s.ps));
  c.in.kv_lens = ints({s.N}, s.kv_lens);
  std::vector<int64_t> pages;
  for (int64_t i = 0; i < s.N * s.pps; ++i) pages.push_back(s.pages > 0 ? i % s.pages : 0);
  c.in.page_indices = ints({s.N * s.pps}, pages);
  c.in.cu_q_lens = ints({s.N + 1}, s.cu);
  c.in.distribution = ints({3}, s.dist);
  return c;
}
Case base(Dialect d) { return make(Spec{.d = d}); }

std::optional<V3Failure> check(const Case& c, Mode m) { return v3_validate(c.d, c.in, c.p, m); }

// The first failure's rule name and message, or "OK".
std::string verdict(const Case& c, Mode m) {
  const auto f = check(c, m);
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "OK";
}
std::string rule_of(const Case& c, Mode m) {
  const auto f = check(c, m);
  return f ? std::string(v3_rule_info(f->rule).name) : "OK";
}

const Dialect kBoth[] = {kV3, kHd64};

TEST(V3RuleTable, IdsMatchPositionsAndNamesAreUnique) {
  const auto t = v3_rule_table();
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(t[i].id), i);
    EXPECT_EQ(&v3_rule_info(t[i].id), &t[i]);
    EXPECT_FALSE(t[i].reason.empty()) << t[i].name;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(t[i].name, t[j].name);
  }
}

TEST(V3RuleTable, OrderFollowsTheSources) {
  // Source order of kernel.py's and kernel_hd64.py's checks, then dynamic, then the kernel.
  const std::vector<std::string_view> want = {"keyword_not_in_dialect",
                                              "causal_skip_kv_mask",
                                              "qkv_rank",
                                              "kv_shape_mismatch",
                                              "num_tokens_mismatch",
                                              "head_dim_mismatch",
                                              "sink_rank",
                                              "sink_shape",
                                              "sink_dtype",
                                              "head_dim_not_64",
                                              "kv_heads_zero",
                                              "heads_not_divisible",
                                              "kv_dtype_unsupported",
                                              "dtype_pair",
                                              "kv_cache_rank",
                                              "kv_cache_shape",
                                              "kv_cache_last_dim",
                                              "kv_dtype_mismatch",
                                              "kv_dtype_not_float",
                                              "kv_packing_mismatch",
                                              "kv_cache_heads",
                                              "index_dtype",
                                              "index_rank",
                                              "max_num_seqs_zero",
                                              "page_indices_not_divisible",
                                              "cu_q_lens_shape",
                                              "distribution_shape",
                                              "page_size_packing",
                                              "sliding_window_nonpositive",
                                              "soft_cap_zero",
                                              "chunk_prefill_nonpositive",
                                              "block_bq_sizes",
                                              "block_bkv_sizes",
                                              "page_size_zero",
                                              "block_bkv_page",
                                              "block_bkv_csz_page",
                                              "kv_pages_per_block_nonpositive",
                                              "queries_per_block_nonpositive",
                                              "vmem_limit_nonpositive",
                                              "q_heads_zero",
                                              "head_dim_zero",
                                              "block_size_nonpositive",
                                              "sliding_window_too_large",
                                              "soft_cap_nonfinite",
                                              "sm_scale_nonfinite",
                                              "q_scale_invalid",
                                              "k_scale_nonfinite",
                                              "v_scale_nonfinite",
                                              "mask_value_nonfinite",
                                              "mask_value_too_large",
                                              "sink_nonfinite",
                                              "distribution_order",
                                              "num_seqs_too_large",
                                              "distribution_negative",
                                              "prefill_without_chunk_size",
                                              "cu_q_lens_first_nonzero",
                                              "cu_q_lens_decreasing",
                                              "total_q_tokens_too_large",
                                              "q_len_range",
                                              "decode_q_len_not_one",
                                              "prefill_q_len_not_chunk",
                                              "page_count_too_large",
                                              "page_index_out_of_range",
                                              "kv_len_overflows_int32",
                                              "skip_kv_mask_block_unknown",
                                              "skip_kv_mask_kv_len",
                                              "masked_block_overflows",
                                              "window_skips_cache_write",
                                              "window_int16_wraps",
                                              "window_int32_wraps",
                                              "update_page_shared",
                                              "q_dtype_unsupported",
                                              "out_dtype_not_default",
                                              "sink_group_unpacked"};
  const auto t = v3_rule_table();
  ASSERT_EQ(t.size(), want.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].name, want[i]) << i;
}

TEST(V3RuleTable, ModeMembership) {
  const V3RuleInfo& skip = v3_rule_info(V3RuleId::causal_skip_kv_mask);
  EXPECT_TRUE(skip.in(kV3, kNative));
  EXPECT_FALSE(skip.in(kHd64, kNative));
  EXPECT_TRUE(skip.in(kHd64, kStrict));
  EXPECT_FALSE(skip.in(Dialect::kJax, kNative));
  const V3RuleInfo& sink = v3_rule_info(V3RuleId::sink_shape);
  EXPECT_FALSE(sink.in(kV3, kNative));
  EXPECT_TRUE(sink.in(kHd64, kNative));
  for (const V3RuleInfo& r : v3_rule_table()) {
    // Every rule is enforced somewhere; a strict-only rule never claims a native crash.
    EXPECT_TRUE(r.in_native_v3 || r.in_native_hd64 || r.in_strict) << r.name;
    if (r.crash) {
      EXPECT_TRUE(r.in_native_v3 || r.in_native_hd64) << r.name;
    }
  }
}

TEST(V3Validate, BaseCaseIsValidInEveryMode) {
  for (Dialect d : kBoth) {
    EXPECT_EQ(verdict(base(d), kNative), "OK");
    EXPECT_EQ(verdict(base(d), kStrict), "OK");
    EXPECT_TRUE(v3_validate_all(d, base(d).in, base(d).p, kStrict).empty());
  }
}

TEST(V3Validate, JaxDialectHasNoV3Rules) {
  Case c = base(kV3);
  c.d = Dialect::kJax;
  EXPECT_EQ(rule_of(c, kNative), "keyword_not_in_dialect");
}

TEST(V3Validate, KeywordOfTheOtherDialect) {
  Case c = base(kV3);
  c.p.num_kv_pages_per_block = 1;
  // observed from tpu-inference 0.32.0 (ragged_paged_attention itself)
  EXPECT_EQ(verdict(c, kNative),
            "keyword_not_in_dialect: TypeError: ragged_paged_attention() got an unexpected "
            "keyword argument 'num_kv_pages_per_block'");
  EXPECT_EQ(rule_of(c, kStrict), "keyword_not_in_dialect");
  c = base(kV3);
  c.in.attention_sink = Tensor(DType::kFloat32, {4});
  // observed from tpu-inference 0.32.0
  EXPECT_EQ(verdict(c, kNative),
            "keyword_not_in_dialect: TypeError: ragged_paged_attention() takes 8 positional "
            "arguments but 9 were given");
  c = base(kHd64);
  c.p.out_dtype = DType::kFloat32;
  EXPECT_EQ(rule_of(c, kNative), "keyword_not_in_dialect");
  c = base(kHd64);
  c.p.use_causal_mask = false;
  EXPECT_EQ(rule_of(c, kStrict), "keyword_not_in_dialect");
  c = base(kHd64);
  c.p.num_kv_pages_per_block = 1;
  c.p.num_queries_per_block = 1;
  c.in.attention_sink = Tensor(DType::kFloat32, {4});
  EXPECT_EQ(rule_of(c, kNative), "OK");  // observed: hd64 takes both and a sink
  EXPECT_EQ(rule_of(c, kStrict), "OK");
}

TEST(V3Validate, CausalSkipKvMask) {
  Case c = base(kV3);
  c.p.skip_kv_mask = true;
  // observed from tpu-inference 0.32.0
  EXPECT_EQ(verdict(c, kNative),
            "causal_skip_kv_mask: Can not skip kv mask when using causal mask.");
  EXPECT_EQ(rule_of(c, kStrict), "causal_skip_kv_mask");
  c.p.use_causal_mask = false;
  EXPECT_EQ(rule_of(c, kNative), "OK");
}

TEST(V3Validate, QkvShapes) {
  // observed from tpu-inference 0.32.0 (v3 / hd64: head_dim 128 / 64)
  for (Dialect d : kBoth) {
    const std::string D = d == kV3 ? "128" : "64";
    const int64_t Dn = d == kV3 ? 128 : 64;
    Case c = base(d);
    c.in.queries = Tensor(DType::kBFloat16, {8, 4});
    EXPECT_EQ(verdict(c, kNative),
              "qkv_rank: Expected 3D array for q.shape=(8, 4), k.shape=(8, 2, " + D +
                  "), v.shape=(8, 2, " + D + ")");
    EXPECT_EQ(rule_of(c, kStrict), "qkv_rank");
    c = base(d);
    c.in.values = Tensor(DType::kBFloat16, {8, 3, Dn});
    EXPECT_EQ(verdict(c, kNative), "kv_shape_mismatch: Expected k.shape=(8, 2, " + D +
                                       ") to be equal to v.shape=(8, 3, " + D + ")");
    c = base(d);
    c.in.queries = Tensor(DType::kBFloat16, {9, 4, Dn});
    EXPECT_EQ(verdict(c, kNative),
              "num_tokens_mismatch: Expected q.shape[0]=9 to be equal to k.shape[0]=8 and "
              "v.shape[0]=8");
    c = base(d);
    c.in.queries = Tensor(DType::kBFloat16, {8, 4, Dn + 1});
    EXPECT_EQ(verdict(c, kNative),
              "head_dim_mismatch: Expected q.shape[2]=" + std::to_string(Dn + 1) +
                  " to be equal to k.shape[2]=" + D + " and v.shape[2]=" + D);
    c = base(d);
    c.in.queries = Tensor(DType::kBFloat16, {8, 5, Dn});
    EXPECT_EQ(verdict(c, kNative),
              "heads_not_divisible: Expected actual_num_q_heads=5 to be divisible by "
              "actual_num_kv_heads=2.");
    c.in.queries = Tensor(DType::kBFloat16, {8, 6, Dn});
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    Case z = make(Spec{.d = d, .Hkv = 0});
    // observed: integer modulo by zero
    EXPECT_EQ(verdict(z, kNative), "kv_heads_zero: ZeroDivisionError: integer modulo by zero");
    EXPECT_EQ(rule_of(z, kStrict), "kv_heads_zero");
    EXPECT_EQ(rule_of(make(Spec{.d = d, .Hq = 1, .Hkv = 1}), kStrict), "OK");
    // Hq 0: native accepts (observed), strict rejects.
    Case q0 = make(Spec{.d = d, .Hq = 0});
    EXPECT_EQ(rule_of(q0, kNative), "OK");
    EXPECT_EQ(rule_of(q0, kStrict), "q_heads_zero");
  }
}

TEST(V3Validate, HeadDim) {
  Case c = make(Spec{.d = kHd64, .D = 128});
  // observed from tpu-inference 0.32.0
  EXPECT_EQ(verdict(c, kNative), "head_dim_not_64: Expected actual_head_dim=128 to be 64.");
  EXPECT_EQ(rule_of(c, kStrict), "head_dim_not_64");
  // kernel.py: D 64 and D 1 fine in both modes; D 0 passes its validators (observed) but its
  // kernel raises at trace (finding 27, a native crash rule), and strict needs D >= 1.
  EXPECT_EQ(rule_of(make(Spec{.D = 64}), kStrict), "OK");
  EXPECT_EQ(rule_of(make(Spec{.D = 1}), kStrict), "OK");
  EXPECT_EQ(rule_of(make(Spec{.D = 1}), kNative), "OK");
  Case d0 = make(Spec{.D = 0});
  EXPECT_EQ(verdict(d0, kNative),
            "head_dim_zero: ZeroDivisionError at trace: head_dim=0 (strided_load: integer modulo "
            "by zero)");
  EXPECT_EQ(rule_of(d0, kStrict), "head_dim_zero");
}

TEST(V3Validate, Sink) {
  Case c = base(kHd64);
  c.in.attention_sink = Tensor(DType::kFloat32, {3});
  // observed from tpu-inference 0.32.0
  EXPECT_EQ(verdict(c, kNative),
            "sink_shape: Expected attention_sink.shape[0]=3 to be equal to q.shape[1]=4 "
            "(num_q_heads).");
  c.in.attention_sink = Tensor(DType::kBFloat16, {4});
  EXPECT_EQ(verdict(c, kNative),
            "sink_dtype: Expected attention_sink.dtype=dtype(bfloat16) to be equal to "
            "jnp.float32=<class 'jax.numpy.float32'>.");
  c.in.attention_sink = Tensor(DType::kFloat64, {4});  // jnp.asarray: float32 (observed OK)
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(rule_of(c, kStrict), "sink_dtype");
  c.in.attention_sink = Tensor(DType::kFloat32, {4, 2});  // observed OK
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(rule_of(c, kStrict), "sink_rank");
  c.in.attention_sink = Tensor(DType::kFloat32, {});
  // observed: IndexError: tuple index out of range
  EXPECT_EQ(verdict(c, kNative), "sink_rank: IndexError: tuple index out of range");
  // NaN and +inf: native accepts (observed), strict rejects; -inf means no sink.
  c.in.attention_sink = Tensor(DType::kFloat32, {4});
  c.in.attention_sink->set_float(0, -std::numeric_limits<double>::infinity());
  c.in.attention_sink->set_float(1, 3.0e38);
  EXPECT_EQ(rule_of(c, kStrict), "OK");
  c.in.attention_sink->set_float(2, std::numeric_limits<double>::infinity());
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(verdict(c, kStrict), "sink_nonfinite: attention_sink[2]=inf must not be NaN or +inf.");
  c.in.attention_sink->set_float(2, std::nan(""));
  EXPECT_EQ(rule_of(c, kStrict), "sink_nonfinite");
}

// kernel_hd64 reshapes the sinks to (-1, Hq/Hkv aligned to q's packing, 1). Measured in TPU
// interpret mode (rpa.jax.v3_pallas, issue 23), tpu-inference 0.32.0's validators accepting
// each call: bfloat16 q with 1 or 3 q heads per kv head fails for 1, 2 and 4 kv heads, as a
// TypeError at trace where Hq is not a multiple of the padded group, else an IndexError
// reading sink row h >= Hq / padded; an even group, and float32 q with any group, run and
// agree with rpa's reference. No sink: nothing is reshaped.
TEST(V3Validate, SinkGroupUnpacked) {
  struct Row {
    DType q;
    int64_t hkv, group;
    const char* native;  // "OK", or the native verdict
  };
  const Row rows[] = {
      {DType::kBFloat16, 1, 2, "OK"},
      {DType::kBFloat16, 2, 2, "OK"},
      {DType::kBFloat16, 1, 1,
       "sink_group_unpacked: TypeError at trace: attention_sink is reshaped to (-1, 2, 1): 1 q "
       "heads per kv head padded to q's packing 2 (dtype(bfloat16)), which 1 sinks do not fill."},
      {DType::kBFloat16, 2, 3,
       "sink_group_unpacked: TypeError at trace: attention_sink is reshaped to (-1, 4, 1): 3 q "
       "heads per kv head padded to q's packing 2 (dtype(bfloat16)), which 6 sinks do not fill."},
      {DType::kBFloat16, 2, 1,
       "sink_group_unpacked: IndexError: attention_sink is reshaped to (-1, 2, 1): 1 q heads per "
       "kv head padded to q's packing 2 (dtype(bfloat16)): 1 rows for 2 kv heads (kernel_hd64 "
       "reads sinks past the array)."},
      {DType::kBFloat16, 4, 3,
       "sink_group_unpacked: IndexError: attention_sink is reshaped to (-1, 4, 1): 3 q heads per "
       "kv head padded to q's packing 2 (dtype(bfloat16)): 3 rows for 4 kv heads (kernel_hd64 "
       "reads sinks past the array)."},
      {DType::kFloat32, 1, 1, "OK"},
      {DType::kFloat32, 2, 3, "OK"},
  };
  for (const Row& r : rows) {
    Case c = make(Spec{.d = kHd64, .q = r.q, .kv = r.q, .Hq = r.hkv * r.group, .Hkv = r.hkv});
    const std::string what = dtype_repr(r.q) + " Hkv " + std::to_string(r.hkv) + " group " +
                             std::to_string(r.group);
    EXPECT_EQ(rule_of(c, kNative), "OK") << what;  // no sink
    EXPECT_EQ(rule_of(c, kStrict), "OK") << what;
    c.in.attention_sink = Tensor(DType::kFloat32, {r.hkv * r.group});
    EXPECT_EQ(verdict(c, kNative), r.native) << what;
    const bool ok = std::string(r.native) == "OK";
    EXPECT_EQ(rule_of(c, kStrict), ok ? "OK" : "sink_group_unpacked") << what;
  }
  Case c = make(Spec{.d = kHd64, .Hq = 3, .Hkv = 1});
  c.in.attention_sink = Tensor(DType::kFloat32, {3});
  EXPECT_EQ(verdict(c, kStrict),
            "sink_group_unpacked: attention_sink is reshaped to (-1, 4, 1): 3 q heads per kv head "
            "padded to q's packing 2 (dtype(bfloat16)); Hq/Hkv must be a multiple of it for every "
            "kv head to get its sinks.");
  // float16 q is valid natively (it traces); its packing is 2 as well.
  c.in.queries = Tensor(DType::kFloat16, c.in.queries.shape());
  EXPECT_EQ(rule_of(c, kNative), "sink_group_unpacked");
  EXPECT_EQ(rule_of(c, kStrict), "q_dtype_unsupported");
}

// Finding 23: kernel.py rounds each KV compute block's row max to bfloat16 (the out_dtype of
// bfloat16 q). -1e30 = -201.95 x 2^92 rounds to -202 x 2^92 = -1.0002555517425873e30, away
// from zero, so a row that sees no key in its query block's first compute block gets
// exp(mask_value - max) = exp(2.6e26) = inf, then 0 * inf = NaN (measured in TPU interpret
// mode: v3_cross_check, corpus/findings/v3_window_masked_block_nan.npz). Sequence 0 (decode,
// kv 5: position 4) with sliding_window 1 sees key 4 only; its first compute block is [0,
// bkv_csz): 4 tokens miss it, 8 do not. -1e38 rounds toward zero; -2^100 is a bfloat16; a
// window of 2 sees key 3 too; float32 q accumulates in float32: none of them overflows.
TEST(V3Validate, MaskedBlockOverflows) {
  const auto with = [](DType q, double mask, int64_t window, int64_t decode_csz) {
    Case c = make(Spec{.q = q, .kv = q});
    c.p.mask_value = mask;
    c.p.sliding_window = window;
    c.p.d_block_sizes = V3BlockSizes{1, 8, 1, decode_csz};
    c.p.m_block_sizes = V3BlockSizes{4, 4, 4, 4};
    return c;
  };
  const Case hit = with(DType::kBFloat16, -1e30, 1, 4);
  EXPECT_EQ(rule_of(hit, kNative), "OK");
  EXPECT_EQ(verdict(hit, kStrict),
            "masked_block_overflows: mask_value=-1e+30 rounds away from zero in bfloat16 (to "
            "-1.0002555517425873e+30), the out_dtype kernel.py rounds each KV compute block's row "
            "max to: row 0 of sequence 0 (position 4) sees no key in its first KV compute block "
            "[0, 4) under sliding_window=1, so exp(mask_value - max) overflows and the row is "
            "NaN.");
  EXPECT_EQ(rule_of(with(DType::kBFloat16, -1e30, 1, 8), kStrict), "OK");
  EXPECT_EQ(rule_of(with(DType::kBFloat16, -1e30, 2, 4), kStrict), "OK");
  EXPECT_EQ(rule_of(with(DType::kBFloat16, -1e38, 1, 4), kStrict), "OK");
  EXPECT_EQ(rule_of(with(DType::kBFloat16, -std::ldexp(1.0, 100), 1, 4), kStrict), "OK");
  EXPECT_EQ(rule_of(with(DType::kFloat32, -1e30, 1, 4), kStrict), "OK");
  // Without d_block_sizes, TPU v5's (and v6's, v7's) decode blocks are the whole 12-token page
  // table: key 4 is in the first block.
  Case defaults = with(DType::kBFloat16, -1e30, 1, 4);
  defaults.p.d_block_sizes.reset();
  EXPECT_EQ(rule_of(defaults, kStrict), "OK");
  // A mixed sequence at positions 6..8 (q 3, kv 9), one query block of 4 rows: its first KV
  // block starts at the window of its first row (floor(5 / 8) = block 0), so with compute
  // blocks of 4 tokens row 0 (position 6) misses [0, 4), and with 8 tokens row 2 (position
  // 8) still misses [0, 8); a window of 2 reaches key 7.
  const auto mixed = [](int64_t window, int64_t csz) {
    Case c = make(Spec{.kv_lens = {5, 9}});
    c.p.mask_value = -1e30;
    c.p.sliding_window = window;
    c.p.d_block_sizes = V3BlockSizes{1, 8, 1, 8};
    c.p.m_block_sizes = V3BlockSizes{4, 8, 4, csz};
    return c;
  };
  const std::string head = "masked_block_overflows: mask_value=-1e+30 rounds away from zero in "
                           "bfloat16 (to -1.0002555517425873e+30), the out_dtype kernel.py rounds "
                           "each KV compute block's row max to: ";
  EXPECT_EQ(verdict(mixed(1, 4), kStrict),
            head + "row 0 of sequence 1 (position 6) sees no key in its first KV compute block "
                   "[0, 4) under sliding_window=1, so exp(mask_value - max) overflows and the row "
                   "is NaN.");
  EXPECT_EQ(verdict(mixed(1, 8), kStrict),
            head + "row 2 of sequence 1 (position 8) sees no key in its first KV compute block "
                   "[0, 8) under sliding_window=1, so exp(mask_value - max) overflows and the row "
                   "is NaN.");
  EXPECT_EQ(rule_of(mixed(2, 8), kStrict), "OK");
  EXPECT_EQ(rule_of(mixed(1, 8), kNative), "OK");
}

// Finding 24: kernel.py writes a sequence's new tokens to the cache only from the KV blocks
// its last query block reads; a sliding window starts those at the window of that block's
// first row, floored to bkv_sz (measured in TPU interpret mode: the kernel leaves those slots
// as they were; corpus/findings/v3_window_skips_cache_write.npz). Sequence 1 here: q 4, kv 9,
// new tokens at positions 5..8, pages of 2 tokens. In query blocks of one row the last one
// (position 8) reads from position 6 with a window of 2 (positions 7, 8), from 4 with a window
// of 3; in one query block of 4 rows it reads from position 4 (= 5 - 1, floored) either way.
// update_kv_cache=False writes nothing anyway, and a decode row's block holds its own token.
TEST(V3Validate, WindowSkipsCacheWrite) {
  const auto with = [](int64_t window, int64_t bq, bool update) {
    Case c = make(Spec{.pages = 12, .ps = 2, .pps = 5, .kv_lens = {5, 9}, .cu = {0, 1, 5}});
    c.p.sliding_window = window;
    c.p.update_kv_cache = update;
    c.p.d_block_sizes = V3BlockSizes{1, 2, 1, 2};
    c.p.m_block_sizes = V3BlockSizes{bq, 2, bq, 2};
    return c;
  };
  EXPECT_EQ(rule_of(with(2, 1, true), kNative), "OK");
  EXPECT_EQ(verdict(with(2, 1, true), kStrict),
            "window_skips_cache_write: sliding_window=2: kernel.py writes sequence 1's new tokens "
            "to the cache only from the KV blocks its last query block reads, which start at "
            "position 6, so its new tokens at positions 5..5 are never written (bkv_sz=2).");
  EXPECT_EQ(rule_of(with(3, 1, true), kStrict), "OK");
  EXPECT_EQ(rule_of(with(2, 4, true), kStrict), "OK");
  EXPECT_EQ(rule_of(with(2, 1, false), kStrict), "OK");
  // Without m_block_sizes every generation's defaults cover the 10-token page table at once.
  Case defaults = with(2, 1, true);
  defaults.p.m_block_sizes.reset();
  EXPECT_EQ(rule_of(defaults, kStrict), "OK");
}

// A window no kernel can hold (sliding_window_nonpositive, sliding_window_too_large) is still
// an int64 the later window rules read when every failure is reported: fuzz_case_file's
// crash-ea821c3b (CI, 2026-12-07) took window_skips_cache_write's `last - w` past INT64_MIN
// with sliding_window = INT64_MIN (UBSan: signed overflow). They saturate now, at both ends,
// and in masked_block_overflow's `processed - w` and `position - w + 1` too.
TEST(V3Validate, WindowRulesSaturateAtTheInt64Ends) {
  const auto with = [](int64_t window) {
    Case c = make(Spec{.pages = 12, .ps = 2, .pps = 5, .kv_lens = {5, 9}, .cu = {0, 1, 5}});
    c.p.sliding_window = window;
    c.p.update_kv_cache = true;
    c.p.mask_value = -1e30;
    c.p.d_block_sizes = V3BlockSizes{1, 2, 1, 2};
    c.p.m_block_sizes = V3BlockSizes{1, 2, 1, 2};
    return c;
  };
  const auto names = [](const Case& c) {
    std::vector<std::string> out;
    for (const V3Failure& f : v3_validate_all(c.d, c.in, c.p, kStrict)) {
      out.emplace_back(v3_rule_info(f.rule).name);
    }
    return out;
  };
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  // The first failure is the window's own rule; the window rules after it run without UB.
  EXPECT_EQ(rule_of(with(lo), kStrict), "sliding_window_nonpositive");
  EXPECT_EQ(rule_of(with(lo), kNative), "sliding_window_nonpositive");
  EXPECT_EQ(names(with(lo)).front(), "sliding_window_nonpositive");
  EXPECT_EQ(rule_of(with(hi), kStrict), "sliding_window_too_large");
  EXPECT_EQ(names(with(hi)).front(), "sliding_window_too_large");
  // One step in from each end reads the same.
  EXPECT_EQ(rule_of(with(lo + 1), kStrict), "sliding_window_nonpositive");
  EXPECT_EQ(rule_of(with(hi - 1), kStrict), "sliding_window_too_large");
}

// Finding 25: on TPU v6 and later kernel.py holds mask positions in int16 when q is packed and
// pages_per_seq * page_size <= 32767 (here 3 x 4 = 12), and its window test q < k + W wraps
// where k + W > 32767: a key the definition keeps is masked (measured in TPU interpret mode:
// corpus/findings/v3_window_int16_wraps.npz). The last row of sequence 0 (kv 5: position 4)
// keeps key 4; 4 + 32763 = 32767 fits, 4 + 32764 does not. A window past int16 wraps too
// (JAX converts it by wrapping): c = W mod 2^16 keeps every key iff kv_len <= c and
// c + kv_len - 1 <= 32767. float32 q and hd64 hold int32 positions; so does kernel.py where
// pages_per_seq * page_size > 32767. Strict rejects whatever the generation (v5 holds int32).
TEST(V3Validate, WindowInt16Wraps) {
  const auto with = [](int64_t window, Spec s = {}) {
    Case c = make(s);
    c.p.sliding_window = window;
    return c;
  };
  const std::string head = "window_int16_wraps: sequence 0 (kv_len=5) under sliding_window=";
  const std::string tail = ": kernel.py on TPU v6 and later holds mask positions in int16 "
                           "(bfloat16 q, pages_per_seq * page_size = 12 <= 32767), where key + "
                           "sliding_window wraps past 32767: the row at position 4 loses key ";
  EXPECT_EQ(rule_of(with(32763), kStrict), "OK");
  EXPECT_EQ(verdict(with(32764), kStrict), head + "32764" + tail + "4, which the definition keeps.");
  EXPECT_EQ(verdict(with(32767), kStrict), head + "32767" + tail + "1, which the definition keeps.");
  EXPECT_EQ(rule_of(with(32764), kNative), "OK");
  // Windows past int16: 40000 wraps negative, 65536 + 4 keeps 4 of position 4's 5 keys,
  // 65536 + 5 all of them (sequence 1: kv 3 <= 5), 65536 + 32763 up to key 4.
  EXPECT_EQ(verdict(with(40000), kStrict), head + "40000" + tail + "0, which the definition keeps.");
  EXPECT_EQ(verdict(with(65540), kStrict), head + "65540" + tail + "0, which the definition keeps.");
  EXPECT_EQ(rule_of(with(65541), kStrict), "OK");
  EXPECT_EQ(rule_of(with(65536 + 32763), kStrict), "OK");
  EXPECT_EQ(verdict(with(65536 + 32764), kStrict),
            head + "98300" + tail + "4, which the definition keeps.");
  EXPECT_EQ(rule_of(with(65536), kStrict), "window_int16_wraps");
  EXPECT_EQ(rule_of(with(2147483647), kStrict), "window_int16_wraps");
  // float32 q holds int32 positions.
  EXPECT_EQ(rule_of(with(32764, Spec{.q = DType::kFloat32, .kv = DType::kFloat32}), kStrict), "OK");
  EXPECT_EQ(rule_of(with(40000, Spec{.q = DType::kFloat32, .kv = DType::kFloat32}), kStrict), "OK");
  // pages_per_seq * page_size: 2 x 16383 = 32766 is int16, 2 x 16384 = 32768 is not.
  EXPECT_EQ(rule_of(with(32764, Spec{.ps = 2, .pps = 16383}), kStrict), "window_int16_wraps");
  EXPECT_EQ(rule_of(with(32764, Spec{.ps = 2, .pps = 16384}), kStrict), "OK");
  EXPECT_EQ(rule_of(with(40000, Spec{.ps = 2, .pps = 16384}), kStrict), "OK");
  // hd64 holds int32 positions.
  EXPECT_EQ(rule_of(with(32764, Spec{.d = kHd64}), kStrict), "OK");
  EXPECT_EQ(rule_of(with(40000, Spec{.d = kHd64}), kStrict), "OK");
  // Sequence 1, mixed (q 3, kv 9: positions 6..8), with and without the causal mask: its
  // last row keeps key 8 either way; 8 + 32759 fits.
  Case mixed = with(32760, Spec{.kv_lens = {5, 9}});
  EXPECT_EQ(verdict(mixed, kStrict),
            "window_int16_wraps: sequence 1 (kv_len=9) under sliding_window=32760: kernel.py on "
            "TPU v6 and later holds mask positions in int16 (bfloat16 q, pages_per_seq * "
            "page_size = 12 <= 32767), where key + sliding_window wraps past 32767: the row at "
            "position 8 loses key 8, which the definition keeps.");
  mixed.p.use_causal_mask = false;
  EXPECT_EQ(rule_of(mixed, kStrict), "window_int16_wraps");
  EXPECT_EQ(rule_of(with(32759, Spec{.kv_lens = {5, 9}}), kStrict), "OK");
  // With block sizes the same: the positions are the generation's, not the blocks'.
  Case blocks = with(32764);
  blocks.p.d_block_sizes = V3BlockSizes{1, 8, 1, 4};
  blocks.p.m_block_sizes = V3BlockSizes{4, 4, 4, 4};
  EXPECT_EQ(rule_of(blocks, kStrict), "window_int16_wraps");
  // Only sequences below distribution[2] count.
  EXPECT_EQ(rule_of(with(32764, Spec{.kv_lens = {1, 5}, .cu = {0, 1, 1}, .dist = {1, 1, 1}}), kStrict),
            "OK");
}

// Finding 26: where kernel.py's mask positions are int32 (float32 q on every generation,
// bfloat16 q past pages_per_seq * page_size 32767 or on TPU v5), its window test
// q < k + W wraps where k + W > 2147483647, and the key is masked although the definition
// keeps it (measured in TPU interpret mode: corpus/findings/v3_window_int32_wraps.npz). The
// last row of sequence 0 (kv 5: position 4) keeps key 4: 4 + 2147483643 fits, 4 + 2147483644
// does not. hd64 tests q - W < k (no sum); bfloat16 q with int16 positions meets
// window_int16_wraps first.
TEST(V3Validate, WindowInt32Wraps) {
  const auto with = [](int64_t window, Spec s = Spec{.q = DType::kFloat32, .kv = DType::kFloat32}) {
    Case c = make(s);
    c.p.sliding_window = window;
    return c;
  };
  const std::string head = "window_int32_wraps: sequence 0 (kv_len=5) under sliding_window=";
  const std::string tail = ": kernel.py adds the window to int32 key positions, where key + "
                           "sliding_window wraps past 2147483647: the row at position 4 loses key ";
  EXPECT_EQ(rule_of(with(2147483643), kStrict), "OK");
  EXPECT_EQ(verdict(with(2147483644), kStrict),
            head + "2147483644" + tail + "4, which the definition keeps.");
  EXPECT_EQ(verdict(with(2147483647), kStrict),
            head + "2147483647" + tail + "1, which the definition keeps.");
  EXPECT_EQ(rule_of(with(2147483644), kNative), "OK");
  // Past int32 the window itself is refused first. Native mode takes any window: the walk
  // still reaches this rule, and kv_len - 1 + W must not overflow int64 (UBSan; fuzz_validate
  // found sliding_window_too_large's INT64_MAX seed in its first second).
  EXPECT_EQ(rule_of(with(2147483648), kStrict), "sliding_window_too_large");
  EXPECT_EQ(rule_of(with(std::numeric_limits<int64_t>::max()), kStrict), "sliding_window_too_large");
  EXPECT_EQ(rule_of(with(std::numeric_limits<int64_t>::max()), kNative), "OK");
  // bfloat16 q with int32 positions (pages_per_seq * page_size 2 x 16384 = 32768).
  EXPECT_EQ(rule_of(with(2147483644, Spec{.ps = 2, .pps = 16384}), kStrict), "window_int32_wraps");
  EXPECT_EQ(rule_of(with(2147483643, Spec{.ps = 2, .pps = 16384}), kStrict), "OK");
  // bfloat16 q with int16 positions: the int16 rule comes first.
  EXPECT_EQ(rule_of(with(2147483644, Spec{}), kStrict), "window_int16_wraps");
  // hd64 subtracts the window from q's position: no sum to wrap.
  EXPECT_EQ(rule_of(with(2147483647, Spec{.d = kHd64, .q = DType::kFloat32, .kv = DType::kFloat32}),
                    kStrict),
            "OK");
  // Sequence 1, mixed (q 3, kv 9: positions 6..8), with and without the causal mask: its last
  // row keeps key 8; 8 + 2147483639 fits, 8 + 2147483640 does not (sequence 0's 4 + W fits).
  Case mixed = with(2147483640, Spec{.q = DType::kFloat32, .kv = DType::kFloat32, .kv_lens = {5, 9}});
  EXPECT_EQ(verdict(mixed, kStrict),
            "window_int32_wraps: sequence 1 (kv_len=9) under sliding_window=2147483640: kernel.py "
            "adds the window to int32 key positions, where key + sliding_window wraps past "
            "2147483647: the row at position 8 loses key 8, which the definition keeps.");
  mixed.p.use_causal_mask = false;
  EXPECT_EQ(rule_of(mixed, kStrict), "window_int32_wraps");
  EXPECT_EQ(
      rule_of(with(2147483639, Spec{.q = DType::kFloat32, .kv = DType::kFloat32, .kv_lens = {5, 9}}),
              kStrict),
      "OK");
  // Only sequences below distribution[2] count.
  EXPECT_EQ(rule_of(with(2147483647, Spec{.q = DType::kFloat32, .kv = DType::kFloat32,
                                          .kv_lens = {1, 5}, .cu = {0, 1, 1}, .dist = {1, 1, 1}}),
                    kStrict),
            "OK");
}

TEST(V3Validate, CacheRankAndShapeKernelPy) {
  Case c = base(kV3);
  c.in.kv_cache = Tensor(DType::kBFloat16, {6});
  // observed: IndexError: tuple index out of range
  EXPECT_EQ(verdict(c, kNative), "kv_cache_rank: IndexError: tuple index out of range");
  EXPECT_EQ(rule_of(c, kStrict), "kv_cache_rank");
  // observed from tpu-inference 0.32.0
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 2, 2});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_shape: Expected kv_cache.shape=(6, 4, 2, 2) to be equal to "
            "expected_kv_cache_shape=(6, 4, 2, 2, 128)");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 2, 2, 128, 1});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_shape: Expected kv_cache.shape=(6, 4, 2, 2, 128, 1) to be equal to "
            "expected_kv_cache_shape=(6, 4, 2, 2, 128)");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 3, 2, 128});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_shape: Expected kv_cache.shape=(6, 4, 3, 2, 128) to be equal to "
            "expected_kv_cache_shape=(6, 4, 2, 2, 128)");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 2, 2, 256});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_shape: Expected kv_cache.shape=(6, 4, 2, 2, 256) to be equal to "
            "expected_kv_cache_shape=(6, 4, 2, 2, 128)");
  EXPECT_EQ(rule_of(c, kStrict), "kv_cache_shape");
  c.in.kv_cache = Tensor(DType::kFloat32, {6, 4, 2, 2, 128});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_shape: Expected kv_cache.shape=(6, 4, 2, 2, 128) to be equal to "
            "expected_kv_cache_shape=(6, 4, 4, 1, 128)");
  Case f = make(Spec{.kv = DType::kFloat32});
  f.in.kv_cache = Tensor(DType::kFloat32, {6, 4, 4, 2, 128});
  EXPECT_EQ(verdict(f, kNative),
            "kv_cache_shape: Expected kv_cache.shape=(6, 4, 4, 2, 128) to be equal to "
            "expected_kv_cache_shape=(6, 4, 4, 1, 128)");
  // Just valid: page count and page size are free; the rest is the layout.
  c.in.kv_cache = Tensor(DType::kBFloat16, {7, 4, 2, 2, 128});
  EXPECT_EQ(rule_of(c, kStrict), "OK");
}

TEST(V3Validate, CacheHd64) {
  Case c = base(kHd64);
  // observed from tpu-inference 0.32.0
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 1, 2});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_rank: ValueError: not enough values to unpack (expected 5, got 4)");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_rank: ValueError: not enough values to unpack (expected 5, got 1)");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 1, 2, 128, 1});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_rank: ValueError: too many values to unpack (expected 5)");
  EXPECT_EQ(rule_of(c, kStrict), "kv_cache_rank");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 1, 2, 256});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_last_dim: Expected actual_head_dim_x2=256 is equal to 128");
  EXPECT_EQ(rule_of(c, kStrict), "kv_cache_last_dim");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 3, 2, 128});
  EXPECT_EQ(verdict(c, kNative),
            "kv_cache_heads: Invalid num_kv_heads=6, actual_num_kv_heads=2, kv_packing=2");
  EXPECT_EQ(rule_of(c, kStrict), "kv_cache_heads");
  c.in.kv_cache = Tensor(DType::kBFloat16, {6, 4, 1, 2, 128});
  EXPECT_EQ(rule_of(c, kStrict), "OK");
  Case f = make(Spec{.d = kHd64, .q = DType::kFloat32, .kv = DType::kFloat32});
  f.in.kv_cache = Tensor(DType::kFloat32, {6, 4, 2, 2, 128});
  EXPECT_EQ(verdict(f, kNative),
            "kv_packing_mismatch: kv_packing=2 does not match with "
            "kv_cache.dtype=dtype('float32')");
  EXPECT_EQ(rule_of(f, kStrict), "kv_packing_mismatch");
  f.in.kv_cache = Tensor(DType::kFloat32, {6, 4, 2, 1, 128});
  EXPECT_EQ(rule_of(f, kStrict), "OK");
  // hd64 compares no page count, so a bf16 cache of the f32 layout fails on the dtype.
  c.in.kv_cache = Tensor(DType::kFloat32, {6, 4, 1, 2, 128});
  EXPECT_EQ(verdict(c, kNative),
            "kv_dtype_mismatch: Expected kv_cache.dtype=dtype('float32') to be equal to "
            "k.dtype=dtype(bfloat16) and v.dtype=dtype(bfloat16).");
}

TEST(V3Validate, KvDtypes) {
  for (Dialect d : kBoth) {
    Case c = make(Spec{.d = d, .q = DType::kFloat32, .kv = DType::kFloat32});
    c.in.keys = Tensor(DType::kBFloat16, c.in.keys.shape());
    // observed from tpu-inference 0.32.0
    EXPECT_EQ(verdict(c, kNative),
              "kv_dtype_mismatch: Expected kv_cache.dtype=dtype('float32') to be equal to "
              "k.dtype=dtype(bfloat16) and v.dtype=dtype('float32').");
    EXPECT_EQ(rule_of(c, kStrict), "kv_dtype_mismatch");
    Case i8 = make(Spec{.d = d, .kv = DType::kInt8});
    EXPECT_EQ(verdict(i8, kNative),
              "kv_dtype_not_float: Expected kv_cache.dtype=dtype('int8') to be a floating "
              "point.");
    EXPECT_EQ(rule_of(i8, kStrict), "kv_dtype_unsupported");
    // float16 KV: the validators accept it (observed), the definition does not.
    Case f16 = make(Spec{.d = d, .kv = DType::kFloat16});
    EXPECT_EQ(rule_of(f16, kNative), "OK");
    EXPECT_EQ(rule_of(f16, kStrict), "kv_dtype_unsupported");
    // jnp.asarray (x64 off) makes 64-bit arrays 32-bit: float64 KV is float32 KV natively
    // (observed OK), int64 KV is int32 (observed message).
    Case f64 = make(Spec{.d = d, .q = DType::kFloat32, .kv = DType::kFloat32});
    f64.in.keys = Tensor(DType::kFloat64, f64.in.keys.shape());
    f64.in.values = Tensor(DType::kFloat64, f64.in.values.shape());
    f64.in.kv_cache = Tensor(DType::kFloat64, f64.in.kv_cache.shape());
    EXPECT_EQ(rule_of(f64, kNative), "OK");
    EXPECT_EQ(rule_of(f64, kStrict), "kv_dtype_unsupported");
    Case i64 = f64;
    i64.in.keys = Tensor(DType::kInt64, f64.in.keys.shape());
    i64.in.values = Tensor(DType::kInt64, f64.in.values.shape());
    i64.in.kv_cache = Tensor(DType::kInt64, f64.in.kv_cache.shape());
    EXPECT_EQ(verdict(i64, kNative),
              "kv_dtype_not_float: Expected kv_cache.dtype=dtype('int32') to be a floating "
              "point.");
    // Pairs: same dtype, or float8 KV under float32 / bfloat16 q.
    for (DType kv : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
      EXPECT_EQ(rule_of(make(Spec{.d = d, .q = DType::kBFloat16, .kv = kv}), kStrict), "OK");
      EXPECT_EQ(rule_of(make(Spec{.d = d, .q = DType::kFloat32, .kv = kv}), kStrict), "OK");
    }
    EXPECT_EQ(rule_of(make(Spec{.d = d, .q = DType::kFloat32, .kv = DType::kFloat32}), kStrict),
              "OK");
    Case mixed = make(Spec{.d = d, .q = DType::kFloat32, .kv = DType::kBFloat16});
    EXPECT_EQ(rule_of(mixed, kNative), "OK");
    EXPECT_EQ(rule_of(mixed, kStrict), "dtype_pair");
    EXPECT_EQ(rule_of(make(Spec{.d = d, .q = DType::kBFloat16, .kv = DType::kFloat32}), kStrict),
              "dtype_pair");
  }
}

TEST(V3Validate, QDtypeAndOutDtype) {
  for (Dialect d : kBoth) {
    // fp8 q: the validators accept it (observed); kernel.py fails at trace (measured:
    // TypeError: cannot reshape array ...; inferred for hd64).
    Case c = make(Spec{.d = d, .q = DType::kFloat8E4M3FN, .kv = DType::kFloat8E4M3FN});
    EXPECT_EQ(verdict(c, kNative),
              "q_dtype_unsupported: TypeError at trace: q.dtype=dtype(float8_e4m3fn) (the "
              "kernel computes q in float32 or bfloat16)");
    EXPECT_EQ(rule_of(c, kStrict), "q_dtype_unsupported");
    // int32 q fails at trace too (measured for kernel.py); float16 q traces (measured), so
    // native accepts it and strict does not.
    EXPECT_EQ(rule_of(make(Spec{.d = d, .q = DType::kInt32, .kv = DType::kBFloat16}), kNative),
              "q_dtype_unsupported");
    Case f16 = make(Spec{.d = d, .q = DType::kFloat16, .kv = DType::kFloat16});
    EXPECT_EQ(rule_of(f16, kNative), "OK");
    EXPECT_EQ(rule_of(f16, kStrict), "kv_dtype_unsupported");
    Case f16q = make(Spec{.d = d, .q = DType::kFloat16, .kv = DType::kFloat8E5M2});
    EXPECT_EQ(rule_of(f16q, kNative), "OK");
    EXPECT_EQ(rule_of(f16q, kStrict), "q_dtype_unsupported");
  }
  Case c = base(kV3);
  c.p.out_dtype = DType::kBFloat16;
  EXPECT_EQ(rule_of(c, kStrict), "OK");
  c.p.out_dtype = DType::kFloat32;  // observed: the validators accept it
  EXPECT_EQ(verdict(c, kNative),
            "out_dtype_not_default: TypeError at trace: out_dtype=dtype('float32') must be "
            "the default dtype(bfloat16) for q.dtype=dtype(bfloat16).");
  EXPECT_EQ(rule_of(c, kStrict), "out_dtype_not_default");
  Case f = make(Spec{.q = DType::kFloat32, .kv = DType::kFloat32});
  f.p.out_dtype = DType::kFloat32;
  EXPECT_EQ(rule_of(f, kNative), "OK");
  EXPECT_EQ(rule_of(f, kStrict), "OK");
  f.p.out_dtype = DType::kBFloat16;  // measured: TypeError at trace
  EXPECT_EQ(rule_of(f, kNative), "out_dtype_not_default");
  c.p.out_dtype = DType::kFloat16;  // same width as the default: inferred to trace
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(rule_of(c, kStrict), "out_dtype_not_default");
}

TEST(V3Validate, IndexArrays) {
  for (Dialect d : kBoth) {
    Case c = base(d);
    c.in.distribution = ints({3}, {1, 1, 2}, DType::kUInt32);
    // observed from tpu-inference 0.32.0
    EXPECT_EQ(verdict(c, kNative),
              "index_dtype: Expected int32 dtype for kv_lens.dtype=dtype('int32'), "
              "page_indices.dtype=dtype('int32'), cu_q_lens.dtype=dtype('int32'), "
              "distribution.dtype=dtype('uint32')");
    c = base(d);
    c.in.kv_lens = ints({2}, {5, 3}, DType::kInt64);  // jnp.asarray: int32 (observed OK)
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "index_dtype");
    c = base(d);
    c.in.kv_lens = ints({2, 1}, {5, 3});
    EXPECT_EQ(verdict(c, kNative),
              "index_rank: Expected 1D array for kv_lens.shape=(2, 1), page_indices.shape=(6,), "
              "cu_q_lens.shape=(3,)");
    c.in.kv_lens = ints({}, {5});
    EXPECT_EQ(verdict(c, kNative),
              "index_rank: Expected 1D array for kv_lens.shape=(), page_indices.shape=(6,), "
              "cu_q_lens.shape=(3,)");
    EXPECT_EQ(rule_of(c, kStrict), "index_rank");
    c = base(d);
    c.in.page_indices = ints({5}, {0, 1, 2, 3, 4});
    EXPECT_EQ(verdict(c, kNative),
              "page_indices_not_divisible: Expected num_page_indices=5 to be divisible by "
              "max_num_seqs=2.");
    c.in.page_indices = ints({4}, {0, 1, 2, 3});  // pps 2: enough for kv 5 and 3
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c = base(d);
    c.in.kv_lens = Tensor(DType::kInt32, {0});
    // observed: integer modulo by zero
    EXPECT_EQ(verdict(c, kNative), "max_num_seqs_zero: ZeroDivisionError: integer modulo by zero");
    EXPECT_EQ(rule_of(c, kStrict), "max_num_seqs_zero");
    c = base(d);
    c.in.cu_q_lens = ints({2}, {0, 1});
    EXPECT_EQ(verdict(c, kNative), "cu_q_lens_shape: Expected cu_q_lens.shape=(2,) to be (3,).");
    c = base(d);
    c.in.distribution = ints({3, 1}, {1, 1, 2});
    EXPECT_EQ(verdict(c, kNative),
              "distribution_shape: Expected distribution.shape=(3, 1) to be (3,).");
    c.in.distribution = ints({}, {2});
    EXPECT_EQ(verdict(c, kNative),
              "distribution_shape: Expected distribution.shape=() to be (3,).");
    EXPECT_EQ(rule_of(c, kStrict), "distribution_shape");
  }
}

TEST(V3Validate, ScalarOptions) {
  for (Dialect d : kBoth) {
    Case c = make(Spec{.d = d, .kv = DType::kFloat8E4M3FN, .ps = 6});
    // observed from tpu-inference 0.32.0
    EXPECT_EQ(verdict(c, kNative),
              "page_size_packing: page_size=6 must be divisible by kv_packing=4.");
    EXPECT_EQ(rule_of(make(Spec{.d = d, .kv = DType::kFloat8E4M3FN, .ps = 8, .pps = 1}), kStrict),
              "OK");
    c = base(d);
    c.p.sliding_window = 0;
    EXPECT_EQ(verdict(c, kNative),
              "sliding_window_nonpositive: sliding_window=0 must be positive.");
    c.p.sliding_window = -1;
    EXPECT_EQ(verdict(c, kNative),
              "sliding_window_nonpositive: sliding_window=-1 must be positive.");
    c.p.sliding_window = 1;
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c.p.sliding_window = int64_t{2147483647};
    // Inside int32, but kernel.py's int16 positions (bfloat16 q, finding 25) wrap it.
    EXPECT_EQ(rule_of(c, kStrict), d == kV3 ? "window_int16_wraps" : "OK");
    c.p.sliding_window = int64_t{2147483648};
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "sliding_window_too_large");
    c = base(d);
    c.p.soft_cap = 0.0;
    EXPECT_EQ(verdict(c, kNative), "soft_cap_zero: soft_cap=0.0 must not be 0.0.");
    c.p.soft_cap = -0.0;
    EXPECT_EQ(verdict(c, kNative), "soft_cap_zero: soft_cap=-0.0 must not be 0.0.");
    c.p.soft_cap = std::nan("");
    EXPECT_EQ(rule_of(c, kNative), "OK");  // observed
    EXPECT_EQ(rule_of(c, kStrict), "soft_cap_nonfinite");
    c.p.soft_cap = 1e38;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c.p.soft_cap = 1e39;  // inf as a float32
    EXPECT_EQ(rule_of(c, kStrict), "soft_cap_nonfinite");
    // Found by fuzz_raw_inputs in CI: 1.78e-307 passes tpu-inference (!= 0.0) but is 0.0 as
    // a float32, where the kernels compute the cap (a logit of 0 then gives 0 / 0 = NaN).
    c.p.soft_cap = 5e-324;
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(verdict(c, kStrict),
              "soft_cap_zero: soft_cap=5e-324 must not be 0.0 (it is 0.0 as a float32).");
    c.p.soft_cap = 1e-40;  // a float32 subnormal, which the kernels flush to 0
    EXPECT_EQ(verdict(c, kStrict),
              "soft_cap_zero: soft_cap=1e-40 must not be 0.0 (it is subnormal as a float32).");
    c.p.soft_cap = 0x1p-126;  // the least normal float32
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c = base(d);
    c.p.chunk_prefill_size = 0;
    EXPECT_EQ(verdict(c, kNative),
              "chunk_prefill_nonpositive: chunk_prefill_size=0 must be positive.");
    c.p.chunk_prefill_size = 1;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c = base(d);
    c.p.vmem_limit_bytes = 0;
    EXPECT_EQ(verdict(c, kNative), "vmem_limit_nonpositive: vmem_limit_bytes=0 must be positive.");
    c.p.vmem_limit_bytes = 1;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
  }
}

TEST(V3Validate, StrictFloatScalars) {
  for (Dialect d : kBoth) {
    const double inf = std::numeric_limits<double>::infinity();
    Case c = base(d);
    c.p.sm_scale = inf;
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(verdict(c, kStrict), "sm_scale_nonfinite: sm_scale=inf must be finite as a float32.");
    c.p.sm_scale = 1e38;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c = base(d);
    c.p.q_scale = 0.0;
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "q_scale_invalid");
    c.p.q_scale = 1e-46;  // 0 as a float32
    EXPECT_EQ(rule_of(c, kStrict), "q_scale_invalid");
    c.p.q_scale = 1e-45;  // the smallest float32 subnormal: 0 to a TPU, q / 0
    EXPECT_EQ(verdict(c, kStrict),
              "q_scale_invalid: q_scale=1e-45 must be finite, nonzero and not subnormal as a "
              "float32.");
    c.p.q_scale = 7.346839692639297e-40;  // fuzz_raw_inputs' case: the kernel's q / 0 = NaN
    EXPECT_EQ(rule_of(c, kStrict), "q_scale_invalid");
    EXPECT_EQ(rule_of(c, kNative), "OK");
    c.p.q_scale = std::ldexp(1.0, -126);  // the least normal float32
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c.p.q_scale = std::nan("");
    EXPECT_EQ(rule_of(c, kStrict), "q_scale_invalid");
    c = base(d);
    c.p.k_scale = -inf;
    EXPECT_EQ(rule_of(c, kStrict), "k_scale_nonfinite");
    c.p.k_scale = -1e38;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c = base(d);
    c.p.v_scale = std::nan("");
    EXPECT_EQ(rule_of(c, kStrict), "v_scale_nonfinite");
    c.p.v_scale = 0.0;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c = base(d);
    c.p.mask_value = 1.0;  // observed: native accepts
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(verdict(c, kStrict), "mask_value_too_large: mask_value=1.0 must be at most -1e+30.");
    c.p.mask_value = -9.99e29;
    EXPECT_EQ(rule_of(c, kStrict), "mask_value_too_large");
    c.p.mask_value = -1e30;
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c.p.mask_value = -1e39;  // -inf as a float32
    EXPECT_EQ(rule_of(c, kStrict), "mask_value_nonfinite");
  }
}

TEST(V3Validate, BlockSizes) {
  const auto with = [](std::optional<V3BlockSizes> V3Params::*which, V3BlockSizes b) {
    Case c = base(kV3);
    c.p.*which = b;
    return c;
  };
  // observed from tpu-inference 0.32.0
  EXPECT_EQ(verdict(with(&V3Params::d_block_sizes, {1, 4, 0, 4}), kNative),
            "block_bq_sizes: decode bq_csz=0 and bq_sz=1 must satisfy (0 < bq_csz and bq_sz % "
            "bq_csz == 0).");
  EXPECT_EQ(verdict(with(&V3Params::p_block_sizes, {3, 4, 2, 4}), kNative),
            "block_bq_sizes: prefill bq_csz=2 and bq_sz=3 must satisfy (0 < bq_csz and bq_sz % "
            "bq_csz == 0).");
  EXPECT_EQ(verdict(with(&V3Params::m_block_sizes, {1, 4, 1, 0}), kNative),
            "block_bkv_sizes: mixed bkv_csz=0 and bkv_sz=4 must satisfy (0 < bkv_csz and bkv_sz "
            "% bkv_csz == 0).");
  EXPECT_EQ(verdict(with(&V3Params::m_block_sizes, {1, 8, 1, 3}), kNative),
            "block_bkv_sizes: mixed bkv_csz=3 and bkv_sz=8 must satisfy (0 < bkv_csz and bkv_sz "
            "% bkv_csz == 0).");
  EXPECT_EQ(verdict(with(&V3Params::d_block_sizes, {1, 6, 1, 2}), kNative),
            "block_bkv_page: decode bkv_sz=6 must be divisible by page_size=4.");
  EXPECT_EQ(verdict(with(&V3Params::d_block_sizes, {1, 8, 1, 2}), kNative),
            "block_bkv_csz_page: decode bkv_csz=2 must be divisible by page_size=4.");
  // Just valid, and Python's % on negative or zero sizes (observed OK natively).
  EXPECT_EQ(rule_of(with(&V3Params::m_block_sizes, {2, 8, 1, 4}), kStrict), "OK");
  EXPECT_EQ(rule_of(with(&V3Params::m_block_sizes, {1, 4, 1, 4}), kStrict), "OK");
  for (V3BlockSizes b : {V3BlockSizes{-4, 4, 2, 4}, V3BlockSizes{0, 4, 1, 4},
                         V3BlockSizes{1, 0, 1, 4}, V3BlockSizes{1, -4, 1, 4}}) {
    const Case c = with(&V3Params::m_block_sizes, b);
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "block_size_nonpositive");
  }
  // page_size 0: ZeroDivisionError in the block checks (observed).
  Case z = make(Spec{.ps = 0});
  z.p.d_block_sizes = V3BlockSizes{1, 8, 1, 8};
  EXPECT_EQ(verdict(z, kNative), "page_size_zero: ZeroDivisionError: integer modulo by zero");
  EXPECT_EQ(verdict(z, kStrict), "page_size_zero: page_size=0 must be positive.");
  // hd64's two sizes.
  Case h = base(kHd64);
  h.p.num_kv_pages_per_block = 0;
  EXPECT_EQ(verdict(h, kNative),
            "kv_pages_per_block_nonpositive: num_kv_pages_per_block=0 must be positive.");
  h.p.num_kv_pages_per_block = 1;
  h.p.num_queries_per_block = 0;
  EXPECT_EQ(verdict(h, kNative),
            "queries_per_block_nonpositive: num_queries_per_block=0 must be positive.");
  h.p.num_queries_per_block = 1;
  EXPECT_EQ(rule_of(h, kStrict), "OK");
}

TEST(V3Validate, PageSizeZeroInTheDynamicLoop) {
  for (Dialect d : kBoth) {
    const Case c = make(Spec{.d = d, .ps = 0});
    EXPECT_EQ(verdict(c, kNative), "page_size_zero: AssertionError");  // observed: cdiv's assert
    EXPECT_EQ(rule_of(c, kStrict), "page_size_zero");
  }
}

TEST(V3Validate, Distribution) {
  for (Dialect d : kBoth) {
    // observed from tpu-inference 0.32.0
    EXPECT_EQ(verdict(make(Spec{.d = d, .dist = {2, 1, 2}}), kNative),
              "distribution_order: Invalid distribution: distribution=Array([2, 1, 2], "
              "dtype=int32)");
    EXPECT_EQ(verdict(make(Spec{.d = d, .dist = {10, 2, 2}}), kNative),
              "distribution_order: Invalid distribution: distribution=Array([10,  2,  2], "
              "dtype=int32)");
    EXPECT_EQ(verdict(make(Spec{.d = d, .dist = {-1, -12, 2}}), kNative),
              "distribution_order: Invalid distribution: distribution=Array([ -1, -12,   2], "
              "dtype=int32)");
    EXPECT_EQ(verdict(make(Spec{.d = d, .dist = {0, 0, 3}}), kNative),
              "num_seqs_too_large: num_seqs=3 must be <= max_num_seqs=2");
    EXPECT_EQ(rule_of(make(Spec{.d = d, .dist = {0, 0, 2}}), kStrict), "OK");
    // Negative ranges: range(k) is empty, cu_q_lens[k] counts from the end (observed OK).
    for (std::vector<int64_t> dist : {std::vector<int64_t>{-1, -1, -1}, {-9, -9, -9}}) {
      const Case c = make(Spec{.d = d, .dist = dist});
      EXPECT_EQ(rule_of(c, kNative), "OK");
      EXPECT_EQ(rule_of(c, kStrict), "distribution_negative");
    }
    EXPECT_EQ(rule_of(make(Spec{.d = d, .dist = {0, 0, 0}}), kStrict), "OK");
    // A prefill range without chunk_prefill_size: observed OK natively; kernel.py skips it.
    Case pre = make(Spec{.d = d, .dist = {0, 1, 2}});
    EXPECT_EQ(rule_of(pre, kNative), "OK");
    EXPECT_EQ(rule_of(pre, kStrict), d == kV3 ? "prefill_without_chunk_size" : "OK");
    pre.p.chunk_prefill_size = 1;  // sequence 0 has q_len 1
    EXPECT_EQ(rule_of(pre, kStrict), "OK");
    pre.p.chunk_prefill_size = 2;
    EXPECT_EQ(rule_of(pre, kNative), "OK");
    EXPECT_EQ(rule_of(pre, kStrict), "prefill_q_len_not_chunk");
  }
}

TEST(V3Validate, CuQLens) {
  for (Dialect d : kBoth) {
    // observed from tpu-inference 0.32.0
    EXPECT_EQ(verdict(make(Spec{.d = d, .cu = {0, 1, 9}}), kNative),
              "total_q_tokens_too_large: Total q tokens 9 must be <= max_num_tokens=8.");
    const Case eq = make(Spec{.d = d, .kv_lens = {5, 7}, .cu = {0, 1, 8}});
    EXPECT_EQ(rule_of(eq, kNative), "OK");
    EXPECT_EQ(rule_of(eq, kStrict), "OK");
    const Case first = make(Spec{.d = d, .cu = {1, 2, 4}});  // observed OK
    EXPECT_EQ(rule_of(first, kNative), "OK");
    EXPECT_EQ(verdict(first, kStrict), "cu_q_lens_first_nonzero: cu_q_lens[0]=1 must be 0.");
    const Case dec = make(Spec{.d = d, .cu = {0, 1, 0}});
    EXPECT_EQ(rule_of(dec, kNative), "q_len_range");
    EXPECT_EQ(verdict(dec, kStrict),
              "cu_q_lens_decreasing: cu_q_lens[2]=0 must be >= cu_q_lens[1]=1.");
    // Only used entries count: slot 1 unused with a garbage kv_len (observed OK).
    const Case unused = make(Spec{.d = d, .kv_lens = {5, -7}, .cu = {0, 1, 0}, .dist = {1, 1, 1}});
    EXPECT_EQ(rule_of(unused, kNative), "OK");
    EXPECT_EQ(rule_of(unused, kStrict), "OK");
  }
}

TEST(V3Validate, NegativeNumSeqsIndexesCuQLensFromTheEnd) {
  // observed from tpu-inference 0.32.0: cu_q_lens[k] for k < 0 counts from the end and clamps
  // at index 0; range(k) is then empty.
  for (Dialect d : kBoth) {
    for (std::vector<int64_t> dist : {std::vector<int64_t>{-9, -9, -9}, {-3, -3, -3}}) {
      EXPECT_EQ(verdict(make(Spec{.d = d, .cu = {9, 1, 4}, .dist = dist}), kNative),
                "total_q_tokens_too_large: Total q tokens 9 must be <= max_num_tokens=8.");
    }
    EXPECT_EQ(verdict(make(Spec{.d = d, .cu = {0, 1, 9}, .dist = {-1, -1, -1}}), kNative),
              "total_q_tokens_too_large: Total q tokens 9 must be <= max_num_tokens=8.");
  }
}

TEST(V3Validate, QLenWrapsInInt32) {
  // observed OK: q_len = -2^31 - 1 wraps to 2^31 - 1 <= kv_len, the page count wraps negative.
  for (Dialect d : kBoth) {
    const Case c = make(Spec{.d = d, .kv_lens = {5, 2147483647}, .cu = {0, 1, -2147483648LL}});
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "cu_q_lens_decreasing");
  }
}

TEST(V3Validate, PerSequence) {
  for (Dialect d : kBoth) {
    // observed from tpu-inference 0.32.0
    EXPECT_EQ(verdict(make(Spec{.d = d, .cu = {0, 0, 4}}), kNative),
              "q_len_range: Require 0 < q_len=Array(0, dtype=int32) <= kv_len=Array(5, "
              "dtype=int32) at sequence 0.");
    EXPECT_EQ(verdict(make(Spec{.d = d, .cu = {0, 1, 5}}), kNative),
              "q_len_range: Require 0 < q_len=Array(4, dtype=int32) <= kv_len=Array(3, "
              "dtype=int32) at sequence 1.");
    EXPECT_EQ(rule_of(make(Spec{.d = d, .cu = {0, 1, 4}}), kStrict), "OK");  // q_len == kv_len
    EXPECT_EQ(verdict(make(Spec{.d = d, .kv_lens = {13, 3}}), kNative),
              "page_count_too_large: Require page_cnt=Array(4, dtype=int32) <= pages_per_seq=3 "
              "at sequence 0 where kv_len=Array(13, dtype=int32) and page_size=4.");
    EXPECT_EQ(rule_of(make(Spec{.d = d, .kv_lens = {12, 3}}), kStrict), "OK");
    Case c = base(d);
    c.in.page_indices.set_int(1, 6);
    EXPECT_EQ(verdict(c, kNative),
              "page_index_out_of_range: Require 0 <= page_idx=Array(6, dtype=int32) < "
              "total_num_pages=6 at sequence 0 where kv_len=Array(5, dtype=int32) and "
              "page_size=4.");
    c.in.page_indices.set_int(1, -1);
    EXPECT_EQ(verdict(c, kNative),
              "page_index_out_of_range: Require 0 <= page_idx=Array(-1, dtype=int32) < "
              "total_num_pages=6 at sequence 0 where kv_len=Array(5, dtype=int32) and "
              "page_size=4.");
    c.in.page_indices.set_int(1, 5);
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    c.in.page_indices.set_int(2, 99);  // unused entry
    EXPECT_EQ(rule_of(c, kStrict), "OK");
    // A decode-range sequence with q_len 2: observed OK natively.
    const Case dq = make(Spec{.d = d, .cu = {0, 2, 4}, .dist = {1, 1, 2}});
    EXPECT_EQ(rule_of(dq, kNative), "OK");
    EXPECT_EQ(verdict(dq, kStrict),
              "decode_q_len_not_one: sequence 0 is in the decode range, so q_len=2 must be 1.");
  }
}

// Strict: a page that one sequence's fused update writes must not be read by another
// (tpu-inference updates and attends sequence by sequence); pages only read may be shared.
TEST(V3Validate, UpdatePageShared) {
  for (Dialect d : kBoth) {
    // Sequence 0 (q 1, kv 5) reads pages 0 and 1 and writes position 4 (page 1); sequence 1
    // (q 3, kv 7) reads page 0 as its prefix (positions 0..3, none new) and page 4.
    Case c = make(Spec{.d = d, .kv_lens = {5, 7}});
    c.in.page_indices.set_int(3, 0);
    c.in.page_indices.set_int(4, 4);
    EXPECT_EQ(rule_of(c, kStrict), "OK");  // a shared read-only prefix
    EXPECT_EQ(rule_of(c, kNative), "OK");
    c.in.page_indices.set_int(4, 1);  // sequence 1's new tokens 4..6 go to page 1 too
    EXPECT_EQ(verdict(c, kStrict),
              "update_page_shared: page 1 receives new tokens of sequence 0 (page slot 1) and is "
              "also page slot 1 of sequence 1.");
    EXPECT_EQ(rule_of(c, kNative), "OK");  // observed: tpu-inference's validators accept it
    if (d == kV3) {
      Case off = c;
      off.p.update_kv_cache = false;  // nothing is written: reading a page together is fine
      EXPECT_EQ(rule_of(off, kStrict), "OK");
    }
    // One sequence mapping the page it writes at two slots: sequence 1's prefix slot 0 and
    // its written slot 1 both page 4.
    c.in.page_indices.set_int(3, 4);
    c.in.page_indices.set_int(4, 4);
    EXPECT_EQ(verdict(c, kStrict),
              "update_page_shared: page 4 receives new tokens of sequence 1 (page slot 1) and is "
              "also page slot 0 of sequence 1.");
  }
}

TEST(V3Validate, KvLenNearInt32Max) {
  // kv_len 2^31 - 1, page_size 4: cdiv wraps to a negative page count (observed OK natively).
  for (Dialect d : kBoth) {
    const Case c = make(Spec{.d = d, .kv_lens = {2147483647, 3}});
    EXPECT_EQ(rule_of(c, kNative), "OK");
    EXPECT_EQ(rule_of(c, kStrict), "page_count_too_large");
  }
  // Strict bound with an explicit kv block: kv_len + bkv_sz - 1 <= 2^31 - 1.
  Spec s{.q = DType::kBFloat16,
         .kv = DType::kFloat8E4M3FN,
         .T = 1,
         .Hq = 1,
         .Hkv = 1,
         .pages = 1,
         .ps = 16384,
         .N = 1,
         .pps = 65537};
  s.cu = {0, 1};
  s.dist = {0, 0, 1};
  s.kv_lens = {int64_t{1} << 30};
  Case c = make(s);
  c.p.m_block_sizes = V3BlockSizes{1, int64_t{1} << 30, 1, 16384};
  // Every page slot maps the one page: with the fused update the sequence would overwrite
  // tokens it reads (update_page_shared), so the cache is read as given.
  c.p.update_kv_cache = false;
  EXPECT_EQ(rule_of(c, kStrict), "OK");
  c.in.kv_lens.set_int(0, (int64_t{1} << 30) + 1);
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(verdict(c, kStrict),
            "kv_len_overflows_int32: kv_len=1073741825 at sequence 0: kv_len + 1073741824 - 1 "
            "must fit in int32.");
}

TEST(V3Validate, SkipKvMask) {
  Case c = make(Spec{.kv_lens = {8, 4}});
  c.p.use_causal_mask = false;
  c.p.skip_kv_mask = true;
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(verdict(c, kStrict),
            "skip_kv_mask_block_unknown: skip_kv_mask needs d_block_sizes: sequence 0's kv_len "
            "must be a multiple of its bkv_csz.");
  c.p.d_block_sizes = V3BlockSizes{1, 4, 1, 4};
  c.p.m_block_sizes = V3BlockSizes{4, 8, 4, 4};
  EXPECT_EQ(rule_of(c, kStrict), "OK");
  c.p.m_block_sizes = V3BlockSizes{4, 8, 4, 8};
  EXPECT_EQ(rule_of(c, kNative), "OK");
  EXPECT_EQ(verdict(c, kStrict),
            "skip_kv_mask_kv_len: skip_kv_mask: kv_len=4 at sequence 1 must be a multiple of "
            "bkv_csz=8.");
}

TEST(V3Validate, AllListsEveryIndependentFailure) {
  Case c = base(kV3);
  c.p.sliding_window = 0;
  c.p.soft_cap = 0.0;
  c.p.vmem_limit_bytes = -1;
  const auto all = v3_validate_all(kV3, c.in, c.p, kNative);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].rule, V3RuleId::sliding_window_nonpositive);
  EXPECT_EQ(all[1].rule, V3RuleId::soft_cap_zero);
  EXPECT_EQ(all[2].rule, V3RuleId::vmem_limit_nonpositive);
  EXPECT_EQ(v3_validate(kV3, c.in, c.p, kNative), all[0]);
}

TEST(V3Validate, NeverThrowsOnHostileInputs) {
  const int64_t huge = int64_t{1} << 62;
  const int64_t max = std::numeric_limits<int64_t>::max();
  std::vector<Case> cases;
  for (Dialect d : kBoth) {
    Case empty;  // every tensor rank 0
    empty.d = d;
    cases.push_back(empty);
    Case c = base(d);
    c.in.queries = Tensor(DType::kBFloat16, {0, huge, huge});
    c.in.keys = Tensor(DType::kBFloat16, {0, 1, huge});
    c.in.values = c.in.keys;
    c.in.kv_cache = Tensor(DType::kBFloat16, {0, max, max, 2, max});
    cases.push_back(c);
    c = base(d);
    // Zero leading dims: Tensor's element count multiplies left to right.
    c.in.keys = Tensor(DType::kBFloat16, {0, max, 0});
    c.in.values = c.in.keys;
    c.in.queries = Tensor(DType::kBFloat16, {0, max, 0});
    c.in.kv_cache = Tensor(DType::kBFloat16, {0, max, max, 2, 128});
    cases.push_back(c);
    c = make(Spec{.d = d, .ps = 4});
    c.in.kv_cache =
        Tensor(DType::kBFloat16, {0, max, c.in.kv_cache.dim(2), 2, c.in.kv_cache.dim(4)});
    cases.push_back(c);
    for (DType t : {DType::kInt64, DType::kUInt64, DType::kFloat64, DType::kBool,
                    DType::kFloat8E5M2, DType::kUInt8}) {
      c = base(d);
      c.in.kv_lens = dtype_is_integer(t) ? ints({2}, {max, -max}, t) : Tensor(t, {2});
      c.in.cu_q_lens = ints({3}, {-max, max, 7}, DType::kInt64);
      c.in.distribution = ints({3}, {-max, 0, max}, DType::kInt64);
      c.in.kv_cache = Tensor(t, c.in.kv_cache.shape());
      c.in.keys = Tensor(t, c.in.keys.shape());
      c.in.values = c.in.keys;
      c.in.queries = Tensor(t, c.in.queries.shape());
      cases.push_back(c);
    }
    c = base(d);
    c.in.kv_lens = ints({2}, {max, max}, DType::kInt64);
    c.in.page_indices = ints({6}, {-1, max, 0, 0, 0, 0}, DType::kInt64);
    c.in.cu_q_lens = ints({3}, {0, 1, 2}, DType::kInt64);
    c.in.distribution = ints({3}, {0, 0, 2}, DType::kInt64);
    c.p.sliding_window = max;
    c.p.chunk_prefill_size = max;
    c.p.mask_value = -std::numeric_limits<double>::infinity();
    c.p.num_kv_pages_per_block = d == kHd64 ? std::optional<int64_t>(max) : std::nullopt;
    c.p.d_block_sizes = d == kV3 ? std::optional<V3BlockSizes>({max, max, max, max}) : std::nullopt;
    c.p.m_block_sizes =
        d == kV3 ? std::optional<V3BlockSizes>({-max - 1, -max - 1, 1, 4}) : std::nullopt;
    cases.push_back(c);
    c = base(d);
    c.in.distribution = ints({3}, {2, 2, 2});
    c.in.cu_q_lens = ints({3}, {std::numeric_limits<int32_t>::min(), 2147483647, 0});
    c.in.kv_lens = ints({2}, {2147483647, 2147483647});
    cases.push_back(c);
    if (d == kHd64) {
      c = base(d);
      c.in.attention_sink = Tensor(DType::kInt64, {0, 3});
      cases.push_back(c);
      c.in.attention_sink = Tensor(DType::kFloat32, {});
      cases.push_back(c);
    }
  }
  for (const Case& c : cases) {
    for (Mode m : {kNative, kStrict}) {
      for (Dialect d : {c.d, Dialect::kJax}) {
        EXPECT_NO_THROW({
          const auto first = v3_validate(d, c.in, c.p, m);
          const auto all = v3_validate_all(d, c.in, c.p, m);
          EXPECT_EQ(first.has_value(), !all.empty());
          if (first) {
            EXPECT_EQ(*first, all.front());
          }
        });
      }
    }
  }
}

}  // namespace
}  // namespace rpa
