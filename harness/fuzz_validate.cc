// fuzz_validate: bytes -> CaseSpec with 0-2 named mutations (ByteSource, the properties'
// decoder) -> both validation modes against the spec model, rule and exact message; and
// validate()'s verdict is the first failure validate_all() lists. Caps: target_inputs.h.
// An input tagged v3 (target_inputs.h: kV3Tag) is a generated tpu-inference v3 case (either
// dialect) with 0-2 named v3 mutations instead, checked by the v3 spec model's entry point
// (casegen/v3_spec_model.h: check_v3_validation, both modes' rule and exact message, and
// v3_validate_all's first failure), materialized with zeros as the jax cases are. An input
// tagged production (kProductionTag) is a production call of any dialect
// (casegen/production.h) with 0-2 named mutations, materialized with zeros, its bound
// checked (check_held_bytes), and checked the same way.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness/target_inputs.h"
#include "harness/targets.h"
#include "harness/jax_validation_check.h"
#include "casegen/jax_case_codec.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "validation/jax_validate.h"

namespace {

using namespace rpa;

[[noreturn]] void fail(const props::CaseSpec& spec, Mode mode, const std::string& what) {
  std::fprintf(stderr,
               "fuzz_validate: %s mode: %s\n%s\nreplay: rpa gen --spec %s -o case.npz && "
               "rpa validate case.npz --mode %s --all\n",
               std::string(mode_name(mode)).c_str(), what.c_str(), props::describe(spec).c_str(),
               props::spec_hex(spec).c_str(), std::string(mode_name(mode)).c_str());
  std::abort();
}

// The recipe's bounds hold for what it materialized (before any mutation): memory_bytes() is
// the arrays' bytes, and at most kProductionMemoryBytes. The zeros allocate nothing, so the
// target's allocation limit no longer catches a call past the bound (it once caught an hd64
// cache counted at a quarter of its size): this does, on every production input.
template <class In>
void check_held_bytes(const props::ProductionSpec& s, const In& in, const std::string& replay) {
  const int64_t held = props::held_bytes(in), formula = s.memory_bytes();
  if (std::abs(held - formula) > props::memory_bytes_slack(s) ||
      formula > props::kProductionMemoryBytes) {
    std::fprintf(stderr,
                 "fuzz_validate (production): the call holds %lld bytes, memory_bytes() says "
                 "%lld, the bound is %lld\n%s",
                 static_cast<long long>(held), static_cast<long long>(formula),
                 static_cast<long long>(props::kProductionMemoryBytes), replay.c_str());
    std::abort();
  }
}

// A production call (target_inputs.h: kProductionTag), materialized with zeros.
void check_production(const fuzz::ProductionValidateInput& v) {
  const std::string replay = "production call " + props::production_spec_hex(v.spec) + "\n" +
                             props::describe(v.spec) + "\n";
  if (v.spec.dialect == Dialect::kJax) {
    props::CaseSpec c = props::production_case(v.spec);
    c.mutations = v.mutations;
    props::Materialized m = props::materialize_valid(c, props::Contents::kZeros);
    check_held_bytes(v.spec, m.inputs, replay);
    props::apply_mutations(c, m);
    for (Mode mode : {Mode::kStrict, Mode::kJax}) {
      const std::optional<Failure> want = props::expected_failure(m, mode);
      const fuzz::ValidationCheck got = fuzz::check_validation(m.inputs, m.params, {.mode = mode});
      if (got.verdict != want || got.problem) {
        std::fprintf(stderr,
                     "fuzz_validate (production): %s mode: spec model says %s, validate says "
                     "%s%s%s\n%s",
                     std::string(mode_name(mode)).c_str(), props::verdict_text(want).c_str(),
                     props::verdict_text(got.verdict).c_str(), got.problem ? "; " : "",
                     got.problem ? got.problem->c_str() : "", replay.c_str());
        std::abort();
      }
    }
    return;
  }
  const props::V3CaseSpec c = props::production_v3_case(v.spec);
  props::V3MutatedCase m{props::materialize_v3(c, props::Contents::kZeros), {}};
  check_held_bytes(v.spec, m.call.inputs, replay);
  for (const props::V3Mutation& mutation : v.v3_mutations) {
    props::apply_v3_mutation(mutation, c, m.call, m.declared);
  }
  std::string why;
  if (!props::check_v3_mutated(c, v.v3_mutations, m, &why)) {
    std::fprintf(stderr, "fuzz_validate (production): %s%s", why.c_str(), replay.c_str());
    std::abort();
  }
}

}  // namespace

int rpa::fuzz::fuzz_validate(const uint8_t* data, size_t size) {
  if (const auto production = fuzz::production_payload(std::span<const uint8_t>(data, size))) {
    check_production(fuzz::decode_production_validate(*production));
    return 0;
  }
  if (const auto v3 = fuzz::v3_payload(std::span<const uint8_t>(data, size))) {
    const fuzz::V3ValidateInput v = fuzz::decode_v3_validate(*v3);
    std::string why;
    // Validation reads no q, k, v or cache data: leave them zero (the sink keeps its data).
    if (!props::check_v3_validation(v.spec, v.mutations, &why, props::Contents::kZeros)) {
      std::fprintf(stderr, "fuzz_validate (v3): %s\n", why.c_str());
      std::abort();
    }
    return 0;
  }
  const props::CaseSpec spec =
      props::decode_case(std::span<const uint8_t>(data, size), fuzz::validate_options());
  // Validation reads no q or kv_pages data: leave them zero.
  const props::Materialized m = props::materialize(spec, props::Contents::kZeros);
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    const std::optional<Failure> want = props::expected_failure(m, mode);
    const fuzz::ValidationCheck v = fuzz::check_validation(m.inputs, m.params, {.mode = mode});
    if (v.verdict != want) {
      fail(spec, mode,
           "spec model says " + props::verdict_text(want) + ", validate says " +
               props::verdict_text(v.verdict));
    }
    if (v.problem) fail(spec, mode, *v.problem);
  }
  return 0;
}
