// Tests of the production profile (casegen/production.h): every recipe replays from its
// prod: hex and keeps its memory and work bounds; every item of the reach catalog (models,
// head dims, dtypes, page sizes, max_model_len, slots, budgets, batch mixes, long contexts,
// windows, soft caps, sinks, float8 scales, integer edges) is drawn within a few thousand
// seeds; and production calls of each dialect are strict-valid, and the tiled kernel agrees
// with the dense reference on them (the v3 ones through the literal schedule too).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "casegen/generate.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_mutation.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/v3_production.h"
#include "casegen/jax_production.h"
#include "casegen/production_reach.h"
#include "properties/sanitized.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "reference/jax_reference.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa::props {
namespace {

constexpr Dialect kDialects[] = {Dialect::kJax, Dialect::kTpuInferenceV3,
                                 Dialect::kTpuInferenceV3Hd64};

// memory_bytes() is what the bounds are kept against, so it must be what materializing the
// call holds (held_bytes: the arrays' nbytes, its output added); a formula checked only
// against itself is no bound. fuzz_validate ran out of its 512 MB allocation limit on an hd64 float8 call that
// memory_bytes() put at 174 MiB: hd64 packs each kv head's K and V into 128 lanes and pads
// the heads to the packing, so its cache was 692 MiB
// (corpus/fuzz/fuzz_validate/regression-prod-hd64-float8-cache-oom).
TEST(Production, MemoryBytesIsWhatMaterializingAllocates) {
  int checked_v3_float8 = 0, checked = 0;
  for (Dialect d : kDialects) {
    int of_dialect = 0;
    for (uint64_t seed = 0; seed < 800 && of_dialect < 120; ++seed) {
      const ProductionSpec s = seeded_production_spec(seed, d);
      // Materializing costs time and memory: the small calls are enough, the formula is one.
      if (s.memory_bytes() > (int64_t{48} << 20)) continue;
      SCOPED_TRACE(describe(s));
      int64_t got = 0;
      if (d == Dialect::kJax) {
        got = held_bytes(materialize(production_case(s), Contents::kZeros).inputs);
      } else {
        got = held_bytes(materialize_v3(production_v3_case(s), Contents::kZeros).inputs);
        checked_v3_float8 += dtype_size(s.kv_dtype) == 1;
      }
      EXPECT_LE(std::abs(got - s.memory_bytes()), memory_bytes_slack(s))
          << "materialized " << got << " bytes, memory_bytes() " << s.memory_bytes();
      ++checked;
      ++of_dialect;
    }
    EXPECT_GE(of_dialect, 100) << dialect_name(d);
  }
  EXPECT_GE(checked, 300);
  EXPECT_GE(checked_v3_float8, 10);
}

TEST(Production, EveryRecipeReplaysFromItsHexAndKeepsItsBounds) {
  for (Dialect d : kDialects) {
    for (uint64_t seed = 0; seed < 300; ++seed) {
      const ProductionSpec s = seeded_production_spec(seed, d);
      SCOPED_TRACE(describe(s));
      const std::optional<ProductionSpec> back = production_spec_from_hex(production_spec_hex(s));
      ASSERT_TRUE(back.has_value());
      EXPECT_TRUE(*back == s);
      EXPECT_LE(s.memory_bytes(), kProductionMemoryBytes);
      EXPECT_LE(s.macs(), kProductionMacs);
      ASSERT_FALSE(s.seqs.empty());
      EXPECT_LE(static_cast<int64_t>(s.seqs.size()), s.max_num_seqs);
      EXPECT_GE(s.max_num_seqs, kProductionMinSeqs);
      EXPECT_LE(s.max_num_seqs, kProductionMaxSeqs);
      EXPECT_LE(s.total_q_len(), s.padded_tokens());
      EXPECT_LE(s.padded_tokens(), s.token_budget);
      EXPECT_GE(s.pages_per_seq() * s.page_size, s.max_model_len);
      // Key + window stays inside the type the program holds it in (findings 25 and 26).
      if (s.sliding_window) {
        const int64_t last = s.max_kv_len() - 1 + *s.sliding_window;
        EXPECT_LE(last, production_int16_positions(s) ? 32767 : 2147483647);
      }
      for (const SeqSpec& q : s.seqs) {
        EXPECT_GE(q.q_len, 1);
        EXPECT_LE(q.q_len, q.kv_len);
        EXPECT_LE(q.kv_len, s.max_model_len);
      }
    }
  }
  // A truncated hex is refused, not read as another call.
  const std::string hex = production_spec_hex(seeded_production_spec(1, Dialect::kJax));
  EXPECT_FALSE(production_spec_from_hex(hex.substr(0, hex.size() - 2)));
  EXPECT_FALSE(production_spec_from_hex(hex.substr(5)));
}

// Every recipe is a strict-valid call (v3: in both modes; jax mode gives the spec model's
// verdict), validated on its arrays materialized with zeros (validation reads no data; the
// zeroing of up to 256 MiB a call is the cost, so 120 recipes a dialect).
// fuzz_validate found a kernel.py window edge that strict window_skips_cache_write rightly
// rejects (corpus/fuzz/fuzz_validate/regression-prod-v3-window-skips-cache-write); the
// generator now drops such windows.
TEST(Production, EveryRecipeIsStrictValid) {
  const int recipes = kSanitized ? 30 : 120;
  for (Dialect d : kDialects) {
    for (uint64_t seed = 0; seed < static_cast<uint64_t>(recipes); ++seed) {
      const ProductionSpec s = seeded_production_spec(seed, d);
      SCOPED_TRACE(describe(s) + "\n  spec: " + production_spec_hex(s));
      EXPECT_FALSE(production_window_skips_cache_write(s));
      if (d == Dialect::kJax) {
        // jax mode is JAX's validators and its Pallas program's (head_dim 64 does not trace):
        // the spec model's verdict.
        const Materialized m = materialize(production_case(s), Contents::kZeros);
        const std::optional<Failure> f = validate(m.inputs, m.params, {.mode = Mode::kStrict});
        EXPECT_FALSE(f) << "strict: " << f->message;
        EXPECT_EQ(validate(m.inputs, m.params, {.mode = Mode::kJax}), expected_failure(m, Mode::kJax));
        continue;
      }
      const V3Materialized m = materialize_v3(production_v3_case(s), Contents::kZeros);
      for (Mode mode : {Mode::kStrict, Mode::kJax}) {
        const std::optional<V3Failure> f = v3_validate(d, m.inputs, m.params, mode);
        EXPECT_FALSE(f) << (mode == Mode::kJax ? "native" : "strict") << ": " << f->message;
      }
    }
  }
}

// production_window_skips_cache_write is strict window_skips_cache_write's verdict on the call:
// small windows set on kernel.py recipes (at most 64 MiB) are rejected exactly where it says.
TEST(Production, TheDroppedWindowsAreTheOnesStrictRejects) {
  int skips = 0, keeps = 0;
  for (uint64_t seed = 0; seed < (kSanitized ? 200u : 600u); ++seed) {
    const ProductionSpec base = seeded_production_spec(seed, Dialect::kTpuInferenceV3);
    if (base.memory_bytes() > (int64_t{64} << 20)) continue;
    for (int64_t w : {1, 15, 128, 512}) {
      ProductionSpec s = base;
      s.sliding_window = w;
      // Only windows inside the int16 positions' range (else window_int16_wraps comes first).
      if (production_int16_positions(s) && s.max_kv_len() - 1 + w > 32767) continue;
      SCOPED_TRACE(describe(s));
      const V3Materialized m = materialize_v3(production_v3_case(s), Contents::kZeros);
      const std::optional<V3Failure> f =
          v3_validate(Dialect::kTpuInferenceV3, m.inputs, m.params, Mode::kStrict);
      const bool skip = production_window_skips_cache_write(s);
      EXPECT_EQ(f.has_value(), skip) << (f ? f->message : "valid");
      if (f) {
        EXPECT_EQ(f->rule, V3RuleId::window_skips_cache_write) << f->message;
      }
      (skip ? skips : keeps) += 1;
    }
  }
  std::printf("windows strict rejects: %d, keeps: %d\n", skips, keeps);
  EXPECT_GT(skips, kSanitized ? 0 : 5);
  EXPECT_GT(keeps, 5);
}

// The reach table at the generator: how often each catalog item is drawn over 3000 seeds of
// each dialect (printed), and none of them never.
TEST(Production, EveryCatalogItemIsReached) {
  ProductionReach reach;
  for (Dialect d : kDialects) {
    for (uint64_t seed = 0; seed < 3000; ++seed) reach.add(seeded_production_spec(seed, d));
  }
  std::printf("%s", reach.text("").c_str());
  EXPECT_EQ(reach.by_dialect().size(), 3u);
  for (const auto& [d, r] : reach.by_dialect()) {
    EXPECT_EQ(r.calls, 3000);
    EXPECT_EQ(r.longest_kv_len, 131072) << d;
  }
  for (const std::string& item : reach.never_reached()) ADD_FAILURE() << item << " never drawn";
}

// Every named v3 mutation that applies, with four args each, on small production calls of
// both v3 dialects (kernel.py's leave their block sizes to the defaults, which the
// generator's calls never do): both modes give the v3 spec model's verdict. Found by
// ProductionProps: page_size_zero on such a call is tpu-inference's AssertionError (cdiv),
// not the ZeroDivisionError of a named tuple.
TEST(Production, EveryV3MutationMatchesTheSpecModelOnAProductionCall) {
  for (Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    for (uint64_t seed : {0, 21}) {
      const V3CaseSpec c = production_v3_case(seeded_production_spec(seed, d));
      const V3Materialized m = materialize_v3(c);
      int checked = 0;
      for (V3MutationKind k : all_v3_mutation_kinds()) {
        if (!v3_mutation_applies(k, c)) continue;
        for (int64_t arg : {0, 1, 2, 22478}) {
          const V3Mutation mutation{k, arg};
          V3MutatedCase mutated{m, {}};
          apply_v3_mutation(mutation, c, mutated.call, mutated.declared);
          std::string why;
          EXPECT_TRUE(check_v3_mutated(c, std::span<const V3Mutation>(&mutation, 1), mutated, &why))
              << why;
          ++checked;
        }
      }
      EXPECT_GT(checked, 100) << dialect_name(d);
    }
  }
}

// The same for every named jax mutation on small jax production calls: both modes give the
// spec model's verdict.
TEST(Production, EveryJaxMutationMatchesTheSpecModelOnAProductionCall) {
  for (uint64_t seed : {0, 21}) {
    CaseSpec c = production_case(seeded_production_spec(seed, Dialect::kJax));
    const Materialized m = materialize(c);
    int checked = 0;
    for (MutationKind k : all_mutation_kinds()) {
      if (!mutation_applies(k, c)) continue;
      for (int64_t arg : {0, 1, 2, 22478}) {
        c.mutations = {{k, arg}};
        Materialized mutated = m;
        apply_mutations(c, mutated);
        for (Mode mode : {Mode::kStrict, Mode::kJax}) {
          const std::optional<Failure> want = expected_failure(mutated, mode);
          const std::optional<Failure> got = validate(mutated.inputs, mutated.params, {.mode = mode});
          EXPECT_EQ(got, want) << mutation_name(k) << "(" << arg << "), " << mode_name(mode)
                               << ": spec model " << verdict_text(want) << ", validate "
                               << verdict_text(got);
        }
        ++checked;
      }
    }
    EXPECT_GT(checked, 100);
  }
}

// A production call of each dialect: accepted by strict mode, and the tiled kernel within
// the tolerance of the dense reference (kernel semantics); v3 also the literal schedule on
// TPU v6 within its tolerance. Seeds chosen to cover a decode-heavy batch, a chunked
// prefill, a float8 cache and an integer edge between them (the descriptions are printed).
void check_jax(uint64_t seed) {
  const ProductionSpec s = seeded_production_spec(seed, Dialect::kJax);
  SCOPED_TRACE(describe(s));
  const Materialized m = materialize(production_case(s));
  const std::optional<Failure> f = validate(m.inputs, m.params, {.mode = Mode::kStrict});
  ASSERT_FALSE(f) << f->message;
  const Tensor out = tiled_attention(m.inputs, m.params, {.threads = 2});
  const ReferenceResult ref = dense_reference(m.inputs, m.params, Semantics::kKernel);
  const Comparison c = compare_outputs(out, ref.out, kv_view(m.inputs),
                                       tolerance_for_case(m.inputs, m.params, ref));
  EXPECT_TRUE(c.agree()) << describe_mismatch(c);
}

void check_v3(Dialect d, uint64_t seed) {
  const ProductionSpec s = seeded_production_spec(seed, d);
  SCOPED_TRACE(describe(s));
  const V3Materialized m = materialize_v3(production_v3_case(s));
  const std::optional<V3Failure> f = v3_validate(d, m.inputs, m.params, Mode::kStrict);
  ASSERT_FALSE(f) << f->message;
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  const V3KernelResult got = v3_tiled_attention(d, m.inputs, m.params, {.threads = 2});
  const V3Comparison c = v3_compare(d, m.inputs, m.params, ref, got.out, got.kv_cache,
                                    {.float32_accumulators = true});
  EXPECT_TRUE(c.agree()) << describe_v3_comparison(c);
  const V3KernelResult literal = v3_literal_attention(d, m.inputs, m.params, {.tpu_version = 6});
  const V3Comparison l = v3_compare(d, m.inputs, m.params, ref, literal.out, literal.kv_cache);
  EXPECT_TRUE(l.agree()) << describe_v3_comparison(l);
}

// Under the sanitizers only the small calls run (the large ones are for answers, and take
// minutes there); the release build runs both.

// Seed 0: a small batch; the others: jax 1 (251 MiB, an int32 window edge), kernel.py 6
// (an int16 window edge at 32767), hd64 8 (decodes with sinks).
TEST(ProductionAgreement, Jax) {
  check_jax(0);
  if (!kSanitized) check_jax(1);
}
TEST(ProductionAgreement, TpuInferenceV3) {
  check_v3(Dialect::kTpuInferenceV3, 0);
  if (!kSanitized) check_v3(Dialect::kTpuInferenceV3, 6);
}
TEST(ProductionAgreement, TpuInferenceV3Hd64) {
  check_v3(Dialect::kTpuInferenceV3Hd64, 0);
  if (!kSanitized) check_v3(Dialect::kTpuInferenceV3Hd64, 8);
}

}  // namespace
}  // namespace rpa::props
