// The tpu-inference v3 family of fuzz inputs (harness/input_families.h): bytes after kV3Tag
// decode to a V3ValidateInput, a V3DifferentialInput or a raw v3 call; what fuzz_validate,
// fuzz_differential and fuzz_raw_inputs check of each, and of a production call of a v3 dialect.
#include "harness/v3_family.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>

#include "casegen/production.h"
#include "casegen/v3_production.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "harness/target_inputs.h"
#include "harness/v3_production_bench.h"
#include "harness/v3_target_inputs.h"
#include "harness/v3_raw_check.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "validation/v3_validate.h"

namespace rpa::fuzz {
namespace {

[[noreturn]] void fail_v3(const fuzz::V3DifferentialInput& d, const std::string& what) {
  std::fprintf(stderr,
               "fuzz_differential: %s\n%s\nreplay: rpa gen --dialect %s --spec %s -o case.npz && "
               "rpa check case.npz --threads %lld\n",
               what.c_str(), props::describe(d.spec).c_str(),
               std::string(dialect_name(d.spec.dialect)).c_str(),
               props::v3_spec_hex(d.spec).c_str(), static_cast<long long>(d.threads));
  std::abort();
}

void v3_differential(std::span<const uint8_t> payload) {
  const fuzz::V3DifferentialInput d = fuzz::decode_v3_differential(payload);
  const Dialect dialect = d.spec.dialect;
  const props::V3Materialized m = props::materialize_v3(d.spec);
  // Strict-valid by construction; a rejection is a bug of the generator or of validation.
  const std::optional<V3Failure> strict = v3_validate(dialect, m.inputs, m.params, Mode::kStrict);
  if (strict) {
    fail_v3(d, "strict validation rejects a generated v3 case: " +
                   std::string(v3_rule_info(strict->rule).name) + ": " + strict->message);
  }
  const V3ReferenceResult ref = v3_reference(dialect, m.inputs, m.params, Semantics::kKernel);
  const V3KernelResult got =
      v3_tiled_attention(dialect, m.inputs, m.params, {.threads = static_cast<int>(d.threads)});
  const V3Comparison c = v3_compare(dialect, m.inputs, m.params, ref, got.out, got.kv_cache,
                                    kRpaTolerance);
  if (!c.agree())
    fail_v3(d, "v3 kernel vs reference (kernel semantics): " + describe_v3_comparison(c));
  const V3KernelResult other =
      v3_tiled_attention(dialect, m.inputs, m.params, {.threads = d.threads == 1 ? 2 : 1});
  // Same dtype, shape and bytes (one memcmp each).
  if (!(other.out == got.out) || !(other.kv_cache == got.kv_cache)) {
    fail_v3(d, "v3 kernel: 1 and 2 threads give different bits");
  }
}

void v3_validate_input(std::span<const uint8_t> payload) {
  const fuzz::V3ValidateInput v = fuzz::decode_v3_validate(payload);
  std::string why;
  // Validation reads no q, k, v or cache data: leave them zero (the sink keeps its data).
  if (!props::check_v3_validation(v.spec, v.mutations, &why, props::Contents::kZeros)) {
    std::fprintf(stderr, "fuzz_validate (v3): %s\n", why.c_str());
    std::abort();
  }
}

RawCheck v3_raw(std::span<const uint8_t> payload) {
  return check_v3_raw_call(decode_v3_raw_call(payload));
}

void v3_production(std::span<const uint8_t> payload) {
  const fuzz::V3ProductionInput v = fuzz::decode_v3_production(payload);
  const std::string replay = fuzz::production_replay(v.spec);
  const props::V3CaseSpec c = props::production_v3_case(v.spec);
  props::V3MutatedCase m{props::materialize_v3(c, props::Contents::kZeros), {}};
  check_held_bytes(v.spec, props::held_bytes(m.call.inputs), replay);
  for (const props::V3Mutation& mutation : v.mutations) {
    props::apply_v3_mutation(mutation, c, m.call, m.declared);
  }
  std::string why;
  if (!props::check_v3_mutated(c, v.mutations, m, &why)) {
    std::fprintf(stderr, "fuzz_validate (production): %s%s", why.c_str(), replay.c_str());
    std::abort();
  }
}

bool v3_owns(Dialect d) { return is_v3(d); }

}  // namespace

const InputFamily kV3Family{
    .name = "v3",
    .tag = {kV3Tag[0], kV3Tag[1]},
    .owns = v3_owns,
    .validate = v3_validate_input,
    .differential = v3_differential,
    .raw = v3_raw,
    .production = v3_production,
    .time_production = bench::time_v3_production,
};

}  // namespace rpa::fuzz
