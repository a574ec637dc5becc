// Properties of validation and of the case builder (DESIGN.md section 9): both modes report
// exactly what the spec model expects, and a generated case survives encoding to bytes.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "properties/jax_rc_case.h"
#include "casegen/jax_spec_model.h"
#include "casegen/random_source.h"
#include "validation/jax_validate.h"

namespace rpa::props {
namespace {

void assert_modes_match_model(const Materialized& m) {
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    const std::optional<Failure> want = expected_failure(m, mode);
    const std::optional<Failure> got = validate(m.inputs, m.params, {.mode = mode});
    RC_LOG() << mode_name(mode) << " mode: spec model says " << verdict_text(want)
             << "\n  validate says " << verdict_text(got) << "\n";
    RC_ASSERT(got == want);
  }
}

// Valid cases and cases with up to two mutations (one shape, the rest parameters).
RC_GTEST_PROP(Validation, BothModesMatchSpecModel, ()) {
  const CaseSpec spec = *gen_case();
  const Materialized m = materialize(spec);
  const std::optional<Failure> strict = expected_failure(m, Mode::kStrict);
  RC_TAG(strict ? rule_info(strict->rule).name : "valid");
  assert_modes_match_model(m);
}

// Every mutation in turn on the same valid case, so each rule is hit in every run.
RC_GTEST_PROP(Validation, EveryMutationMatchesSpecModel, ()) {
  CaseSpec spec = *gen_valid_case();
  const int64_t arg = *rc::gen::inRange<int64_t>(0, 0x10000).as("mutation arg");
  const Materialized valid = materialize_valid(spec);
  for (MutationKind kind : all_mutation_kinds()) {
    if (!mutation_applies(kind, spec)) continue;
    spec.mutations = {{kind, arg}};
    RC_LOG() << "mutation " << mutation_name(kind) << "(" << arg << "): rpa gen --spec "
             << spec_hex(spec) << "\n";
    Materialized m = valid;
    apply_mutations(spec, m);
    assert_modes_match_model(m);
  }
}

// Valid by construction (the definition, DESIGN.md section 2, holds). Strict accepts, or
// rejects with one of the Pallas kernel's own departures from the definition on such input
// (stale_kv_block, rows_not_computed: findings 8 and 9); JAX accepts too, except for its two
// documented over-rejections (garbage kv_lens in padding slots, a KV block past
// pages_per_seq) and where the Pallas kernel itself raises on such input (jax_crash: it
// traces only head_dims that are multiples of 128, reads a query block of q even without
// rows, and asserts that K and V share a dtype, which one scale alone breaks under float8
// KV). Each rejection is the one the spec model predicts.
RC_GTEST_PROP(Validation, AcceptsValidCases, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  const std::optional<Failure> strict = validate(m.inputs, m.params, {.mode = Mode::kStrict});
  RC_LOG() << "strict: " << verdict_text(strict) << "\n";
  if (strict) {
    RC_ASSERT(is_pallas_departure(strict->rule));
    RC_ASSERT(strict == expected_failure(m, Mode::kStrict));
  }
  const std::optional<Failure> jax = validate(m.inputs, m.params, {.mode = Mode::kJax});
  RC_LOG() << "jax: " << verdict_text(jax) << "\n";
  const bool over_rejects = jax && (jax->rule == RuleId::pages_per_seq_too_small ||
                                    jax->rule == RuleId::kv_pages_per_block_range);
  const bool pallas_raises = jax && (jax->rule == RuleId::head_dim_not_lane_multiple ||
                                     jax->rule == RuleId::max_num_batched_tokens_zero ||
                                     jax->rule == RuleId::kv_scales_one_sided);
  if (jax) {
    RC_ASSERT(over_rejects || pallas_raises);
    RC_ASSERT(jax == expected_failure(m, Mode::kJax));
  }
  RC_CLASSIFY(strict.has_value(), "Pallas departs from the definition");
  RC_CLASSIFY(over_rejects, "jax over-rejects");
  RC_CLASSIFY(pallas_raises, "Pallas raises");
  RC_TAG(batch_mix(spec), dtype_name(spec.q_dtype), dtype_name(spec.kv_dtype));
}

// The mutations reach every rule of the table, in the mode(s) that enforce it, and the
// validator reports each one somewhere (so no rule is modelled but never exercised); and
// each mutation, alone on a valid case, makes the first mode that enforces the rule it is
// named after (strict, else jax) report that rule for some variant. jax mode meets the
// Pallas kernel's program rules only where the kernel traces, at a head_dim that is a
// multiple of 128, so some base cases have head_dim 128.
TEST(Mutations, ReachEveryRule) {
  std::set<std::pair<RuleId, Mode>> expected, reported;
  std::set<MutationKind> named_rule_seen;
  BuildOptions valid;
  valid.max_mutations = 0;
  BuildOptions traced = valid;
  traced.min_head_dim = 128;
  traced.max_head_dim = 128;
  std::vector<CaseSpec> bases;
  for (uint64_t seed = 1; seed <= 14; ++seed) {
    RandomSource source(seed, 100);
    bases.push_back(build_case(source, seed <= 10 ? valid : traced));
  }
  for (CaseSpec& spec : bases) {
    const Materialized base = materialize_valid(spec);
    for (MutationKind kind : all_mutation_kinds()) {
      if (!mutation_applies(kind, spec)) continue;
      const RuleInfo& named = rule_info(mutation_rule(kind));
      const Mode named_mode = named.in_strict ? Mode::kStrict : Mode::kJax;
      for (int64_t arg = 0; arg < 6; ++arg) {
        spec.mutations = {{kind, arg}};
        Materialized m = base;
        apply_mutations(spec, m);
        for (Mode mode : {Mode::kStrict, Mode::kJax}) {
          if (const auto f = expected_failure(m, mode)) expected.insert({f->rule, mode});
          if (const auto f = validate(m.inputs, m.params, {.mode = mode})) {
            reported.insert({f->rule, mode});
            if (mode == named_mode && f->rule == named.id) named_rule_seen.insert(kind);
          }
        }
      }
    }
  }
  for (MutationKind kind : all_mutation_kinds()) {
    EXPECT_TRUE(named_rule_seen.contains(kind)) << mutation_name(kind);
  }
  for (const RuleInfo& rule : rule_table()) {
    for (Mode mode : {Mode::kStrict, Mode::kJax}) {
      if (!rule.in(mode)) continue;
      EXPECT_TRUE(expected.contains({rule.id, mode})) << rule.name << " in " << mode_name(mode);
      EXPECT_TRUE(reported.contains({rule.id, mode})) << rule.name << " in " << mode_name(mode);
    }
  }
}

// The seeded source (rpa gen --seed, the campaign) draws the same case from the same seed.
TEST(CaseSpec, SeededSourceRepeats) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    RandomSource a(seed, 100), b(seed, 100);
    const CaseSpec spec = build_case(a);
    EXPECT_EQ(build_case(b), spec) << seed;
    EXPECT_EQ(materialize(spec).inputs, materialize(spec).inputs) << seed;
  }
}

RC_GTEST_PROP(CaseSpec, DecodeEncodeRoundTrips, ()) {
  const CaseSpec spec = *gen_case();
  RC_ASSERT(decode_case(encode_case(spec)) == spec);
  // The long-context generator's specs replay through the same hex (widest_options).
  const CaseSpec long_spec = *gen_valid_case(long_context_options());
  RC_ASSERT(decode_case(encode_case(long_spec)) == long_spec);
}

// Any bytes decode to a case, and that case encodes back to bytes that decode to it. (Under
// the default generator's bounds: the widest ones would materialize gigabytes.)
RC_GTEST_PROP(CaseSpec, AnyBytesDecode, (const std::vector<uint8_t>& bytes)) {
  const BuildOptions bounds;
  const CaseSpec spec = decode_case(bytes, bounds);
  RC_ASSERT(decode_case(encode_case(spec, bounds), bounds) == spec);
  assert_modes_match_model(materialize(spec));
}

}  // namespace
}  // namespace rpa::props
