// rpa bench on JAX's dialect (cli/jax_bench.h): the jax workload's subject and its timing.
#include "cli/jax_bench.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "core/python_repr.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"

namespace rpa {

Subject jax_subject(const bench::Workload& w) {
  Subject sb;
  sb.label = w.label();
  sb.facts.workload = w.spec.name;
  sb.facts.dtype = dtype_name(w.spec.dtype);
  sb.facts.flops = bench::useful_flops(w.inputs);
  sb.facts.kv_bytes = bench::effective_kv_bytes(w.inputs);
  const KernelPlan plan = plan_kernel(w.inputs, w.params, default_target_profile());
  sb.facts.grid_heads = plan.num_heads_blks;
  sb.facts.grid_q = plan.num_q_blks;
  sb.facts.bkv = plan.blocks.kv_pages_per_block;
  sb.facts.bq = plan.blocks.queries_per_block;
  auto ref = std::make_shared<std::optional<ReferenceResult>>();
  sb.reference = [&w, ref] {
    ReferenceResult r = dense_reference(w.inputs, w.params);
    if (!*ref) *ref = std::move(r);
  };
  sb.kernel = [&w](int threads) { (void)tiled_attention(w.inputs, w.params, KernelOptions{.threads = threads}); };
  sb.check = [&w, ref](int threads, Row& row) {
    const Tolerance tol = tolerance_for_case(w.inputs, w.params, **ref);
    const Tensor out = tiled_attention(w.inputs, w.params, KernelOptions{.threads = threads});
    const Comparison c = compare_outputs(out, (*ref)->out, kv_view(w.inputs), tol);
    row.agree = c.agree();
    row.max_abs_err = c.max_abs_err;
    row.atol = tol.atol;
    row.rtol = tol.rtol;
    return c.agree() ? std::string()
                     : describe_mismatch(c) + " (atol " + py_float_repr(tol.atol) + ", rtol " +
                           py_float_repr(tol.rtol) + ")";
  };
  return sb;
}

void bench_jax_workload(const bench::WorkloadSpec& spec, const BenchStep& step, BenchResults& out) {
  const bench::Workload w = bench::build_workload(spec);  // throws if strict rejects
  for (Row& r : measure(jax_subject(w), step.preset, step.sweep, step.index, step.total)) {
    out.rows.push_back(std::move(r));
  }
}

}  // namespace rpa
