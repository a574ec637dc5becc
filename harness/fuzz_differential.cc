// fuzz_differential: bytes -> a thread count, a schedule and a small generated valid CaseSpec
// (caps and why: target_inputs.h) -> the tiled kernel (default or literal schedule) against
// the dense reference within the case's tolerance. The definition holds on every generated
// case; where strict mode rejects one because the Pallas kernel departs from it
// (stale_kv_block, rows_not_computed), the literal schedule, which is the Pallas program, is
// compared on every other row (casegen/jax_departed_rows.h). On disagreement it prints the
// first mismatch, the case and the command that replays it (`rpa check --schedule literal`
// for the literal schedule), then aborts.
// An input tagged v3 (target_inputs.h: kV3Tag) is a thread count and a generated
// tpu-inference v3 case (either dialect) instead: v3_tiled_attention against the v3
// reference's kernel semantics (the updated cache bit for bit, the output within the
// float32-accumulator tolerance, oracle/v3_compare.h), and the same bits on the other thread
// count.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "harness/target_inputs.h"
#include "harness/targets.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "casegen/jax_case_codec.h"
#include "casegen/jax_departed_rows.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "reference/jax_reference.h"
#include "reference/v3_reference.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace {

using namespace rpa;

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

}  // namespace

int rpa::fuzz::fuzz_differential(const uint8_t* data, size_t size) {
  if (const auto v3 = fuzz::v3_payload(std::span<const uint8_t>(data, size))) {
    v3_differential(*v3);
    return 0;
  }
  const fuzz::DifferentialInput d = fuzz::decode_differential(std::span<const uint8_t>(data, size));
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
  return 0;
}
