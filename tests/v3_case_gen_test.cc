// Tests of the v3 case generator (casegen/v3_build_case.h, v3_materialize.h): every spec
// replays from its hex, materializes to arrays of the shapes the contract gives
// (v3-contract.md section 1), and is valid in strict mode (validation/v3_validate.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "core/v3_cache_layout.h"
#include "casegen/generate.h"
#include "casegen/v3_generate.h"
#include "casegen/jax_generate.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "validation/v3_validate.h"

namespace rpa::props {
namespace {

std::string failure_text(const std::optional<V3Failure>& f) {
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "accepted";
}

V3BuildOptions options_for(std::string_view profile, Dialect d) {
  const V3GenOptions g = v3_gen_options(d, {.profile = std::string(profile), .head_dim = {}});
  EXPECT_TRUE(g.options.has_value()) << g.error;
  return g.options.value_or(V3BuildOptions{});
}

TEST(V3CaseGen, EverySeededSpecReplaysFromItsHexAndIsStrictValid) {
  int checked = 0;
  for (Dialect d : kV3GenDialects) {
    for (std::string_view profile : {"", "decode", "prefill", "mixed", "long", "edge"}) {
      const V3BuildOptions o = options_for(profile, d);
      for (uint64_t seed = 0; seed < 40; ++seed) {
        const V3CaseSpec spec = seeded_v3_spec(seed, static_cast<int>(seed * 10 % 401), o);
        SCOPED_TRACE(describe(spec));
        const std::optional<V3CaseSpec> back = v3_spec_from_hex(v3_spec_hex(spec));
        ASSERT_TRUE(back.has_value());
        EXPECT_TRUE(*back == spec);
        const V3Materialized m = materialize_v3(spec);
        EXPECT_EQ(failure_text(v3_validate(d, m.inputs, m.params, Mode::kStrict)), "accepted");
        EXPECT_EQ(failure_text(v3_validate(d, m.inputs, m.params, Mode::kJax)), "accepted");
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * 6 * 40);
}

TEST(V3CaseGen, SameSeedSameBytes) {
  const V3BuildOptions o = options_for("", Dialect::kTpuInferenceV3);
  const V3Materialized a = materialize_v3(seeded_v3_spec(7, 100, o));
  const V3Materialized b = materialize_v3(seeded_v3_spec(7, 100, o));
  EXPECT_EQ(a.inputs, b.inputs);
}

// Shapes as v3-contract.md section 1 gives them, for one hand-built spec: 2 sequences
// (decode 1/5, mixed 3/3) on bfloat16 KV (packing 2), Hkv 3, D 80, page_size 4.
TEST(V3CaseGen, MaterializesTheContractShapes) {
  V3CaseSpec s;
  s.dialect = Dialect::kTpuInferenceV3;
  s.q_dtype = DType::kBFloat16;
  s.kv_dtype = DType::kBFloat16;
  s.num_kv_heads = 3;
  s.q_per_kv = 2;
  s.head_dim = 80;
  s.page_size = 4;
  s.seqs = {{.q_len = 1, .kv_len = 5}, {.q_len = 3, .kv_len = 3}};
  s.num_decode = 1;
  s.extra_seq_slots = 2;
  s.extra_page_slots = 1;
  s.extra_pages = 2;
  s.extra_tokens = 3;
  s.params.update_kv_cache = false;
  const V3Materialized m = materialize_v3(s);
  // T = 1 + 3 + 3; N = 2 + 2; pps = cdiv(5, 4) + 1; pages = 2 + 1 + 2.
  EXPECT_EQ(m.inputs.queries.shape(), (Shape{7, 6, 80}));
  EXPECT_EQ(m.inputs.keys.shape(), (Shape{7, 3, 80}));
  // get_kv_cache_shape(5, 4, 3, 80, bf16) = (5, 4, align(6, 2) / 2, 2, 128).
  EXPECT_EQ(m.inputs.kv_cache.shape(), (Shape{5, 4, 3, 2, 128}));
  EXPECT_EQ(m.inputs.kv_lens.numel(), 4);
  EXPECT_EQ(m.inputs.page_indices.numel(), 4 * 3);
  EXPECT_EQ(m.inputs.cu_q_lens.int_at(1), 1);
  EXPECT_EQ(m.inputs.cu_q_lens.int_at(2), 4);
  EXPECT_EQ(m.inputs.distribution.int_at(0), 1);
  EXPECT_EQ(m.inputs.distribution.int_at(1), 1);
  EXPECT_EQ(m.inputs.distribution.int_at(2), 2);
  // update_kv_cache=False: sequence 1's three tokens are its own keys rows 1..3, K of head
  // h at lanes [2h * 128, 2h * 128 + 80) of the token record (K0, V0, K1, V1, ...).
  const V3CacheLayout layout(s.dialect, s.kv_dtype, 3, 80);
  const int64_t page = m.inputs.page_indices.int_at(3);
  for (int64_t pos = 0; pos < 3; ++pos) {
    const int64_t base = layout.token_offset(page, pos, 4);
    EXPECT_EQ(m.inputs.kv_cache.float_at(base + 2 * 128 + 7),
              m.inputs.keys.float_at(((1 + pos) * 3 + 1) * 80 + 7));
    EXPECT_EQ(m.inputs.kv_cache.float_at(base + 5 * 128 + 79),
              m.inputs.values.float_at(((1 + pos) * 3 + 2) * 80 + 79));
    EXPECT_EQ(m.inputs.kv_cache.float_at(base + 5 * 128 + 80), 0.0);  // padded lane
  }
  // Garbage: rows past the 4 used ones are NaN.
  EXPECT_TRUE(std::isnan(m.inputs.queries.float_at(4 * 6 * 80)));
}

TEST(V3CaseGen, ReachesTheShapesTheBriefAsksFor) {
  std::set<std::string> seen;
  for (Dialect d : kV3GenDialects) {
    const V3BuildOptions o = options_for("", d);
    for (uint64_t seed = 0; seed < 400; ++seed) {
      const V3CaseSpec s = seeded_v3_spec(seed, 100, o);
      const int64_t n = s.num_seqs(), i = s.num_decode, j = i + s.num_prefill;
      if (n == 0) seen.insert("empty");
      if (n > 0 && i == n) seen.insert("decode only");
      if (n > 0 && i == 0 && j == n) seen.insert("prefill range only");
      if (n > 0 && i > 0 && i == j && j < n) seen.insert("vllm [d, d, n]");
      if (i > 0 && j > i && n > j) seen.insert("all three ranges");
      if (s.num_kv_heads % 2 == 1 && s.num_kv_heads > 1) seen.insert("odd Hkv");
      if (s.q_per_kv == 1) seen.insert("Hq == Hkv");
      if (s.page_size == v3_kv_packing(s.kv_dtype)) seen.insert("page_size == packing");
      if (!s.params.use_causal_mask) seen.insert("non-causal");
      if (s.params.skip_kv_mask) seen.insert("skip_kv_mask");
      if (!s.params.update_kv_cache) seen.insert("kv share");
      if (s.sink == V3Sink::kWithInfs) seen.insert("sink with -inf");
      if (s.page_shuffle_seed != 0) seen.insert("shuffled pages");
      if (s.kv_dtype == DType::kFloat8E5M2 && s.q_dtype == DType::kBFloat16) {
        seen.insert("bf16 q fp8 kv");
      }
      for (const V3SeqSpec& q : s.seqs) {
        if (q.q_len == q.kv_len && q.q_len > 1) seen.insert("q_len == kv_len");
      }
    }
  }
  for (const char* want :
       {"empty", "decode only", "prefill range only", "vllm [d, d, n]", "all three ranges",
        "odd Hkv", "Hq == Hkv", "page_size == packing", "non-causal", "skip_kv_mask", "kv share",
        "sink with -inf", "shuffled pages", "bf16 q fp8 kv", "q_len == kv_len"}) {
    EXPECT_TRUE(seen.contains(want)) << want;
  }
}

TEST(V3CaseGen, HexRefusesTruncatedPaddedAndJaxSpecs) {
  const V3CaseSpec spec = seeded_v3_spec(3, 100, options_for("mixed", Dialect::kTpuInferenceV3));
  const std::string hex = v3_spec_hex(spec);
  ASSERT_TRUE(hex.starts_with("v3:"));
  EXPECT_FALSE(v3_spec_from_hex(hex.substr(0, hex.size() - 2)).has_value());
  EXPECT_FALSE(v3_spec_from_hex(hex + "00").has_value());
  EXPECT_FALSE(v3_spec_from_hex(hex.substr(3)).has_value());
  EXPECT_FALSE(v3_spec_from_hex("v3:zz").has_value());
}

// The long tier (profile long32k, issue 46): every sequence of kv_len 32768 to 65536, so
// every position past int16's range and kernel.py's positions int32 (pages_per_seq *
// page_size > 32767); one or two KV heads; valid in both modes; past the codec's bounds, so
// it does not encode (its case file replays it).
TEST(V3CaseGen, LongTierDrawsKvLenPastInt16InValidCalls) {
  std::set<int64_t> page_mults;
  int64_t shortest = kV3MaxTierKvLen, longest = 0;
  for (Dialect d : kV3GenDialects) {
    const V3BuildOptions o = options_for("long32k", d);
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const V3CaseSpec spec = seeded_v3_spec(seed, 100, o);
      SCOPED_TRACE(describe(spec));
      ASSERT_GE(spec.num_seqs(), 1);
      ASSERT_LE(spec.num_seqs(), 2);
      for (const V3SeqSpec& q : spec.seqs) {
        shortest = std::min(shortest, q.kv_len);
        longest = std::max(longest, q.kv_len);
      }
      EXPECT_LE(spec.num_kv_heads, 2);
      EXPECT_GT(spec.pages_per_seq() * spec.page_size, 32767);
      EXPECT_FALSE(v3_spec_encodes(spec));
      page_mults.insert(spec.page_size / v3_kv_packing(spec.kv_dtype));
      const V3Materialized m = materialize_v3(spec, Contents::kZeros);
      EXPECT_EQ(failure_text(v3_validate(d, m.inputs, m.params, Mode::kStrict)), "accepted");
      EXPECT_EQ(failure_text(v3_validate(d, m.inputs, m.params, Mode::kJax)), "accepted");
    }
  }
  EXPECT_GE(shortest, kV3MinTierKvLen);
  EXPECT_LE(longest, kV3MaxTierKvLen);
  EXPECT_GT(longest, 40000);  // drawn across the range, not pinned at its floor
  EXPECT_GT(*page_mults.rbegin(), kV3MaxPageMultiple);  // pages past the short calls' 8x
}

TEST(V3CaseGen, OptionErrors) {
  EXPECT_EQ(v3_gen_options(Dialect::kTpuInferenceV3, {.profile = "huge", .head_dim = {}}).error,
            "profile takes decode, prefill, mixed, long, long32k, edge or production (got 'huge')");
  EXPECT_EQ(v3_gen_options(Dialect::kTpuInferenceV3Hd64, {.profile = "", .head_dim = 128}).error,
            "head_dim takes 64 alone with dialect tpu_inference_v3_hd64 (got 128)");
  EXPECT_EQ(v3_gen_options(Dialect::kTpuInferenceV3, {.profile = "long", .head_dim = 256}).error,
            "head_dim takes 1 to 128 with profile long (got 256)");
  EXPECT_TRUE(v3_gen_options(Dialect::kTpuInferenceV3, {.profile = "", .head_dim = 256}).options);
  // The long tier: v3 only, and a kv_len bound narrows it from 32768 up only.
  EXPECT_EQ(gen_options({.profile = "long32k", .head_dim = {}}).error,
            "profile long32k takes the v3 dialects (JAX's kernel: profile long, kv_len up to 8192)");
  const GenRequest tier{.profile = "long32k", .head_dim = {}};
  EXPECT_EQ(v3_strategy_options(Dialect::kTpuInferenceV3, tier, {.max_kv_len = 64}).error,
            "max_kv_len takes 32768 or more with profile long32k (got 64)");
  EXPECT_EQ(v3_strategy_options(Dialect::kTpuInferenceV3, tier, {.max_kv_len = 32767}).error,
            "max_kv_len takes 32768 or more with profile long32k (got 32767)");
  const V3GenOptions narrowed =
      v3_strategy_options(Dialect::kTpuInferenceV3, tier, {.max_kv_len = 32768});
  ASSERT_TRUE(narrowed.options) << narrowed.error;
  EXPECT_EQ(narrowed.options->max_kv_len, 32768);
  EXPECT_EQ(v3_strategy_options(Dialect::kTpuInferenceV3, tier, {}).options->max_kv_len,
            kV3MaxTierKvLen);
}

}  // namespace
}  // namespace rpa::props

// Found by the long property budget (V3Validation.BothModesMatchSpecModel, seed
// 9273807819327627684, max_size 400): sequence 0's masked block (a mask_value of -FLT_MAX
// rounds to -inf in bfloat16 under sliding_window=1) is what strict mode reports, ahead of
// sequence 1's page index out of range, because the validator walks the sequences and checks
// each one's rules before the next's. The spec model ranked masked_block_overflows by its rule
// alone, after every page rule of any sequence.
TEST(V3CaseGen, AMaskedBlockAtSequenceZeroComesBeforeAPageOutOfRangeAtSequenceOne) {
  const std::optional<rpa::props::V3CaseSpec> spec = rpa::props::v3_spec_from_hex(
      "v3:00020101ef0003010102070100070007000700000007000700000100020000000001000100000000000000010000000000000000");
  ASSERT_TRUE(spec.has_value());
  const std::vector<rpa::props::V3Mutation> mutations = {
      {rpa::props::V3MutationKind::page_index_out_of_range, 4},
      {rpa::props::V3MutationKind::mask_value_nonfinite, 149}};
  ASSERT_TRUE(rpa::props::v3_mutations_compose(*spec, mutations));
  const std::optional<rpa::V3Failure> f =
      rpa::props::expected_v3_failure(*spec, mutations, rpa::Mode::kStrict);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, rpa::V3RuleId::masked_block_overflows) << f->message;
  std::string why;
  EXPECT_TRUE(rpa::props::check_v3_validation(*spec, mutations, &why)) << why;
}
