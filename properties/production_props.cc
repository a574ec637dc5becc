// The properties on the production profile (casegen/production.h; docs/properties.md,
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
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

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
#include "casegen/random_source.h"
#include "properties/sanitized.h"
#include "properties/v3_kernel_check.h"
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


int64_t env_count(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

// The run's seeds: RPA_PRODUCTION_SEED, else a fresh one (printed, so a failure replays).
uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* v = std::getenv("RPA_PRODUCTION_SEED");
    if (v && *v) return static_cast<uint64_t>(std::strtoull(v, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

// The calls a test checks: RPA_PRODUCTION_CALLS of the dialect, under the sanitizers only
// those of at most 64 MiB (the larger ones are about answers, which the release build checks).
std::vector<ProductionSpec> calls(Dialect d) {
  const int64_t n = env_count("RPA_PRODUCTION_CALLS", 1);
  std::vector<ProductionSpec> out;
  uint64_t state = base_seed() ^ (static_cast<uint64_t>(d) + 1) * 0x9e3779b97f4a7c15ULL;
  for (int tries = 0; static_cast<int64_t>(out.size()) < n && tries < 1000; ++tries) {
    const uint64_t seed = splitmix64(state);
    ProductionSpec s = seeded_production_spec(seed, d);
    if (kSanitized && s.memory_bytes() > (int64_t{64} << 20)) continue;
    std::printf("production call: rpa gen --profile production --dialect %s --seed %llu "
                "(RPA_PRODUCTION_SEED=%llu)\n%s\n",
                std::string(dialect_name(d)).c_str(), static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(base_seed()), describe(s).c_str());
    out.push_back(std::move(s));
  }
  return out;
}

// n distinct picks from `among`, drawn from the seed (a partial shuffle of their indices).
template <class T>
std::vector<T> pick(const std::vector<T>& among, int64_t n, uint64_t seed) {
  std::vector<size_t> order(among.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::vector<T> out;
  for (size_t k = 0; k < order.size() && static_cast<int64_t>(out.size()) < n; ++k) {
    std::swap(order[k], order[k + static_cast<size_t>(splitmix64(seed) % (order.size() - k))]);
    out.push_back(among[order[k]]);
  }
  return out;
}

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
