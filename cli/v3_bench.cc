// rpa bench on tpu-inference v3's kernel.py (cli/v3_bench.h): the v3 workload's subject, timed
// on its own and against its jax twin (cli/jax_bench.h).
#include "cli/v3_bench.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/jax_bench.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"

namespace rpa {
namespace {

// tpu-inference v3's kernel.py on the same shapes (bench::build_v3_workload): the fused update
// and attention over the packed cache, checked against the v3 reference (oracle/v3_compare.h:
// the cache bit for bit, the output within its tolerance). atol is the largest allowance the
// comparison used, rtol 0 (its tolerance is per element).
Subject v3_subject(const bench::Workload& jax, const bench::V3Workload& w) {
  Subject sb;
  sb.label = w.label();
  sb.facts.workload = "v3-" + w.spec.name;
  sb.facts.dialect = std::string(dialect_name(Dialect::kTpuInferenceV3));
  sb.facts.dtype = dtype_name(w.spec.dtype);
  sb.facts.flops = bench::useful_flops(jax.inputs);
  sb.facts.kv_bytes = bench::effective_kv_bytes(jax.inputs);
  sb.facts.grid_heads = 1;
  sb.facts.grid_q = 1;
  sb.facts.bkv = v3_kv_pages_per_block(Dialect::kTpuInferenceV3, w.inputs, w.params);
  sb.facts.bq = 0;
  constexpr Dialect d = Dialect::kTpuInferenceV3;
  auto ref = std::make_shared<std::optional<V3ReferenceResult>>();
  sb.reference = [&w, ref] {
    V3ReferenceResult r = v3_reference(d, w.inputs, w.params);
    if (!*ref) *ref = std::move(r);
  };
  // Timed as the TPU runs it, the cache updated in place (its kv_cache is donated): no copy
  // of the cache per call. The update rewrites the records the keys and values already hold.
  auto cache = std::make_shared<Tensor>(w.inputs.kv_cache);
  sb.kernel = [&w, cache](int threads) {
    (void)v3_tiled_attention_in_place(d, w.inputs, *cache, w.params, KernelOptions{.threads = threads});
  };
  sb.check = [&w, ref](int threads, Row& row) {
    const V3KernelResult r = v3_tiled_attention(d, w.inputs, w.params, KernelOptions{.threads = threads});
    const V3Comparison c = v3_compare(d, w.inputs, w.params, **ref, r.out, r.kv_cache);
    row.agree = c.agree();
    row.max_abs_err = c.max_abs_err;
    row.atol = c.max_allowed;
    row.rtol = 0.0;
    return c.agree() ? std::string() : describe_v3_comparison(c);
  };
  return sb;
}

}  // namespace

void bench_v3_workload(const bench::WorkloadSpec& spec, const BenchStep& step, BenchResults& out) {
  const bench::Workload w = bench::build_workload(spec);  // throws if strict rejects
  const bench::V3Workload v = bench::build_v3_workload(w);  // throws if strict rejects
  const Subject v3_sb = v3_subject(w, v);
  for (Row& r : measure(v3_sb, step.preset, step.sweep, step.index, step.total)) {
    out.rows.push_back(std::move(r));
  }
  const Subject jax_sb = jax_subject(w);
  for (const int threads : step.sweep) {
    out.pairs.push_back(measure_pair(jax_sb, v3_sb, threads, 2 * step.preset.kernel_runs + 1));
  }
}

}  // namespace rpa
