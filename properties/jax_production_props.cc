// The properties on the production profile's jax calls (casegen/production.h; docs/properties.md,
// "The production profile"): serving-shaped calls of real models, seconds each, so each test
// draws a few calls per dialect rather than RapidCheck's hundreds: RPA_PRODUCTION_CALLS of
// them (default 1: a v3 call through the literal schedule can take a minute), from RPA_PRODUCTION_SEED (default: a new seed
// every run, printed with each call's replay line, as a RapidCheck property's seed is).
//
// On each call:
// - jax: both modes give the spec model's verdict (valid), on the call and with every named
//   mutation that applies to it (RPA_PRODUCTION_MUTATIONS of them, default 6, drawn from the
//   seed); the tiled kernel and the literal Pallas schedule agree with the dense reference;
// - tpu-inference v3 (both dialects): native and strict accept, and with named v3 mutations
//   both modes give the v3 spec model's verdict; the tiled kernel agrees with the v3
//   reference (kernel semantics, rpa's tolerance, the cache bit for bit), and so does the
//   literal v3 schedule on a TPU generation drawn from 5 to 7 (the v3 kernel's tolerance).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_mutation.h"
#include "casegen/jax_production.h"
#include "casegen/jax_spec_model.h"
#include "properties/production_calls.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa::props {
namespace {

TEST(ProductionProps, JaxCallsMatchTheSpecModelAndTheReference) {
  for (const ProductionSpec& s : calls(Dialect::kJax)) {
    SCOPED_TRACE(describe(s) + "\n  spec: " + production_spec_hex(s));
    CaseSpec c = production_case(s);
    const Materialized m = materialize(c);
    for (Mode mode : {Mode::kStrict, Mode::kJax}) {
      const std::optional<Failure> want = expected_failure(m, mode);
      const std::optional<Failure> got = validate(m.inputs, m.params, {.mode = mode});
      EXPECT_EQ(got, want) << mode_name(mode) << ": spec model " << verdict_text(want)
                           << ", validate " << verdict_text(got);
    }
    ASSERT_FALSE(validate(m.inputs, m.params, {.mode = Mode::kStrict}));
    const ReferenceResult ref = dense_reference(m.inputs, m.params, Semantics::kKernel);
    const Tolerance tol = tolerance_for_case(m.inputs, m.params, ref);
    const PagedKvView view = kv_view(m.inputs);
    const Comparison tiled = compare_outputs(tiled_attention(m.inputs, m.params, {.threads = 2}),
                                             ref.out, view, tol);
    EXPECT_TRUE(tiled.agree()) << "tiled kernel: " << describe_mismatch(tiled);
    const Comparison literal = compare_outputs(
        tiled_attention(m.inputs, m.params, {.literal_schedule = true}), ref.out, view, tol);
    EXPECT_TRUE(literal.agree()) << "literal schedule: " << describe_mismatch(literal);

    // The validation properties on the same call: named mutations, one at a time.
    std::vector<MutationKind> kinds;
    for (MutationKind k : all_mutation_kinds()) {
      if (mutation_applies(k, c)) kinds.push_back(k);
    }
    const uint64_t salt = static_cast<uint64_t>(s.data_seed);
    for (MutationKind k : pick(kinds, env_count("RPA_PRODUCTION_MUTATIONS", 6), salt)) {
      c.mutations = {{k, static_cast<int64_t>(salt % 0x10000)}};
      Materialized mutated = m;
      apply_mutations(c, mutated);
      for (Mode mode : {Mode::kStrict, Mode::kJax}) {
        const std::optional<Failure> want = expected_failure(mutated, mode);
        const std::optional<Failure> got = validate(mutated.inputs, mutated.params, {.mode = mode});
        EXPECT_EQ(got, want) << "mutation " << mutation_name(k) << ", " << mode_name(mode)
                             << ": spec model " << verdict_text(want) << ", validate "
                             << verdict_text(got);
      }
    }
  }
}

}  // namespace
}  // namespace rpa::props
