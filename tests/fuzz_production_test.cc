// fuzz_validate's production part (harness/target_inputs.h: kProductionTag): the decoder reaches
// every dialect and its mutations from arbitrary bytes, round-trips, and the target's check
// holds on production calls up to the profile's 256 MiB; materializing with zeros gives the
// same index arrays and the same verdicts as with data (validation reads no data).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "harness/jax_target_inputs.h"
#include "harness/target_inputs.h"
#include "harness/v3_target_inputs.h"
#include "harness/targets.h"
#include "casegen/generate.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/v3_production.h"
#include "casegen/jax_production.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "schedule/v3_block_sizes.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa::fuzz {
namespace {

// A production payload decoded by the family its dialect picks (production_dialect): the
// recipe and that family's mutations (the other family's list empty), and its encoding.
struct ProductionValidateInput {
  props::ProductionSpec spec;
  std::vector<props::MutationSpec> mutations;   // a jax call's
  std::vector<props::V3Mutation> v3_mutations;  // a v3 call's
};

ProductionValidateInput decode_production_validate(std::span<const uint8_t> payload) {
  if (production_dialect(payload) == Dialect::kJax) {
    const JaxProductionInput v = decode_jax_production(payload);
    return {v.spec, v.mutations, {}};
  }
  const V3ProductionInput v = decode_v3_production(payload);
  return {v.spec, {}, v.mutations};
}

std::vector<uint8_t> encode_production_validate(const ProductionValidateInput& v) {
  return v.spec.dialect == Dialect::kJax ? encode_jax_production({v.spec, v.mutations})
                                         : encode_v3_production({v.spec, v.v3_mutations});
}

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

TEST(FuzzProduction, TheTagSelectsTheProductionPartAndNothingElse) {
  const std::vector<uint8_t> tagged = {'P', 'R', 1, 2};
  ASSERT_TRUE(production_payload(tagged));
  EXPECT_EQ(production_payload(tagged)->size(), 2u);
  EXPECT_FALSE(production_payload(std::vector<uint8_t>{'P'}));
  EXPECT_FALSE(production_payload(std::vector<uint8_t>{'P', 'Q', 1}));
  EXPECT_FALSE(production_payload(std::vector<uint8_t>{'V', '3', 1}));
  EXPECT_FALSE(v3_payload(tagged));
}

TEST(FuzzProduction, RandomBytesReachEveryDialectAndMutationsAndRoundTrip) {
  std::mt19937_64 rng(33);
  std::set<Dialect> dialects;
  int jax_mutated = 0, v3_mutated = 0, edges = 0;
  for (int i = 0; i < 600; ++i) {
    const std::vector<uint8_t> bytes = random_bytes(rng, 16 + static_cast<size_t>(rng() % 200));
    const ProductionValidateInput v = decode_production_validate(bytes);
    dialects.insert(v.spec.dialect);
    EXPECT_EQ(v.spec.dialect, production_dialect(bytes));
    jax_mutated += !v.mutations.empty();
    v3_mutated += !v.v3_mutations.empty();
    edges += v.spec.edge != props::ProductionEdge::kNone;
    EXPECT_LE(v.spec.memory_bytes(), props::kProductionMemoryBytes);
    EXPECT_LE(v.spec.macs(), props::kProductionMacs);
    EXPECT_TRUE(v.spec.dialect == Dialect::kJax ? v.v3_mutations.empty() : v.mutations.empty());
    const ProductionValidateInput w =
        decode_production_validate(*production_payload(encode_production_validate(v)));
    EXPECT_EQ(w.spec, v.spec);
    EXPECT_EQ(w.mutations, v.mutations);
    EXPECT_EQ(w.v3_mutations, v.v3_mutations);
  }
  EXPECT_EQ(dialects.size(), 3u);
  EXPECT_GT(jax_mutated, 20);
  EXPECT_GT(v3_mutated, 40);
  EXPECT_GT(edges, 20);
}

// Shape mutations reallocate arrays up to 32 times larger: only calls of at most
// kProductionShapeMutationBytes draw them (fuzz_validate ran out of its 512 MB allocation
// limit on rows_not_computed of a larger jax call: corpus/fuzz/fuzz_validate/
// regression-prod-jax-shape-mutation-oom).
TEST(FuzzProduction, OnlySmallCallsDrawShapeMutations) {
  std::mt19937_64 rng(34);
  int large_mutated = 0, small_shape = 0;
  for (int i = 0; i < 6000; ++i) {
    const ProductionValidateInput v = decode_production_validate(random_bytes(rng, 24 + static_cast<size_t>(rng() % 200)));
    const bool small = v.spec.memory_bytes() <= kProductionShapeMutationBytes;
    for (const props::MutationSpec& m : v.mutations) {
      const bool shape = props::mutation_group(m.kind) == props::MutationGroup::kShape;
      EXPECT_TRUE(small || !shape) << props::mutation_name(m.kind);
      small_shape += small && shape;
      large_mutated += !small;
    }
    for (const props::V3Mutation& m : v.v3_mutations) {
      const bool shape = props::v3_mutation_group(m.kind) == props::V3MutationGroup::kShape;
      EXPECT_TRUE(small || !shape) << props::v3_mutation_name(m.kind);
      small_shape += small && shape;
      large_mutated += !small;
    }
  }
  EXPECT_GT(large_mutated, 20);  // large calls still draw parameter mutations
  EXPECT_GT(small_shape, 5);     // and small ones shape mutations
}

// What the target checks, on the largest recipes too: it aborts on a disagreement.
TEST(FuzzProduction, TheTargetHoldsOnProductionCallsOfEveryDialect) {
  for (Dialect d : {Dialect::kJax, Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    // seed 7 / 409 / 1460: the largest arrays of the first 1500 recipes (255 MiB or more).
    for (uint64_t seed : {uint64_t{0}, uint64_t{3}, d == Dialect::kJax ? uint64_t{7}
                                                    : d == Dialect::kTpuInferenceV3 ? uint64_t{409}
                                                                                     : uint64_t{1460}}) {
      ProductionValidateInput v{props::seeded_production_spec(seed, d), {}, {}};
      SCOPED_TRACE(props::describe(v.spec));
      const std::vector<uint8_t> valid = encode_production_validate(v);
      EXPECT_EQ(fuzz_validate(valid.data(), valid.size()), 0);
      // The first mutation the decoder may draw on the call (a shape one only on small calls).
      const bool small = v.spec.memory_bytes() <= kProductionShapeMutationBytes;
      if (d == Dialect::kJax) {
        const props::CaseSpec c = props::production_case(v.spec);
        for (props::MutationKind k : props::all_mutation_kinds()) {
          if (props::mutation_applies(k, c) &&
              (small || props::mutation_group(k) != props::MutationGroup::kShape)) {
            v.mutations.push_back({k, 2});
            break;
          }
        }
      } else {
        const props::V3CaseSpec c = props::production_v3_case(v.spec);
        for (props::V3MutationKind k : v3_mutation_choices(c, {})) {
          if (small || props::v3_mutation_group(k) != props::V3MutationGroup::kShape) {
            v.v3_mutations = {{k, 3}};
          }
        }
      }
      ASSERT_EQ(v.mutations.size() + v.v3_mutations.size(), 1u);
      const ProductionValidateInput back = decode_production_validate(*production_payload(encode_production_validate(v)));
      ASSERT_EQ(back.mutations, v.mutations);
      ASSERT_EQ(back.v3_mutations, v.v3_mutations);
      const std::vector<uint8_t> mutated = encode_production_validate(v);
      EXPECT_EQ(fuzz_validate(mutated.data(), mutated.size()), 0);
    }
  }
}

// The zeros the target materializes: the same index arrays and keywords as the data, and so
// the same verdict in both modes, with every v3 mutation that applies to a small call.
TEST(FuzzProduction, ZerosGiveTheSameVerdictsAsData) {
  for (Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    const props::V3CaseSpec c = props::production_v3_case(props::seeded_production_spec(0, d));
    const props::V3Materialized data = props::materialize_v3(c);
    const props::V3Materialized zeros = props::materialize_v3(c, props::Contents::kZeros);
    EXPECT_EQ(zeros.inputs.kv_lens, data.inputs.kv_lens);
    EXPECT_EQ(zeros.inputs.page_indices, data.inputs.page_indices);
    EXPECT_EQ(zeros.inputs.cu_q_lens, data.inputs.cu_q_lens);
    EXPECT_EQ(zeros.inputs.distribution, data.inputs.distribution);
    EXPECT_EQ(zeros.inputs.queries.shape(), data.inputs.queries.shape());
    EXPECT_EQ(zeros.inputs.kv_cache.shape(), data.inputs.kv_cache.shape());
    EXPECT_EQ(zeros.inputs.attention_sink.has_value(), data.inputs.attention_sink.has_value());
    int checked = 0;
    for (props::V3MutationKind k : v3_mutation_choices(c, {})) {
      props::V3MutatedCase a{data, {}}, b{zeros, {}};
      props::apply_v3_mutation({k, 1}, c, a.call, a.declared);
      props::apply_v3_mutation({k, 1}, c, b.call, b.declared);
      for (Mode mode : {Mode::kStrict, Mode::kJax}) {
        EXPECT_EQ(v3_validate(d, b.call.inputs, b.call.params, mode),
                  v3_validate(d, a.call.inputs, a.call.params, mode))
            << props::v3_mutation_name(k);
      }
      ++checked;
    }
    EXPECT_GT(checked, 30);
  }
}

}  // namespace
// Regression (fuzz_validate, 180 s of ASan fuzzing after issue 36; corpus/fuzz/fuzz_validate/
// regression-prod-v3-window-rules-on-64bit-cache): a kernel.py production call with a sliding
// window whose kv_dtype_unsupported mutation left a 64-bit cache, then chunk_prefill_nonpositive:
// the spec model's window rules, declared again after each mutation, asked for kernel.py's
// default block sizes, whose arithmetic divided by the cache's packing, 0 values a 32-bit word
// (UBSan: division by zero in v3_align). The defaults are now nullopt for such a
// cache, as for any shape they cannot be computed from.
TEST(FuzzProduction, WindowRulesOnASixtyFourBitCacheDoNotDivideByItsPacking) {
  const std::vector<uint8_t> bytes = {
      0x50, 0x52, 0x01, 0x07, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x00,
      0x00, 0x40, 0x0b, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff, 0x01, 0x0f, 0x00, 0xe8, 0x3b, 0x01, 0x00,
      0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e,
      0x9e, 0xe5, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x02, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f,
      0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x4f, 0x3a, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e, 0x9e,
      0x9e, 0x9e, 0x9e, 0x9e, 0x00, 0x03, 0xc3, 0x01, 0x82, 0x00, 0xec, 0xf7, 0x6c, 0x47, 0x00};
  const ProductionValidateInput v = decode_production_validate(*production_payload(bytes));
  ASSERT_EQ(v.spec.dialect, Dialect::kTpuInferenceV3);
  ASSERT_EQ(v.v3_mutations.size(), 2u);
  EXPECT_EQ(props::describe_v3_mutations(v.v3_mutations),
            "kv_dtype_unsupported(14), chunk_prefill_nonpositive(14)");
  EXPECT_EQ(fuzz_validate(bytes.data(), bytes.size()), 0);
  for (DType wide : {DType::kFloat64, DType::kInt64}) {
    EXPECT_FALSE(v3_default_block_sizes({.kv_dtype = wide}, V3Pass::kMixed, 6));
  }
  EXPECT_TRUE(v3_default_block_sizes({.kv_dtype = DType::kBFloat16}, V3Pass::kMixed, 6));
}

// Regression (fuzz_validate, 10 minutes of ASan fuzzing after issue 37; corpus/fuzz/
// fuzz_validate/regression-prod-v3-edge-pages-taken-by-chunks): a kernel.py production call at
// the int16_window_at edge (llama-3.1-405b, 167 sequences, the edge's sequence of 32752 tokens
// in 2047 pages) held 270,660,464 bytes against the 268,435,456 bound: the recipe set the edge's
// pages aside only after drawing the other sequences' rows, so 82 chunks took 34 of them. The
// edge's pages and work are now set aside before any row is drawn.
TEST(FuzzProduction, TheEdgeSequencesPagesAreSetAsideBeforeTheRows) {
  const std::vector<uint8_t> bytes = {
      0x50, 0x52, 0xfd, 0x02, 0x00, 0xff, 0xff, 0xff, 0x3a, 0xff, 0xd6, 0x53, 0x53, 0x53, 0x53, 0x53,
      0x53, 0xe3, 0xe3, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e,
      0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e,
      0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e,
      0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e,
      0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e, 0x8e,
      0x8e, 0x8e, 0x8e, 0x8e, 0xe3, 0xe3, 0xe3, 0xe3, 0xe3, 0xe3, 0xe3, 0xe3, 0xe3, 0x00, 0xa1, 0x46,
      0x06, 0x72, 0xa2, 0x5a, 0x00};
  const ProductionValidateInput v = decode_production_validate(*production_payload(bytes));
  ASSERT_EQ(v.spec.dialect, Dialect::kTpuInferenceV3);
  EXPECT_EQ(v.spec.edge, props::ProductionEdge::kInt16WindowAt);
  EXPECT_EQ(v.spec.max_kv_len(), 32752);
  EXPECT_LE(v.spec.memory_bytes(), props::kProductionMemoryBytes);
  const props::V3Materialized m =
      props::materialize_v3(props::production_v3_case(v.spec), props::Contents::kZeros);
  EXPECT_LE(props::held_bytes(m.inputs), props::kProductionMemoryBytes);
  EXPECT_EQ(fuzz_validate(bytes.data(), bytes.size()), 0);
}

}  // namespace rpa::fuzz
