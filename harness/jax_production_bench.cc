// rpa bench's production calls of JAX's dialect (harness/jax_production_bench.h): each stage
// timed once, each kernel's output checked against the reference at the properties' tolerance.
#include "harness/jax_production_bench.h"

#include <optional>
#include <stdexcept>

#include "casegen/jax_materialize.h"
#include "casegen/jax_production.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "harness/production_stages.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa::bench {

void time_jax_production(const props::ProductionSpec& s, int threads,
                         const std::function<void(std::string_view)>& progress,
                         ProductionTiming& t) {
  const props::Materialized m =
      timed(t.stages, "materialize", progress, [&] { return props::materialize(props::production_case(s)); });
  const std::optional<Failure> rejected = timed(t.stages, "validate", progress, [&] {
    std::optional<Failure> f = validate(m.inputs, m.params, {.mode = Mode::kStrict});
    return f ? f : validate(m.inputs, m.params, {.mode = Mode::kJax});
  });
  if (rejected) throw std::logic_error("production call rejected: " + rejected->message);
  const ReferenceResult ref = timed(t.stages, "reference", progress,
                                    [&] { return dense_reference(m.inputs, m.params, Semantics::kKernel); });
  const Tolerance tol = tolerance_for_case(m.inputs, m.params, ref);
  const PagedKvView view = kv_view(m.inputs);
  const Tensor tiled = timed(t.stages, "tiled", progress, [&] {
    return tiled_attention(m.inputs, m.params, {.threads = threads});
  });
  const Comparison a = compare_outputs(tiled, ref.out, view, tol);
  record(t.stages.back(), a.agree(), describe_mismatch(a));
  const Tensor literal = timed(t.stages, "literal", progress, [&] {
    return tiled_attention(m.inputs, m.params, {.literal_schedule = true});
  });
  const Comparison b = compare_outputs(literal, ref.out, view, tol);
  record(t.stages.back(), b.agree(), describe_mismatch(b));
}

}  // namespace rpa::bench
