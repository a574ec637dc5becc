// The jax family of fuzz inputs (harness/input_families.h): untagged bytes decode to a CaseSpec
// (casegen/jax_case_codec.h), a DifferentialInput or a raw call; what fuzz_validate,
// fuzz_differential and fuzz_raw_inputs check of each (their comments in fuzz_validate.cc,
// fuzz_differential.cc, fuzz_raw_inputs.cc), and of a production call of the jax dialect.
#include "harness/jax_family.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "casegen/jax_case_codec.h"
#include "casegen/jax_departed_rows.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/jax_production.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "harness/jax_production_bench.h"
#include "harness/jax_raw_check.h"
#include "harness/jax_validation_check.h"
#include "harness/jax_target_inputs.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa::fuzz {
namespace {

[[noreturn]] void fail(const props::CaseSpec& spec, Mode mode, const std::string& what) {
  std::fprintf(stderr,
               "fuzz_validate: %s mode: %s\n%s\nreplay: rpa gen --spec %s -o case.npz && "
               "rpa validate case.npz --mode %s --all\n",
               std::string(mode_name(mode)).c_str(), what.c_str(), props::describe(spec).c_str(),
               props::spec_hex(spec).c_str(), std::string(mode_name(mode)).c_str());
  std::abort();
}

[[noreturn]] void fail(const fuzz::DifferentialInput& d, bool literal, const std::string& what,
                       Semantics semantics = Semantics::kKernel) {
  std::fprintf(stderr,
               "fuzz_differential: %s\n%s\nreplay: rpa gen --spec %s -o case.npz && "
               "rpa check case.npz --threads %lld%s --semantics %s\n",
               what.c_str(), props::describe(d.spec).c_str(), props::spec_hex(d.spec).c_str(),
               static_cast<long long>(d.threads), literal ? " --schedule literal" : "",
               std::string(semantics_name(semantics)).c_str());
  std::abort();
}

void jax_validate(std::span<const uint8_t> bytes) {
  const props::CaseSpec spec =
      props::decode_case(bytes, fuzz::validate_options());
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
}

void jax_differential(std::span<const uint8_t> bytes) {
  const fuzz::DifferentialInput d = fuzz::decode_differential(bytes);
  const props::Materialized m = props::materialize(d.spec);
  // Valid by construction; a rejection is itself a bug (of the generators or of validation),
  // except where the Pallas kernel departs from the definition as the spec model predicts.
  const std::optional<Failure> strict = validate(m.inputs, m.params, {.mode = Mode::kStrict});
  if (strict && (!props::is_pallas_departure(strict->rule) ||
                 strict != props::expected_failure(m, Mode::kStrict))) {
    fail(d, false,
         "strict validation rejects a generated valid case: " + props::verdict_text(strict) +
             " (spec model: " + props::verdict_text(props::expected_failure(m, Mode::kStrict)) +
             ")");
  }
  const bool literal = d.literal != 0;
  // JAX's reference semantics too, under its looser tolerance, for the default schedule
  // where the Pallas kernel keeps to the definition (strict accepts) and V_eff is narrower
  // than float32: with float32 V_eff both semantics want the same bits. The literal schedule
  // is the Pallas program, which computes the kernel semantics. (Both semantics come from one
  // pass of the reference; the second one took a third of the target's time.)
  const DType v_dtype = m.params.v_scale ? m.inputs.q.dtype() : m.inputs.kv_pages.dtype();
  const bool jax_reference = !strict && !literal && v_dtype != DType::kFloat32;
  std::pair<ReferenceResult, ReferenceResult> refs;
  if (jax_reference) {
    refs = dense_reference_both(m.inputs, m.params);
  } else {
    refs.first = dense_reference(m.inputs, m.params);
  }
  const ReferenceResult& ref = refs.first;
  const Tolerance tol = tolerance_for_case(m.inputs, m.params, ref);
  const PagedKvView view = kv_view(m.inputs);
  const KernelOptions options{.threads = static_cast<int>(d.threads), .literal_schedule = literal};
  Tensor got = tiled_attention(m.inputs, m.params, options);
  if (literal && strict) {
    got = props::with_departed_rows_from(got, ref.out,
                                         props::departed_rows(m.inputs, m.params, options));
  }
  const Comparison c = compare_outputs(got, ref.out, view, tol);
  if (jax_reference) {
    const ReferenceResult& jax_ref = refs.second;
    const Comparison r =
        compare_outputs(got, jax_ref.out, view, tolerance_for_case(m.inputs, m.params, jax_ref));
    if (!r.agree()) {
      fail(d, literal,
           std::string(literal ? "literal" : "default") +
               " schedule vs reference (reference semantics): " + describe_mismatch(r),
           Semantics::kReference);
    }
  }
  if (!c.agree()) {
    fail(d, literal,
         std::string(literal ? "literal" : "default") + " schedule vs reference" +
             (literal && strict ? " outside the rows where the Pallas kernel departs (" +
                                      props::verdict_text(strict) + ")"
                                : std::string()) +
             " (kernel semantics): " + describe_mismatch(c) + " (atol " +
             std::to_string(c.tol.atol) + ", rtol " + std::to_string(c.tol.rtol) +
             ", largest element term " + std::to_string(c.tol.max_element_atol()) + ")");
  }
}

RawCheck jax_raw(std::span<const uint8_t> bytes) { return check_raw_call(decode_raw_call(bytes)); }

void jax_production(std::span<const uint8_t> payload) {
  const fuzz::JaxProductionInput v = fuzz::decode_jax_production(payload);
  const std::string replay = fuzz::production_replay(v.spec);
  props::CaseSpec c = props::production_case(v.spec);
  c.mutations = v.mutations;
  props::Materialized m = props::materialize_valid(c, props::Contents::kZeros);
  check_held_bytes(v.spec, props::held_bytes(m.inputs), replay);
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
}

bool jax_owns(Dialect d) { return d == Dialect::kJax; }

}  // namespace

const InputFamily kJaxFamily{
    .name = "jax",
    .tag = {},
    .owns = jax_owns,
    .validate = jax_validate,
    .differential = jax_differential,
    .raw = jax_raw,
    .production = jax_production,
    .time_production = bench::time_jax_production,
};

}  // namespace rpa::fuzz
