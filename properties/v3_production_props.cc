// The properties on the production profile's v3 calls (casegen/production.h; docs/properties.md,
// "The production profile"): serving-shaped calls of real models, seconds each, so each test
// draws a few calls per dialect rather than RapidCheck's hundreds: RPA_PRODUCTION_CALLS of
// them (default 1: a v3 call through the literal schedule can take a minute), from RPA_PRODUCTION_SEED (default: a new seed
// every run, printed with each call's replay line, as a RapidCheck property's seed is).
//
// On each call:
// - jax: properties/jax_production_props.cc;
// - tpu-inference v3 (both dialects): native and strict accept, and with named v3 mutations
//   both modes give the v3 spec model's verdict; the tiled kernel agrees with the v3
//   reference (kernel semantics, rpa's tolerance, the cache bit for bit), and so does the
//   literal v3 schedule on a TPU generation drawn from 5 to 7 (the v3 kernel's tolerance).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernel/v3_kernel.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_production.h"
#include "casegen/v3_spec_model.h"
#include "properties/production_calls.h"
#include "properties/v3_kernel_check.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "validation/v3_validate.h"

namespace rpa::props {
namespace {

void check_v3_calls(Dialect d) {
  for (const ProductionSpec& s : calls(d)) {
    SCOPED_TRACE(describe(s) + "\n  spec: " + production_spec_hex(s));
    const V3CaseSpec c = production_v3_case(s);
    const V3Materialized m = materialize_v3(c);
    for (Mode mode : {Mode::kStrict, Mode::kJax}) {
      const std::optional<V3Failure> f = v3_validate(d, m.inputs, m.params, mode);
      ASSERT_FALSE(f) << v3_verdict_text(f);
    }
    const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
    const V3KernelResult got = v3_tiled_attention(d, m.inputs, m.params, {.threads = 2});
    const V3Comparison tiled = v3_compare(d, m.inputs, m.params, ref, got.out, got.kv_cache,
                                          kRpaTolerance);
    EXPECT_TRUE(tiled.agree()) << "tiled kernel: " << describe_v3_comparison(tiled);
    const int version = 5 + static_cast<int>(static_cast<uint64_t>(s.data_seed) % 3);
    const V3KernelResult lit = v3_literal_attention(d, m.inputs, m.params, {.tpu_version = version});
    const V3Comparison literal = v3_compare(d, m.inputs, m.params, ref, lit.out, lit.kv_cache);
    EXPECT_TRUE(literal.agree()) << "literal v3 schedule on TPU v" << version << ": "
                                 << describe_v3_comparison(literal);

    // Named v3 mutations, one at a time, against the v3 spec model.
    std::vector<V3MutationKind> kinds;
    for (V3MutationKind k : all_v3_mutation_kinds()) {
      if (v3_mutation_applies(k, c)) kinds.push_back(k);
    }
    const uint64_t salt = static_cast<uint64_t>(s.data_seed);
    for (V3MutationKind k : pick(kinds, env_count("RPA_PRODUCTION_MUTATIONS", 6), salt)) {
      const V3Mutation mutation{k, static_cast<int64_t>(salt % 0x10000)};
      V3MutatedCase mutated{m, {}};
      apply_v3_mutation(mutation, c, mutated.call, mutated.declared);
      std::string why;
      EXPECT_TRUE(check_v3_mutated(c, std::span<const V3Mutation>(&mutation, 1), mutated, &why))
          << why;
    }
  }
}

TEST(ProductionProps, V3CallsMatchTheReferenceAndTheLiteralSchedule) {
  check_v3_calls(Dialect::kTpuInferenceV3);
}

TEST(ProductionProps, Hd64CallsMatchTheReferenceAndTheLiteralSchedule) {
  check_v3_calls(Dialect::kTpuInferenceV3Hd64);
}

}  // namespace
}  // namespace rpa::props
