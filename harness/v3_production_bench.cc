// rpa bench's production calls of the tpu-inference v3 dialects
// (harness/v3_production_bench.h): each stage timed once, each kernel's output and cache
// checked against the v3 reference.
#include "harness/v3_production_bench.h"

#include <optional>
#include <stdexcept>
#include <string>

#include "casegen/v3_materialize.h"
#include "casegen/v3_production.h"
#include "harness/production_stages.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "validation/v3_validate.h"

namespace rpa::bench {

void time_v3_production(const props::ProductionSpec& s, int threads,
                        const std::function<void(std::string_view)>& progress,
                        ProductionTiming& t) {
  const Dialect d = s.dialect;
  const props::V3Materialized m = timed(t.stages, "materialize", progress,
                                        [&] { return props::materialize_v3(props::production_v3_case(s)); });
  const std::optional<V3Failure> rejected = timed(t.stages, "validate", progress, [&] {
    std::optional<V3Failure> f = v3_validate(d, m.inputs, m.params, Mode::kStrict);
    return f ? f : v3_validate(d, m.inputs, m.params, Mode::kJax);
  });
  if (rejected) throw std::logic_error("production call rejected: " + rejected->message);
  const V3ReferenceResult ref = timed(t.stages, "reference", progress, [&] {
    return v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  });
  const V3KernelResult tiled = timed(t.stages, "tiled", progress, [&] {
    return v3_tiled_attention(d, m.inputs, m.params, {.threads = threads});
  });
  const V3Comparison a = v3_compare(d, m.inputs, m.params, ref, tiled.out, tiled.kv_cache, kRpaTolerance);
  record(t.stages.back(), a.agree(), describe_v3_comparison(a));
  for (int version : {5, 6, 7}) {
    const V3KernelResult lit = timed(t.stages, "literal v" + std::to_string(version), progress, [&] {
      return v3_literal_attention(d, m.inputs, m.params, {.tpu_version = version});
    });
    const V3Comparison b = v3_compare(d, m.inputs, m.params, ref, lit.out, lit.kv_cache);
    record(t.stages.back(), b.agree(), describe_v3_comparison(b));
  }
}

}  // namespace rpa::bench
